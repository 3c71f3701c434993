"""Before ONNX Runtime serves as a reference for a Keras model, Assay's Keras->ONNX export is checked against Keras.

ONNX Runtime runs ``harness.models.onnx_export``'s graph, not the Keras model: an exporter that drops an op
(a Keras 3 operation node such as ``x + 3.0`` handed to a layer handler that sees one input) makes ONNX
Runtime agree with C generated the same wrong way, and hides the defect. So on the campaign's inputs the
ONNX Runtime outputs must agree with the Keras reference's, within the model's own fixed tolerance plus twice the
derived bound of a correct float32 implementation (``--tolerance derived``; both are within it of the exact
result) or, without it, twice Keras' own distance to float64. A disagreement is an ``error`` record naming
the exporter and the first Keras layer whose output differs (layer outputs compared as sorted values, which
no layout change alters).
"""

from __future__ import annotations

import numpy as np

from harness import references
from harness.core.intermediate import last_nodes
from harness.models.model import Model

EXPORTER = "harness.models.onnx_export"
KERAS = "keras"
REFERENCE = "onnxruntime"  # the reference that runs the export


def applies(model: Model, checks: tuple[str, ...]) -> bool:
    """Whether an item's ONNX Runtime records rest on Assay's export of a Keras file (the model has both)."""
    return REFERENCE in checks and KERAS in model.files and "onnx" in model.files


def no_allowance(why: str) -> str:
    """The error of an export check whose allowed difference is not a finite number >= 0: never a comparison."""
    return f"exporter {EXPORTER}: not checked against the Keras model, the allowed difference has no finite value: " \
        f"{why}; ONNX Runtime cannot serve as a reference for this model"


def export_fault(model: Model, inputs: np.ndarray, keras_outputs: np.ndarray, onnx_outputs: np.ndarray,
                 atol: float, rtol: float, margin: np.ndarray | float = 0.0) -> str | None:
    """Why the export of ``model`` cannot serve as a reference (its outputs differ from Keras', or the allowed
    difference is not a finite number >= 0 for some output: ``no_allowance``, naming it), or None."""
    k, o = np.asarray(keras_outputs, np.float64), np.asarray(onnx_outputs, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        allowed = np.broadcast_to(atol + rtol * np.abs(k) + margin, k.shape)
    unusable = ~(np.isfinite(allowed) & (allowed >= 0))
    if unusable.any():
        index = np.unravel_index(int(np.argmax(unusable)), unusable.shape)
        return no_allowance(f"{allowed[index]} at input #{index[0]}, output {tuple(int(i) for i in index[1:])} "
                            f"({int(unusable.reshape(len(k), -1).any(axis=1).sum())} inputs)")
    excess = np.abs(o - k) - allowed
    if (excess <= 0).all():
        return None
    index = np.unravel_index(int(np.argmax(excess)), excess.shape)
    layer = first_differing_layer(model, inputs, atol, rtol)
    return (f"exporter {EXPORTER}: its ONNX graph disagrees with the Keras model by {abs(o - k)[index]:.4e} at "
            f"input #{index[0]} (allowed {allowed[index]:.4e}); first layer that differs: "
            f"{layer}; ONNX Runtime cannot serve as a reference for this model")


def first_differing_layer(model: Model, inputs: np.ndarray, atol: float, rtol: float) -> str:
    """The first Keras layer whose output the export's graph computes differently (``name (class)``)."""
    from harness.references import keras_ref

    keras_model = keras_ref.load(model.file("keras"))
    layers = [layer for layer in keras_model.layers if layer.__class__.__name__ != "InputLayer"]
    nodes = last_nodes(model, [layer.name for layer in layers])
    pairs = [(layer, node) for layer, node in zip(layers, nodes) if node is not None]
    if not pairs:
        return "unknown (no ONNX node is named after a Keras layer)"
    sample = inputs[: min(len(inputs), 16)]
    keras_values = references.get("keras").layer_outputs(model, sample, [layer.name for layer, _ in pairs])
    onnx_values = references.get("onnxruntime").layer_outputs(model, sample, [node for _, node in pairs])
    for (layer, node), kv, ov in zip(pairs, keras_values, onnx_values):
        if kv is None or ov is None:
            continue
        if kv.shape != ov.shape:
            return f"{layer.name} ({layer.__class__.__name__}): {kv.shape[1]} values, ONNX node {node} {ov.shape[1]}"
        a, b = np.sort(kv.astype(np.float64), axis=1), np.sort(ov.astype(np.float64), axis=1)
        if (np.abs(a - b) > atol + rtol * np.abs(a)).any():
            return f"{layer.name} ({layer.__class__.__name__}, ONNX node {node})"
    return "none of the named layers (the difference is in an operation node between them)"


