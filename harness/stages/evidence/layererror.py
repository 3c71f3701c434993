"""Per-layer error: every layer's output of the generated C against the reference's intermediate output.

The network's output error says that the code is wrong, not where. Here each layer's output tensor
(read from the buffer the manifest names, at the end of the layer's code, by the instrumented host build of
``harness.runners.probed``, run in the host runner's worker) is compared with the same tensor of the
reference: the Keras model's layer output for code generated from Keras, ONNX Runtime's value of the
same tensor for code generated from ONNX. Both are in the source format's own layout, the one the C keeps,
so they are compared element by element (``max_abs_error``, ``tolerance_ratio`` against the model's fixed
tolerance ``atol + rtol |r|``: figures kept for comparison).

Each layer is judged against its own derived tolerance: the layer's tensor is evaluated in float64 from the model's
ONNX graph (``harness.references.float64``; for code from Keras, the export's node named after the layer:
``intermediate.graph_tensors``, channels moved last), and ``harness.references.bounds.layer_tolerances`` gives, per
input and element, the a-priori bound of |float32 value - exact value| of any correct float32 evaluation of the
layers up to it in the order of accumulation the code's manifest declares (any order without a declaration): dot
products with the running error of that order or gamma_n |W| |x|, plus the error carried in through |W|, activations
by their Lipschitz constants and libm ulp, ...: docs/semantic.md). A layer is within its requirement when every
element satisfies ``|C - float64| <= bound`` (``c_to_float64``, ``bound_ratio``: the largest |C - float64| / bound).
The first layer that is not is where a defect starts. A model with an op without a bound rule falls back, visibly,
to the fixed tolerance (``tolerance``: ``fixed tolerance: no derived bound for <ops>``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.core.intermediate import graph_tensors, reference_of, unavailable
from harness.core.pipeline import to_code_layout
from harness.errors import ModelError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.references import bounds, float64
from harness.runners import probed

DERIVED = "derived per layer: |C - float64| <= the a-priori bound of the layer's tensor (bounds.layer_tolerances)"

def measure(code: GeneratedCode, model: Model, inputs: np.ndarray, work: Path, atol: float, rtol: float,
            timeout: float) -> dict:
    """Per layer: the largest |C - reference| over ``inputs`` (canonical layout), the largest |C - float64| and its
    ratio to the layer's derived bound, whether it is within the layer's tolerance (derived, else fixed), and the
    first layer that is not; ``available: false`` with the reason when it cannot be measured (no output buffers in
    the manifest, no reference for the source format)."""
    missing = unavailable(code, model)
    if missing:
        return {"available": False, "reason": missing}
    reference, layer_outputs = reference_of(code)
    built = probed.build(code, work)
    worst = [0.0] * len(built.probes)
    ratio = [0.0] * len(built.probes)
    derived = _Derived(code, model, [p.tensor for p in built.probes])
    absent: dict[int, str] = {}
    code_inputs = to_code_layout(inputs, model, code)
    for start, outputs in probed.run(built, code_inputs, timeout):
        expected = layer_outputs(model, inputs[start:start + len(outputs[0])], [p.tensor for p in built.probes])
        derived.add(inputs[start:start + len(outputs[0])], outputs)
        for k, (probe, c, r) in enumerate(zip(built.probes, outputs, expected)):
            if r is None or r.shape != c.shape:
                absent[k] = f"the reference has no tensor {probe.tensor}" if r is None else \
                    f"the reference's {probe.tensor} has {r.shape[1]} values, the C's {c.shape[1]}"
                continue
            difference = np.abs(c.astype(np.float64) - r.astype(np.float64))
            bound = atol + rtol * np.abs(r.astype(np.float64))
            finite = np.isfinite(difference).all()
            worst[k] = max(worst[k], float(difference.max()) if finite else float("inf"))
            ratio[k] = max(ratio[k], float((difference / bound).max()) if finite else float("inf"))
    layers = []
    for k, probe in enumerate(built.probes):
        row = {"layer": probe.name, "index": probe.index, "tensor": probe.tensor, "size": probe.size}
        if k in absent:
            row.update(compared=False, reason=absent[k])
        else:
            row.update(compared=True, max_abs_error=worst[k], tolerance_ratio=ratio[k], **derived.row(k, ratio[k]))
        layers.append(row)
    first = next((row["layer"] for row in layers if row["compared"] and not row["within_tolerance"]), None)
    return {"available": True, "reference": reference, "inputs": len(inputs), "atol": atol, "rtol": rtol,
            "tolerance": DERIVED if derived.fallback is None else f"fixed tolerance: {derived.fallback}",
            "layers": layers, "first_over_tolerance": first}


class _Derived:
    """Each probed layer's float64 value and derived bound, and the C's distance to them, batch by batch."""

    def __init__(self, code: GeneratedCode, model: Model, tensors: list[str]):
        self.model, self.fallback = model, None
        self.channels_last = (code.manifest.get("model") or {}).get("format") == "keras"
        self.order = bounds.Order.from_manifest(code.manifest)  # the code's declared order of accumulation
        self.names = graph_tensors(code, model, tensors)
        self.distance = [0.0] * len(tensors)
        self.ratio = [0.0] * len(tensors)
        self.bound = [0.0] * len(tensors)
        self.missing: dict[int, str] = {}
        missing = bounds.missing_rules(model)
        if missing:
            self.fallback = f"no derived bound for {', '.join(missing)}"
        else:
            self.evaluator = float64.numpy_evaluator(model)
            # a Keras layer flattens channels last, the export's Flatten or Reshape channels first: the same values
            # in another order, which an element-wise distance cannot compare
            self.reordered = {output for node in self.evaluator.graph.node if node.op_type in ("Flatten", "Reshape")
                              for output in node.output} if self.channels_last else set()

    def add(self, inputs: np.ndarray, outputs: list[np.ndarray]) -> None:
        if self.fallback is not None:
            return
        present = [name for name in self.names if name is not None]
        values = dict(zip(present, float64.evaluate(self.evaluator, self.model, inputs, present)))
        try:
            limits = dict(zip(present, bounds.layer_tolerances(self.model, inputs, present, self.order)))
        except ModelError as exc:
            self.fallback = str(exc)
            return
        for k, (name, c) in enumerate(zip(self.names, outputs)):
            value = None if name is None else values[name]
            if name in self.reordered:
                self.missing[k] = (f"the graph's {name} is flattened channels first, the Keras layer's channels last "
                                   f"(the same values in another order)")
                continue
            if value is None or limits[name] is None or value[0].size != c.shape[1]:
                self.missing[k] = f"the model's graph has no tensor {name or 'for this layer'}" if value is None or \
                    limits[name] is None else f"the graph's {name} has {value[0].size} values, the C's {c.shape[1]}"
                continue
            limit = limits[name].reshape(value.shape)
            if self.channels_last and value.ndim >= 3:  # the graph's channels first, the Keras layer's last
                value, limit = np.moveaxis(value, 1, -1), np.moveaxis(limit, 1, -1)
            value, limit = value.reshape(len(c), -1), limit.reshape(len(c), -1)
            distance = np.abs(c.astype(np.float64) - value)
            finite = bool(np.isfinite(distance).all())
            self.distance[k] = max(self.distance[k], float(distance.max()) if finite else float("inf"))
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero bound allows only a zero distance
                ratio = np.where(distance == 0, 0.0, distance / limit)
            self.ratio[k] = max(self.ratio[k], float(ratio.max()) if finite else float("inf"))
            self.bound[k] = max(self.bound[k], float(limit.max()))

    def row(self, k: int, fixed_ratio: float) -> dict:
        """The layer's figures and its judgement: by its derived bound, else (fallback) by the fixed tolerance."""
        if self.fallback is not None or k in self.missing:
            return {"judged_by": f"fixed tolerance: {self.fallback or self.missing[k]}",
                    "within_tolerance": fixed_ratio <= 1}
        return {"judged_by": "derived bound", "graph_tensor": self.names[k], "c_to_float64": self.distance[k],
                "largest_bound": self.bound[k], "bound_ratio": self.ratio[k], "within_tolerance": self.ratio[k] <= 1}

