"""The model record every stage receives: files, shapes, layouts, input domain, tolerance.

A ``Model`` is plain data. The zoo builds it for its named benchmarks and for
user files; generators, references and the oracle only read it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np

DEFAULT_TOLERANCE = 1e-5  # absolute (atol)
# Relative tolerance (rtol): the verdict is |c - r| <= atol + rtol * |r| element-wise (numpy's allclose
# convention), so large outputs are not failed for float32 rounding. 5e-6 is ACETONE's own test setting.
DEFAULT_RTOL = 5e-6

# One bound of an input domain: a number for every element, or nested tuples whose shape broadcasts to
# ``input_shape`` (NumPy rules): ``(F,)`` per feature of a vector, ``(C,)`` per channel of an HWC image,
# ``(C, 1, 1)`` per channel of a CHW image, or the whole ``input_shape`` per element.
Bound = Union[float, tuple]

# The one flat vector that holds every input (or every output) of a model with several of them (``Model.inputs``).
PACKED_LAYOUT = "C"

# The format key of the float network a quantized model quantizes (same ABI and layouts; the int8 tier's float
# model without its softmax, or a sidecar's ``float_model``): read only to report the quantization error, a property
# of the model (docs/quantized.md), never by a generator or a reference, so it never decides a verdict.
FLOAT_COUNTERPART = "float-onnx"


@dataclass(frozen=True)
class Tensor:
    """One input or output of a model with several inputs or outputs: its name and shape (no batch axis) in the
    model's files, which agree on it (the loaders refuse otherwise). The data plane packs these tensors, in this
    order and each in row-major order, into one flat float32 vector per sample, so that runners, inputs and the
    oracle keep handling one buffer."""

    name: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return _prod(self.shape)


@dataclass(frozen=True)
class Model:
    """One neural network under test, available as one or more files.

    ``input_shape``/``output_shape`` are in the canonical ``layout``/``output_layout``
    (see ``harness.tensors``); ``file_layouts`` says what each file expects, e.g.
    ``{"keras": "HWC", "onnx": "CHW"}``. ``input_domain`` is ``(low, high)``: each
    input element is drawn uniformly from its own closed interval, where ``low``
    and ``high`` are numbers (one interval for every element) or nested tuples
    broadcastable to ``input_shape`` (per feature, per channel or per element;
    see ``Bound``), documented per model in the zoo.
    ``tolerance`` (absolute) and ``rtol`` (relative) decide the oracle's verdict.

    A model with several inputs or outputs lists them in ``inputs`` and
    ``outputs`` (both, in the graph's order; both empty for a model of one
    input and one output). Its ``input_shape`` and ``output_shape`` are then
    the packed vectors ``(sum of the sizes,)`` in layout ``PACKED_LAYOUT``
    (``Tensor``), in every file's layouts.
    """

    name: str
    files: dict[str, Path]  # format ("keras", "onnx") -> path
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    layout: str
    output_layout: str
    file_layouts: dict[str, tuple[str, str]] = field(default_factory=dict)  # format -> (input, output)
    input_domain: tuple[Bound, Bound] = (-1.0, 1.0)
    tolerance: float = DEFAULT_TOLERANCE  # atol
    rtol: float = DEFAULT_RTOL
    tier: str = "user"
    description: str = ""
    inputs: tuple[Tensor, ...] = ()
    outputs: tuple[Tensor, ...] = ()
    # format -> why no file of it could be made (a converter's refusal, naming it): the model runs with the files
    # it has, and whatever needs the missing one says this cause
    refusals: dict[str, str] = field(default_factory=dict)

    @property
    def is_packed(self) -> bool:
        """Whether the model has several inputs or outputs, packed into one vector each (``Tensor``)."""
        return bool(self.inputs)

    @property
    def input_size(self) -> int:
        return _prod(self.input_shape)

    @property
    def output_size(self) -> int:
        return _prod(self.output_shape)

    def domain_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) as float64 arrays of shape ``input_shape``: the interval of every input element."""
        low, high = (np.asarray(bound, dtype=np.float64) for bound in self.input_domain)
        try:
            return (np.broadcast_to(low, self.input_shape).copy(), np.broadcast_to(high, self.input_shape).copy())
        except ValueError:
            raise ValueError(f"{self.name}: input domain bounds of shapes {low.shape} and {high.shape} do not "
                             f"broadcast to the input shape {self.input_shape}") from None

    def domain_is_uniform(self) -> bool:
        """True when one interval covers every input element (both bounds are numbers)."""
        return all(np.ndim(bound) == 0 for bound in self.input_domain)

    def domain_json(self) -> list:
        """The input domain for records and reports: ``[low, high]``, each a number or nested lists."""
        return [_json_bound(bound) for bound in self.input_domain]

    def file(self, fmt: str) -> Path:
        """The path of this model in format ``fmt``; a ModelError if it has none."""
        from harness.errors import ModelError

        if fmt in self.refusals:
            raise ModelError(f"{self.name}: no {fmt} file: {self.refusals[fmt]}")
        if fmt not in self.files:
            raise ModelError(f"{self.name}: no {fmt} file (has: {', '.join(sorted(self.files)) or 'none'})")
        return self.files[fmt]

    def layouts_of(self, fmt: str) -> tuple[str, str]:
        """(input layout, output layout) of the file in format ``fmt``."""
        return self.file_layouts.get(fmt, (self.layout, self.output_layout))

    def sha256(self) -> dict[str, str]:
        """Hashes of every file, for provenance."""
        return {fmt: file_sha256(path) for fmt, path in sorted(self.files.items())}


def packed_model(name: str, files: dict[str, Path], inputs: list[Tensor], outputs: list[Tensor],
                 **fields) -> Model:
    """The ``Model`` of a file with several inputs or outputs: packed vectors in every format (``Tensor``)."""
    flat = (PACKED_LAYOUT, PACKED_LAYOUT)
    return Model(name=name, files=files, input_shape=(sum(t.size for t in inputs),),
                 output_shape=(sum(t.size for t in outputs),), layout=PACKED_LAYOUT, output_layout=PACKED_LAYOUT,
                 file_layouts={fmt: flat for fmt in files}, inputs=tuple(inputs), outputs=tuple(outputs), **fields)


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


def bound_from_json(value) -> Bound:
    """A bound read back from ``domain_json``: a float, or nested tuples of floats."""
    if isinstance(value, (list, tuple)):
        return tuple(bound_from_json(item) for item in value)
    return float(value)


def describe_domain(domain) -> str:
    """A short text for a ``domain_json()`` value, for reports: ``[0, 1]`` or ``5 intervals within [-3.14, 60760]``."""
    if not isinstance(domain, (list, tuple)) or len(domain) != 2:
        return "?"
    low, high = (np.asarray(bound, dtype=np.float64) for bound in domain)
    if low.ndim == 0 and high.ndim == 0:
        return f"[{float(low):g}, {float(high):g}]"
    count = int(np.broadcast(low, high).size)
    return f"{count} intervals within [{float(low.min()):g}, {float(high.max()):g}]"


def _json_bound(bound: Bound):
    if isinstance(bound, (tuple, list, np.ndarray)):
        return [_json_bound(item) for item in bound]
    return float(bound)


def _prod(shape: tuple[int, ...]) -> int:
    size = 1
    for dim in shape:
        size *= dim
    return size
