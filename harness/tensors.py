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
