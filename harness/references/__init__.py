"""Reference runtimes: the trusted implementations generated code is compared against.

A reference is a class with a ``name``, ``supports(model)`` (it has the file it
needs) and ``run(model, inputs) -> outputs``; inputs and outputs are float32
batches ``(N, *shape)`` in the model's canonical layouts, and each reference
feeds its file the layout that file expects (``model.layouts_of(fmt)``).
Numbers always come from running the runtime.

One registry: a new reference is one new module with ``@register`` on its
class, plus one line in the import list at the end of this file.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from harness.errors import ConfigError
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


REFERENCES: dict[str, type] = {}
_INSTANCES: dict[str, Reference] = {}


def register(ref_cls: type) -> type:
    """Class decorator: make ``ref_cls`` available as ``get(ref_cls.name)``."""
    name = ref_cls.name
    if name in REFERENCES and REFERENCES[name] is not ref_cls:
        raise ValueError(f"reference '{name}' is registered twice")
    REFERENCES[name] = ref_cls
    return ref_cls


def names() -> list[str]:
    return sorted(REFERENCES)


def get(name: str) -> Reference:
    """The (shared) instance of the reference called ``name``."""
    if name not in REFERENCES:
        raise ConfigError(f"unknown reference '{name}' (known: {', '.join(names())})")
    if name not in _INSTANCES:
        _INSTANCES[name] = REFERENCES[name]()
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


# The registered references: one line each.
from harness.references import float64  # noqa: E402,F401
from harness.references import keras_ref  # noqa: E402,F401
from harness.references import onnxruntime_ref  # noqa: E402,F401
