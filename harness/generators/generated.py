"""What a generator hands to the build stage: a directory of C plus its manifest.

Two manifest forms are read: the full ``manifest.json`` every Assay generator
writes (docs/manifest.md), and the small ``assay.json`` that lets C from any
other generator, or hand-written C, be checked.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError

FULL_MANIFEST = "manifest.json"
SMALL_MANIFEST = "assay.json"


@dataclass(frozen=True)
class GeneratedCode:
    """Generated sources and the facts about them that later stages need."""

    directory: Path
    entry: str
    input_size: int
    output_size: int
    input_layout: str | None  # None: the model's canonical layout
    output_layout: str | None
    sources: tuple[Path, ...]
    manifest: dict = field(repr=False)

    @classmethod
    def from_directory(cls, directory: Path) -> "GeneratedCode":
        """Read ``manifest.json`` or, failing that, ``assay.json`` in ``directory``."""
        directory = Path(directory).resolve()
        if (directory / FULL_MANIFEST).is_file():
            return cls._from_full(directory, _read_json(directory / FULL_MANIFEST))
        if (directory / SMALL_MANIFEST).is_file():
            return cls._from_small(directory, _read_json(directory / SMALL_MANIFEST))
        raise ConfigError(f"{directory}: no {FULL_MANIFEST} or {SMALL_MANIFEST} manifest")

    @classmethod
    def _from_full(cls, directory: Path, data: dict) -> "GeneratedCode":
        try:
            (inp,), (out,) = data["inputs"], data["outputs"]
            return cls(directory=directory, entry=data["entry"]["symbol"],
                       input_size=int(inp["size"]), output_size=int(out["size"]),
                       input_layout=inp["layout"], output_layout=out["layout"],
                       sources=tuple(directory / name for name in data["sources"]), manifest=data)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{directory / FULL_MANIFEST}: malformed manifest ({exc!r})") from None

    @classmethod
    def _from_small(cls, directory: Path, data: dict) -> "GeneratedCode":
        path = directory / SMALL_MANIFEST
        for key in ("entry", "input_size", "output_size"):
            if key not in data:
                raise ConfigError(f"{path}: missing key '{key}'")
        sources = data.get("sources") or sorted(p.name for p in directory.glob("*.c"))
        if not sources:
            raise ConfigError(f"{path}: no sources listed and no .c file in {directory}")
        return cls(directory=directory, entry=str(data["entry"]),
                   input_size=int(data["input_size"]), output_size=int(data["output_size"]),
                   input_layout=data.get("input_layout"), output_layout=data.get("output_layout"),
                   sources=tuple(directory / name for name in sources), manifest=data)

    def source_hashes(self) -> dict[str, str]:
        """SHA-256 of every file in the directory that the build reads (sources, headers, blobs)."""
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(self.directory.iterdir())
                if p.is_file() and p.suffix in {".c", ".h", ".S", ".s", ".bin"}}


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: manifest must be a JSON object")
    return data
