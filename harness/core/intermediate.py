"""The reference's intermediate outputs for generated code: which reference, and the activation states.

Code generated from a Keras file is compared with the Keras model's layer outputs, code generated from an ONNX
file with ONNX Runtime's intermediate tensors (``layer_outputs`` of each reference): the tensors the manifest
names (``layers[*].output.tensor``), in the source format's own layout, which the C keeps. The evidence
stage's per-layer error and the input sets that need activation states (``harness.core.inputsets``) use them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness import references
from harness.core import inputsets
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import probed

# the source format the code was generated from -> the reference (by name) that gives its intermediate outputs
REFERENCES = {"keras": "keras", "onnx": "onnxruntime"}
LayerOutputs = Callable[[Model, np.ndarray, list[str]], list[np.ndarray | None]]


def unavailable(code: GeneratedCode, model: Model) -> str | None:
    """Why the per-layer outputs cannot be compared, or None when they can."""
    fmt = (code.manifest.get("model") or {}).get("format")
    if fmt not in REFERENCES or fmt not in model.files:  # the reference reads the file the code came from
        return f"no reference gives the intermediate outputs of a {fmt} model"
    if not probed.probes_of(code.manifest):
        return "the manifest gives no layer output buffers (layers[*].output)"
    return None


def reference_of(code: GeneratedCode) -> tuple[str, LayerOutputs]:
    """The name of the reference that reads the file ``code`` came from, and its ``layer_outputs(model,
    inputs, tensors)``: for each named tensor, an (N, size) float32 array, or None when the model has none."""
    name = REFERENCES[code.manifest["model"]["format"]]
    return name, references.get(name).layer_outputs


def graph_tensors(code: GeneratedCode, model: Model, tensors: list[str]) -> list[str | None]:
    """The tensor of the model's ONNX graph that holds each of the code's layer tensors (``layers[*].output.tensor``):
    the same name for code generated from ONNX; for code generated from Keras, the output of the last node the
    exporter named after the layer (``last_nodes``: the rule ``harness.stages.semantic.exportcheck`` pairs Keras layers
    with the export's nodes by; the graph's output for the last layer); None when none is. The
    graph keeps the ONNX layout (channels first), the Keras layer its own (channels last). Code whose manifest names
    no source format (a ``dir:`` folder's ``assay.json``) names the graph's own tensors."""
    if (code.manifest.get("model") or {}).get("format") != "keras":
        return list(tensors)
    names = [tensor.split(":")[0] for tensor in tensors]
    # every name a node may be named after competes: a node of layer "conv_BN" is never taken for tensor "conv"
    # (MobileNetV2's depthwise convolution and its batch normalisation)
    layers = [layer["name"] for layer in code.manifest.get("layers", []) if layer.get("name")]
    return last_nodes(model, names, layers, last_is_output=bool(names) and names[-1] == layers[-1])


def last_nodes(model: Model, names: list[str], others: list[str] = (), last_is_output: bool = True
               ) -> list[str | None]:
    """The output of the last ONNX node the exporter named after each of ``names`` (``name`` or ``name_...``, the
    longest of ``names`` and ``others`` that fits: ``dense_1_gemm`` is ``dense_1``'s, ``dw_BN_bn`` is ``dw_BN``'s
    and never ``dw``'s); with ``last_is_output``, the graph's output is the last name's. None where no node is."""
    import onnx

    graph = onnx.load(str(model.file("onnx"))).graph
    candidates = {*names, *others}
    last: dict[str, str] = {}
    for node in graph.node:
        out = node.output[0]
        fits = [name for name in candidates if out == name or out.startswith(f"{name}_")]
        if fits:
            last[max(fits, key=len)] = out
    if names and last_is_output and graph.output:
        last[names[-1]] = graph.output[0].name
    return [last.get(name) for name in names]


def activation_states(code: GeneratedCode, model: Model) -> inputsets.States | None:
    """The activation states of the reference for the input sets (``harness.core.inputsets``): per input,
    each element of each layer output the manifest names positive or not, and the arg-max class of the last
    one; None when no reference gives intermediate outputs for the code's source format."""
    if unavailable(code, model):
        return None
    tensors = [p.tensor for p in probed.probes_of(code.manifest)]
    _, layer_outputs = reference_of(code)

    def states(inputs: np.ndarray) -> np.ndarray:
        outputs = [o for o in layer_outputs(model, inputs, tensors) if o is not None]
        classes = np.zeros(outputs[-1].shape, dtype=bool)
        classes[np.arange(len(inputs)), outputs[-1].argmax(axis=1)] = True
        return np.concatenate([o > 0 for o in outputs] + [classes], axis=1)

    return states
