"""Tensor layouts and conversions between them.

Every model in Assay has a *canonical* layout: channels-last (``HWC``) when a
Keras file exists, otherwise the layout of its ONNX file. Inputs are drawn and
outputs compared in that layout; each consumer (a reference runtime or
generated C) declares its own layout and is fed a transposed copy. A layout is
a string of axis letters, one per dimension, without the batch axis: ``HWC``,
``CHW``, ``C`` (a vector), ``HW``...
"""

from __future__ import annotations

import numpy as np


def convert(batch: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Transpose a batch (first axis = batch) from layout ``src`` to ``dst``."""
    if src == dst:
        return batch
    if sorted(src) != sorted(dst) or len(src) != batch.ndim - 1:
        raise ValueError(f"cannot convert layout {src} to {dst} for shape {batch.shape[1:]}")
    perm = [0] + [1 + src.index(axis) for axis in dst]
    return np.ascontiguousarray(batch.transpose(perm))


def shape_in(shape: tuple[int, ...], src: str, dst: str) -> tuple[int, ...]:
    """The shape a tensor of ``shape`` in layout ``src`` has in layout ``dst``."""
    return tuple(shape[src.index(axis)] for axis in dst)


def default_layout(rank: int, channels_last: bool = True) -> str:
    """The conventional layout for a tensor of this rank (no batch axis)."""
    if rank == 1:
        return "C"
    if rank == 2:
        return "HC" if channels_last else "CH"
    if rank == 3:
        return "HWC" if channels_last else "CHW"
    if rank == 4:  # a volume (3-D convolution's layout), or any rank-4 tensor without a batch axis
        return "DHWC" if channels_last else "CDHW"
    raise ValueError(f"tensors of rank {rank} are not supported")


# The ONNX element types (TensorProto codes) the float32 ABI carries, by numpy's and ml_dtypes' names: float32, the
# quantized types and float16 (a DequantizeLinear's output of a float16 scale), every value of which is a float32 (an
# integer as its exact value, a float8/float4/float16 value as the float it is; docs/quantized.md, "Integer graph
# inputs and outputs"). Types with a value that is no float32 (int32, int64, double) are not carried.
ABI_ELEMENT_TYPES = {1: "float32", 3: "int8", 2: "uint8", 5: "int16", 4: "uint16", 22: "int4", 21: "uint4",
                     26: "int2", 25: "uint2", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
                     20: "float8_e5m2fnuz", 23: "float4_e2m1fn", 10: "float16"}


def abi_dtype(elem_type: int) -> np.dtype | None:
    """The numpy dtype of an ONNX element type the ABI carries (``ABI_ELEMENT_TYPES``), or None."""
    import ml_dtypes

    name = ABI_ELEMENT_TYPES.get(elem_type)
    return None if name is None else np.dtype(getattr(ml_dtypes, name, name))


def value_range(dtype) -> tuple[float, float]:
    """The lowest and highest finite value of a type the ABI carries: a quantized input's domain."""
    import ml_dtypes

    dtype = np.dtype(dtype)
    try:
        info = ml_dtypes.iinfo(dtype)
    except ValueError:
        info = ml_dtypes.finfo(dtype)
    return float(info.min), float(info.max)
