"""Reference runtimes: the trusted implementations generated code is compared against.

A reference is a class with a ``name``, ``supports(model)`` (it has the file it
needs) and ``run(model, inputs) -> outputs``; inputs and outputs are float32
batches ``(N, *shape)`` in the model's canonical layouts, and each reference
feeds its file the layout that file expects (``model.layouts_of(fmt)``).
Numbers always come from running the runtime.

References are named in the entry-point group ``assay.references``
(``harness.registry``; Assay's own in its ``pyproject.toml``): a new one is one
class and one entry-point line, in Assay or in a package of its own.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from harness import registry
from harness.models.model import Model
from harness.models import tf_runtime  # noqa: F401 - TensorFlow environment defaults before anything loads it


@runtime_checkable
class Reference(Protocol):
    name: str

    def supports(self, model: Model) -> bool:
        """Whether ``model`` has the file this reference runs."""
        ...

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        """Outputs (N, *model.output_shape), float32 (float64 for "float64"), canonical layout, for inputs (N, *model.input_shape)."""
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

