"""Requirements-based tests of one generated code: low-level requirements derived from the model and the code's
manifest, one per layer (operation, shapes, input domain, tolerance) and one for the network (``LLR-000``: the
input domain and the output tolerance), each with an id; the input sets that verify each one; and the neuron
activation coverage per layer (each output element of a layer seen positive and not positive by the reference),
with every neuron a set never drove to one side listed.

Which set verifies which requirement is a rule, stated once (``VERIFIES``): the corner set holds the boundary values
of every input (the network requirement and the first layer, which reads the inputs); the threshold and
coverage-directed sets are made to drive activation states of every layer to both sides; the uniform set exercises
every layer over the domain. The neuron coverage then shows, per layer, what the sets actually reached.

The ids are per generated code (``LLR-003`` of ``acas-reg50/assay-v2-keras`` is its layer 2): two codes of one model
may have different layers. The tolerance of a layer requirement is derived for that layer (``LAYER_TOLERANCE``): for
every input and element, |C - float64 value of the layer| <= the bound of the layer's own rounding, the layer
evaluated from the C's own input to it (``harness.references.bounds.local_bounds``: any correct float32 evaluation
of the layer, in the order of accumulation the code's manifest declares, is within it given that input), the figure
``layererror`` judges each layer by;
the largest bound over the uniform inputs is stated with it.
For a model with ops without a bound rule the requirement says so and keeps the model's fixed tolerance. The network
requirement keeps the model's output tolerance (the oracle's).
"""

from __future__ import annotations

import numpy as np

from harness.core import intermediate
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import probed
from harness.stages.evidence.layererror import DERIVED

SCHEMA = "assay-requirements/1"
NETWORK = "LLR-000"
# what each input set is made to verify: "network" (LLR-000), "first" (the layer reading the inputs), "layers" (every
# layer requirement)
VERIFIES = {"uniform": ("network", "layers"), "corners": ("network", "first"), "thresholds": ("layers",),
            "coverage": ("layers",)}
RULE = ("corners: the boundary values of every input (LLR-000 and the first layer); thresholds and coverage: "
        "activation states of every layer driven to both sides (every layer requirement); uniform: every "
        "requirement over the input domain")


def layer_id(index: int) -> str:
    """The requirement id of the manifest layer ``index``."""
    return f"LLR-{index + 1:03d}"


LAYER_TOLERANCE = ("|C - f64| <= bound for every input of the domain and every element of the layer's output, where "
                   "f64 is the layer's value in float64 from the C's own float32 input to the layer (the model's "
                   "ONNX graph evaluated in double from the C's outputs of the layers before it) and bound the "
                   "rounding-error bound of any correct float32 evaluation of this layer alone, given that input, "
                   "in the order of accumulation the code declares (dot products: the running error of that order, "
                   "else gamma_n |W| |x|; activations by their libm ulp; docs/semantic.md, layer-local verdict), "
                   "derived per input")


