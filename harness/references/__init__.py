"""Reference runtimes: the trusted implementations generated code is compared against.

A reference is a class with a ``name``, ``supports(model)`` (it has the file it
needs) and ``run(model, inputs) -> outputs``; inputs and outputs are float32
batches ``(N, *shape)`` in the model's canonical layouts, and each reference
feeds its file the layout that file expects (``model.layouts_of(fmt)``).
A model of several inputs or outputs has packed vectors (``Model.inputs``):
its references split each input vector into the graph's inputs
(``unpack``) and pack the graph's outputs back (``pack``).
Numbers always come from running the runtime.

References are named in the entry-point group ``assay.references``
(``harness.registry``; Assay's own in its ``pyproject.toml``): a new one is one
class and one entry-point line, in Assay or in a package of its own.
"""

from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

import numpy as np

from harness import registry
from harness.errors import ModelError
from harness.models.model import Model
from harness.tensors import ABI_ELEMENT_TYPES, value_range
from harness.models import tf_runtime  # noqa: F401 - TensorFlow environment defaults before anything loads it


@runtime_checkable
class Reference(Protocol):
    name: str

    def supports(self, model: Model) -> bool:
        """Whether ``model`` has the file this reference runs."""
        ...

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        """Outputs (N, *model.output_shape), float32 (float64 for "float64"), canonical layout, for inputs
        (N, *model.input_shape)."""
        ...


_INSTANCES: dict[str, Reference] = {}


def names() -> list[str]:
    return registry.names("references")


def get(name: str) -> Reference:
    """The (shared) instance of the reference called ``name`` (its ``name`` set from its registration)."""
    if name not in _INSTANCES:
        reference = registry.load("references", name)()
        reference.name = name
        _INSTANCES[name] = reference
    return _INSTANCES[name]


def supporting(model: Model) -> list[Reference]:
    """Every registered reference that can run ``model``."""
    return [get(name) for name in names() if get(name).supports(model)]


def check_inputs(model: Model, inputs: np.ndarray) -> np.ndarray:
    """``inputs`` as a contiguous float32 batch of the model's input shape (a ValueError otherwise)."""
    batch = np.ascontiguousarray(inputs, dtype=np.float32)
    if batch.shape[1:] != tuple(model.input_shape):
        raise ValueError(f"{model.name}: inputs have shape {batch.shape[1:]}, the model takes {model.input_shape}")
    return batch



# ONNX Runtime's names of the quantized graph input types the float32 ABI carries and numpy exchanges with it
# (docs/quantized.md); the others (float8, int4, int2, float4) cross by a Cast (``onnxruntime_ref``).
ORT_INTEGER_TYPES = {"tensor(uint8)": np.uint8, "tensor(int8)": np.int8, "tensor(uint16)": np.uint16,
                     "tensor(int16)": np.int16}


def as_graph_input(batch: np.ndarray, dtype) -> np.ndarray:
    """The ABI's float32 values as a graph input of element type ``dtype``. A quantized input crosses the float32 ABI
    as its values, which the generated C reads as saturate(round half to even(x)) (NaN: the lowest value) for an
    integer type, and as x rounded to nearest even, saturating (ONNX's Cast, ``ml_dtypes``'), for a float8/float4
    type; a reference fed that input reads them the same way, so both see the same values whatever the float
    (docs/quantized.md, "Integer graph inputs and outputs"). A float32 input is returned as it is."""
    dtype = np.dtype(dtype)
    if dtype.name == "float32" or dtype.name not in ABI_ELEMENT_TYPES.values():
        return batch
    low, high = value_range(dtype)
    if dtype.name.startswith(("int", "uint")):
        return np.clip(np.nan_to_num(np.rint(batch), nan=low), low, high).astype(dtype)
    return np.clip(batch, low, high).astype(dtype)


def unpack(model: Model, batch: np.ndarray) -> list[np.ndarray]:
    """The inputs of a packed model (``Model.inputs``) from a batch of packed vectors: one (N, *shape) array each."""
    offsets = np.cumsum([t.size for t in model.inputs])[:-1]
    return [part.reshape(len(batch), *tensor.shape)
            for tensor, part in zip(model.inputs, np.split(batch, offsets, axis=1))]


def pack(model: Model, outputs: list, rows: int, dtype) -> np.ndarray:
    """The outputs of a packed model (each with ``rows`` samples, batch axis or not) as one (rows, size) batch."""
    if len(outputs) != len(model.outputs):
        raise ModelError(f"{model.name}: the runtime gave {len(outputs)} outputs, the model has {len(model.outputs)}")
    parts = []
    for tensor, value in zip(model.outputs, outputs):
        value = np.asarray(value, dtype=dtype)
        if value.size != rows * tensor.size:
            raise ModelError(f"{model.name}: output '{tensor.name}' has shape {list(value.shape)}, the model "
                             f"declares {list(tensor.shape)} per sample")
        parts.append(value.reshape(rows, tensor.size))
    return np.concatenate(parts, axis=1) if parts else np.zeros((rows, 0), dtype)


def sample_feeds(parts: list[np.ndarray], ranks: list[int], k: int) -> list[np.ndarray]:
    """Sample ``k`` of each unpacked input (``unpack``), shaped as the graph declares that input: ``ranks`` axes,
    with a batch axis of 1 or without one (docs/zoo.md)."""
    return [part[k].reshape(part.shape[1:] if rank == part.ndim - 1 else (1, *part.shape[1:]))
            for part, rank in zip(parts, ranks)]


def run_packed_samples(model: Model, batch: np.ndarray, ranks: list[int],
                       run: Callable[[list[np.ndarray]], list], dtype) -> np.ndarray:
    """A packed model's graph run one sample at a time: ``run`` takes the graph's inputs (each shaped as the graph
    declares it, ``ranks`` axes: with a batch axis of 1 or without) and returns its outputs. One sample per run
    keeps the inputs of different batch-axis rules apart; packed models are small (docs/zoo.md)."""
    rows = []
    parts = unpack(model, batch)
    for k in range(len(batch)):
        rows.append(pack(model, run(sample_feeds(parts, ranks, k)), 1, dtype))
    return np.concatenate(rows) if rows else np.zeros((0, model.output_size), dtype)
