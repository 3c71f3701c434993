"""The model record every stage receives: files, shapes, layouts, input domain, tolerance.

A ``Model`` is plain data. The zoo builds it for its named benchmarks and for
user files; generators, references and the oracle only read it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_TOLERANCE = 1e-5  # absolute (atol)
# Relative tolerance (rtol): the verdict is |c - r| <= atol + rtol * |r| element-wise (numpy's allclose
# convention), so large outputs are not failed for float32 rounding. 5e-6 is ACETONE's own test setting.
DEFAULT_RTOL = 5e-6


@dataclass(frozen=True)
class Model:
    """One neural network under test, available as one or more files.

    ``input_shape``/``output_shape`` are in the canonical ``layout``/``output_layout``
    (see ``harness.core.tensors``); ``file_layouts`` says what each file expects, e.g.
    ``{"keras": "HWC", "onnx": "CHW"}``. ``input_domain`` is the closed interval
    inputs are drawn from, uniformly, documented per model in the zoo.
    ``tolerance`` (absolute) and ``rtol`` (relative) decide the oracle's verdict.
    """

    name: str
    files: dict[str, Path]  # format ("keras", "onnx") -> path
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    layout: str
    output_layout: str
    file_layouts: dict[str, tuple[str, str]] = field(default_factory=dict)  # format -> (input, output)
    input_domain: tuple[float, float] = (-1.0, 1.0)
    tolerance: float = DEFAULT_TOLERANCE  # atol
    rtol: float = DEFAULT_RTOL
    tier: str = "user"
    description: str = ""

    @property
    def input_size(self) -> int:
        return _prod(self.input_shape)

    @property
    def output_size(self) -> int:
        return _prod(self.output_shape)

    def file(self, fmt: str) -> Path:
        """The path of this model in format ``fmt``; a ModelError if it has none."""
        from harness.errors import ModelError

        if fmt not in self.files:
            raise ModelError(f"{self.name}: no {fmt} file (has: {', '.join(sorted(self.files)) or 'none'})")
        return self.files[fmt]

    def layouts_of(self, fmt: str) -> tuple[str, str]:
        """(input layout, output layout) of the file in format ``fmt``."""
        return self.file_layouts.get(fmt, (self.layout, self.output_layout))

    def sha256(self) -> dict[str, str]:
        """Hashes of every file, for provenance."""
        return {fmt: file_sha256(path) for fmt, path in sorted(self.files.items())}


def file_sha256(path: Path) -> str:
    """SHA-256 of a model file, or of the names and bytes of the files of a model folder (NNEF)."""
    path = Path(path)
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode() + b"\0")
        with open(file, "rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _prod(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size
