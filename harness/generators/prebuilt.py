"""C that some other tool (or a person) already generated, described by ``assay.json``."""

from __future__ import annotations

from pathlib import Path

from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model, file_sha256


class Prebuilt:
    name: str

    def __init__(self, directory: Path, spec: str):
        self.directory = directory
        self.name = spec

    def version(self) -> str:
        return "prebuilt"

    def variants(self, model: Model) -> list[str]:
        return ["prebuilt"]

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        if not self.directory.is_dir():
            raise ConfigError(f"{self.directory}: no such directory of generated C")
        code = GeneratedCode.from_directory(self.directory)
        if (code.input_size, code.output_size) != (model.input_size, model.output_size):
            raise ConfigError(f"{self.directory}: sizes {code.input_size}->{code.output_size} do not match "
                              f"model {model.name} ({model.input_size}->{model.output_size})")
        return code

    def identity(self, model: Model, variant: str) -> dict:
        """Every file under the directory, by its path in it and its content: edited C, header or manifest is
        checked again. Where the directory lies is left out (content keys hold content only,
        harness.core.fingerprint), so a copy elsewhere, or on a shard's host, has the same key."""
        if not self.directory.is_dir():
            return {"missing": True}
        return {"files": {p.relative_to(self.directory).as_posix(): file_sha256(p)
                          for p in sorted(self.directory.rglob("*")) if p.is_file()}}
