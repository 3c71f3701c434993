"""The reference's intermediate outputs for generated code: which reference, and the activation states.

Code generated from a Keras file is compared with the Keras model's layer outputs, code generated from an ONNX
file with ONNX Runtime's intermediate tensors (``layer_outputs`` of each reference): the tensors the manifest
names (``layers[*].output.tensor``), in the source format's own layout, which the C keeps. The evidence
stage's per-layer error and the input sets that need activation states (``harness.core.inputsets``) use them.
"""

from __future__ import annotations

import numpy as np

from harness.core import inputsets
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.references import keras_ref, onnxruntime_ref
from harness.runners import probed

# the source format the code was generated from -> (reference name, its intermediate outputs)
REFERENCES = {"keras": ("keras", keras_ref.layer_outputs), "onnx": ("onnxruntime", onnxruntime_ref.layer_outputs)}


def unavailable(code: GeneratedCode, model: Model) -> str | None:
    """Why the per-layer outputs cannot be compared, or None when they can."""
    fmt = (code.manifest.get("model") or {}).get("format")
    if fmt not in REFERENCES or fmt not in model.files:  # the reference reads the file the code came from
        return f"no reference gives the intermediate outputs of a {fmt} model"
    if not probed.probes_of(code.manifest):
        return "the manifest gives no layer output buffers (layers[*].output)"
    return None


def activation_states(code: GeneratedCode, model: Model) -> inputsets.States | None:
    """The activation states of the reference for the input sets (``harness.core.inputsets``): per input,
    each element of each layer output the manifest names positive or not, and the arg-max class of the last
    one; None when no reference gives intermediate outputs for the code's source format."""
    if unavailable(code, model):
        return None
    tensors = [p.tensor for p in probed.probes_of(code.manifest)]
    layer_outputs = REFERENCES[code.manifest["model"]["format"]][1]

    def states(inputs: np.ndarray) -> np.ndarray:
        outputs = [o for o in layer_outputs(model, inputs, tensors) if o is not None]
        classes = np.zeros(outputs[-1].shape, dtype=bool)
        classes[np.arange(len(inputs)), outputs[-1].argmax(axis=1)] = True
        return np.concatenate([o > 0 for o in outputs] + [classes], axis=1)

    return states