def derive(model: Model, manifest: dict, layer_errors: dict | None = None) -> list[dict]:
    """The low-level requirements of a code: ``LLR-000`` for the network, then one per manifest layer, each layer's
    tolerance derived (``LAYER_TOLERANCE``), with the largest bound ``layer_errors`` (``layererror.measure``) met."""
    tolerance = {"atol": model.tolerance, "rtol": model.rtol, "derived_per_layer": False}
    measured = layer_errors or {"available": False, "reason": "not measured"}
    judged = measured.get("tolerance") if measured["available"] else \
        f"fixed tolerance: the per-layer error is not measured ({measured['reason']})"
    rows = {row["index"]: row for row in measured.get("layers", [])}
    found = [{"id": NETWORK, "layer": None, "text": f"For every input of the input domain (shape "
              f"{list(model.input_shape)}), the outputs (shape {list(model.output_shape)}) are those of the model "
              f"{model.name} within the tolerance.",
              "input_domain": model.domain_json(), "tolerance": tolerance}]
    layers = manifest.get("layers", [])
    for position, layer in enumerate(layers):
        row = rows.get(layer["index"], {})
        if judged == DERIVED and row.get("judged_by") == "derived bound":
            layer_tolerance = {"derived_per_layer": True, "rule": LAYER_TOLERANCE,
                               "largest_bound_met": row["largest_bound"]}
        elif measured["available"] and not row:  # e.g. an activation fused into its producer
            layer_tolerance = {**tolerance, "rule": "no output tensor of its own: verified by the layer that writes "
                                                    "its result"}
        else:  # visibly the model's: why no bound was derived for this layer
            layer_tolerance = {**tolerance, "rule": row.get("judged_by") or judged}
        source = "the network's inputs" if position == 0 else \
            "the outputs of " + ", ".join(layers[i]["name"] if i is not None and i < len(layers) else "the inputs"
                                          for i in layer.get("inputs") or [position - 1])
        found.append({"id": layer_id(layer["index"]), "layer": layer["name"], "op": layer.get("op"),
                      "input_shapes": layer.get("input_shapes"), "output_shape": layer.get("output_shape"),
                      "c_file": layer.get("file"), "c_lines": layer.get("lines"),
                      "text": f"Layer {layer['name']} computes {layer.get('op')} of {source} "
                              f"{layer.get('input_shapes')} into {layer.get('output_shape')} as the model does, "
                              f"within " + ("its derived tolerance (|C - float64| <= the rounding bound of the "
                                            "layer alone, from the C's own input to it)"
                                            if layer_tolerance["derived_per_layer"] else
                                            f"the model's tolerance ({layer_tolerance['rule']})")
                              + ", for every input of the domain.",
                      "input_domain": model.domain_json() if position == 0 else "outputs of the previous layers",
                      "tolerance": layer_tolerance})
    return found


def traced(requirements: list[dict], sets: list[str]) -> dict[str, list[str]]:
    """Requirement id -> the input sets that verify it (``VERIFIES``)."""
    layers = [r["id"] for r in requirements if r["layer"] is not None]
    by_id: dict[str, list[str]] = {r["id"]: [] for r in requirements}
    for kind in sets:
        for scope in VERIFIES.get(kind, ()):
            for requirement in {"network": [NETWORK], "first": layers[:1], "layers": layers}[scope]:
                by_id[requirement].append(kind)
    return by_id


def neuron_coverage(code: GeneratedCode, model: Model, sets: dict[str, np.ndarray]) -> dict | None:
    """Per layer with an output buffer, the neurons (output elements) the reference saw positive and not positive,
    per set and for all sets together, with every neuron never driven to one side; None when no reference gives the
    intermediate outputs (``intermediate.unavailable``)."""
    if intermediate.unavailable(code, model):
        return None
    probes = probed.probes_of(code.manifest)
    _, layer_outputs = intermediate.reference_of(code)
    seen = {kind: layer_outputs(model, inputs, [p.tensor for p in probes]) for kind, inputs in sets.items()}
    layers = []
    for number, probe in enumerate(probes):
        outputs = {kind: values[number] for kind, values in seen.items() if values[number] is not None}
        if not outputs:
            layers.append({"layer": probe.name, "requirement": layer_id(probe.index), "available": False})
            continue
        per_set = {kind: _sides(values) for kind, values in outputs.items()}
        positive = np.any([p for p, _ in per_set.values()], axis=0)
        negative = np.any([n for _, n in per_set.values()], axis=0)
        layers.append({"layer": probe.name, "requirement": layer_id(probe.index), "available": True,
                       "neurons": int(positive.size), "both_sides": int((positive & negative).sum()),
                       "by_set": {kind: int((p & n).sum()) for kind, (p, n) in per_set.items()},
                       "unreached": [{"neuron": int(i), "never": "positive" if not positive[i] else "not positive"}
                                     for i in np.flatnonzero(~(positive & negative))]})
    return {"rule": "a neuron is reached when some input of the sets makes it > 0 and another makes it <= 0",
            "layers": layers}


def _sides(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(neurons seen > 0, neurons seen <= 0) over the inputs of one set: (N, size) -> two (size,) masks."""
    return (values > 0).any(axis=0), (values <= 0).any(axis=0)
