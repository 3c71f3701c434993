"""How much memory verifying a model will take, and refusing a model that would take too much.

A campaign item holds the whole input set, the references' outputs, and, while
a reference runs one batch, that batch's intermediate tensors. ``estimate``
adds these up from the model's shapes and its ONNX file (``onnx.shape_inference``
gives every intermediate tensor's shape)::

    estimate = 4·n·(I + 3·O)  +  8·b·(T1 + T2)  +  2·W

    n      inputs of the campaign (``Settings.n_inputs``)
    I, O   elements of one input and one output sample
           (float32 inputs; three float32 output sets: two references and the C code)
    b      min(n, 256): the batch a reference runs at once (harness.references)
    T1, T2 the two largest tensors of one sample (input, output or intermediate):
           a layer's input and output are alive together, in float64 for the float64 reference
    W      the ONNX file's size (its weights), held by two runtimes at once

``check`` refuses an estimate above the limit with a one-line ``ModelError``
naming the file, the estimate and the limit. The limit is ``DEFAULT_LIMIT``
(4 GiB), or the ``ASSAY_MEMORY_LIMIT`` environment variable (bytes, or with a
``K``/``M``/``G``/``T`` suffix, powers of 1024; ``0`` or ``none`` turns the check
off), or the ``limit`` argument.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

from harness.errors import ConfigError, ModelError
from harness.models.model import Model

DEFAULT_LIMIT = 4 << 30  # 4 GiB
ENVIRONMENT = "ASSAY_MEMORY_LIMIT"
REFERENCE_BATCH = 256  # harness.references.keras_ref.BATCH, the float64 reference's batch
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def limit_from_environment() -> int | None:
    """The limit in bytes from ``ASSAY_MEMORY_LIMIT`` (``None``: no check), ``DEFAULT_LIMIT`` if unset."""
    text = os.environ.get(ENVIRONMENT, "").strip()
    if not text:
        return DEFAULT_LIMIT
    return parse_size(text, ENVIRONMENT)


def parse_size(text: str, what: str = "memory limit") -> int | None:
    """``"4G"``, ``"512M"``, ``"1.5GiB"``, ``"4294967296"`` -> bytes; ``"0"``/``"none"`` -> None (no limit)."""
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    if cleaned in ("NONE", "OFF", "0"):
        return None
    unit = cleaned[-1:] if cleaned[-1:] in _UNITS else ""
    number = cleaned[: len(cleaned) - len(unit)] if unit else cleaned
    try:
        value = float(number) * _UNITS[unit]
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what}: '{text}' is not a size (bytes, or a number with K, M, G or T)")
    return int(value)


def estimate(model: Model, n_inputs: int) -> int:
    """Bytes an item of ``model`` with ``n_inputs`` inputs needs at its peak (formula in the module docstring)."""
    n = max(int(n_inputs), 1)
    batch = min(n, REFERENCE_BATCH)
    inputs, outputs = model.input_size, model.output_size
    largest = sorted([inputs, outputs, *_tensor_sizes(model)], reverse=True)[:2]
    weights = _file_size(model.files.get("onnx"))
    return 4 * n * (inputs + 3 * outputs) + 8 * batch * sum(largest) + 2 * weights


def check(model: Model, n_inputs: int, limit: int | None = -1, source: str | None = None) -> int:
    """``estimate(model, n_inputs)``, or a ModelError if it is above ``limit`` (default: the environment's).

    ``source`` is what the message names (the user's file or zoo name); the model's name otherwise.
    """
    if limit == -1:
        limit = limit_from_environment()
    needed = estimate(model, n_inputs)
    if limit is not None and needed > limit:
        raise ModelError(f"{source or model.name}: needs about {format_size(needed)} of memory to verify with "
                         f"{n_inputs} inputs (input {'x'.join(map(str, model.input_shape))}, largest tensors "
                         f"from ONNX shape inference), above the limit of {format_size(limit)} "
                         f"(set {ENVIRONMENT} to change it)")
    return needed


def format_size(size: int) -> str:
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} B"


def _tensor_sizes(model: Model) -> list[int]:
    """Elements per sample of every tensor ONNX shape inference finds in the model's ONNX file."""
    path = model.files.get("onnx")
    try:
        info = Path(path).stat() if path is not None else None
    except OSError:
        info = None
    if info is None:
        return []
    return list(_inferred_sizes(str(path), info.st_mtime_ns, info.st_size))


@functools.lru_cache(maxsize=64)
def _inferred_sizes(path: str, _mtime_ns: int, _size: int) -> tuple[int, ...]:
    """Cached per file version: every item of a campaign checks its model's budget."""
    import onnx

    try:
        proto = onnx.load(path, load_external_data=False)
        for initializer in proto.graph.initializer:  # inference needs the shapes of weights, not their data
            if initializer.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE):  # int64: shapes, kept
                initializer.ClearField("raw_data")
                initializer.ClearField("float_data")
                initializer.ClearField("double_data")
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - no inference: the input and output sizes still bound the estimate
        return ()
    sizes = []
    graph = inferred.graph
    for value in [*graph.input, *graph.value_info, *graph.output]:
        size = _sample_size(value)
        if size is not None:
            sizes.append(size)
    return tuple(sizes)


def _sample_size(value) -> int | None:
    """Elements of one sample of an ONNX value: symbolic axes and a leading batch axis of 1 count as 1."""
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    size = 1
    for dim in value.type.tensor_type.shape.dim:
        size *= dim.dim_value if dim.HasField("dim_value") and dim.dim_value > 0 else 1
    return size


def _file_size(path: Path | None) -> int:
    try:
        return Path(path).stat().st_size if path is not None else 0
    except OSError:
        return 0
