"""Our own ACETONE-style generator, strategy V2 (``codegen``), as an adapter.

Its variants are the source formats it reads: ``keras`` (channels-last C) and
``onnx`` (channels-first C), so one campaign checks both front ends.
"""

from __future__ import annotations

from pathlib import Path

import codegen
from harness.digests import tree_digest
from harness.errors import ModelError
from harness.generators import register
from harness.generators.generated import GeneratedCode
from harness.models.model import Model

FORMATS = ("keras", "onnx")


@register("assay-v2")
class AssayV2:
    name: str

    def version(self) -> str:
        return codegen.__version__

    def variants(self, model: Model) -> list[str]:
        return [fmt for fmt in FORMATS if fmt in model.files]

    def generate(self, model: Model, variant: str, out_dir: Path) -> GeneratedCode:
        try:
            codegen.generate(model.file(variant), out_dir, name=model.name, frontend=variant)
        except codegen.UnsupportedModel as exc:  # a refusal is about the user's model: one line, exit 2
            raise ModelError(str(exc)) from None
        return GeneratedCode.from_directory(out_dir)

    def generate_parallel(self, model: Model, variant: str, out_dir: Path, cores: int, schedule: list[list[dict]],
                          omit_wait: str | None = None) -> GeneratedCode:
        """Parallel code for ``schedule`` (per core, its ``{"node", "start", "end"}`` tasks; codegen.parallel).

        ``omit_wait`` ("read"/"write") leaves a flag wait out: only for mutation tests of the trace check.
        """
        try:
            codegen.generate(model.file(variant), out_dir, name=model.name, frontend=variant, cores=cores,
                             schedule=schedule, omit_wait=omit_wait)
        except codegen.UnsupportedModel as exc:
            raise ModelError(str(exc)) from None
        return GeneratedCode.from_directory(out_dir)

    def identity(self, model: Model, variant: str) -> dict:
        """The generator's version and its source: a changed generator regenerates, even at one version."""
        return {"name": self.name, "version": codegen.__version__,
                "source": tree_digest(Path(codegen.__file__).resolve().parent)}
