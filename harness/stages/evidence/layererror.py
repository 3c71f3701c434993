"""Per-layer error: every layer's output of the generated C against the reference's intermediate output.

The network's output error says that the code is wrong, not where. Here each layer's output tensor
(read from the buffer the manifest names, at the end of the layer's code, by the instrumented host build of
``harness.runners.probed``, run in the host runner's worker) is compared with the same tensor of the
reference: the Keras model's layer output for code generated from Keras, ONNX Runtime's value of the
same tensor for code generated from ONNX. Both are in the source format's own layout, the one the C keeps,
so they are compared element by element (``max_abs_error``, ``tolerance_ratio`` against the model's fixed
tolerance ``atol + rtol |r|``: figures kept for comparison).

Each layer is judged against its own derived tolerance, layer-local (``harness.core.layerlocal``, docs/semantic.md,
"Layer-local verdict"): the layer's tensor is evaluated in float64 *from the C's own float32 input to the layer* (the
probed tensors before it, ``bounds.local_bounds``; the graph's tensor is the export's node named after the layer for
code from Keras: ``intermediate.graph_tensors``, compared channels first), and bounded, per input and element, by
the rounding of that layer alone for any correct float32 implementation in the order of accumulation the code's
manifest declares (any order without a declaration): dot products with the running error of that order or
gamma_n |W| |x|, activations by their libm ulp, ... No error is carried from the layers before, so the bound does
not grow with depth. A layer is within its requirement when every element satisfies ``|C - float64| <= bound``
(``c_to_float64``, ``bound_ratio``: the largest |C - float64| / bound). The first layer that is not is where a
defect starts, and the layers after it, judged from its wrong output, stay within theirs. A model with an op
without a bound rule falls back, visibly, to the fixed tolerance (``tolerance``: ``fixed tolerance: no derived bound
for <ops>``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.core.intermediate import graph_tensors, reference_of, unavailable
from harness.core.layerlocal import graph_layout
from harness.core.pipeline import to_code_layout
from harness.errors import ModelError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.references import bounds, float64
from harness.runners import probed

DERIVED = ("derived per layer: |C - float64 from the C's own input to the layer| <= the bound of the layer's own "
           "rounding (bounds.local_bounds)")

def measure(code: GeneratedCode, model: Model, inputs: np.ndarray, work: Path, atol: float, rtol: float,
            timeout: float) -> dict:
    """Per layer: the largest |C - reference| over ``inputs`` (canonical layout), the largest |C - float64| and its
    ratio to the layer's derived bound, whether it is within the layer's tolerance (derived, else fixed), and the
    first layer that is not; ``available: false`` with the reason when it cannot be measured (no output buffers in
    the manifest, no reference for the source format)."""
    return measure_sets(code, model, {"inputs": inputs}, work, atol, rtol, timeout)["inputs"]


def measure_sets(code: GeneratedCode, model: Model, sets: dict[str, np.ndarray], work: Path, atol: float, rtol: float,
                 timeout: float) -> dict[str, dict]:
    """``measure`` of each input set of ``sets``, computed in one pass over all of them: one instrumented build and
    its runs, the reference's layer outputs, the float64 values and the derived bounds of every layer, each batched
    over every set's inputs together; each set's figures are the maxima over its own rows.

    Why together: each set measured apart built the instrumented code again, started the worker, the reference and
    the float64 evaluation again, for 100 inputs a set beside the 1000 uniform ones."""
    missing = unavailable(code, model)
    if missing:
        return {kind: {"available": False, "reason": missing} for kind in sets}
    kinds = list(sets)
    inputs = np.concatenate([sets[kind] for kind in kinds])
    owner = np.repeat(np.arange(len(kinds)), [len(sets[kind]) for kind in kinds])  # each row's set
    reference, layer_outputs = reference_of(code)
    built = probed.build(code, work)
    worst = np.zeros((len(kinds), len(built.probes)))
    ratio = np.zeros((len(kinds), len(built.probes)))
    derived = _Derived(code, model, [p.tensor for p in built.probes], len(kinds))
    absent: dict[int, str] = {}
    for start, outputs in probed.run(built, to_code_layout(inputs, model, code), timeout):
        rows = slice(start, start + len(outputs[0]))
        expected = layer_outputs(model, inputs[rows], [p.tensor for p in built.probes])
        derived.add(inputs[rows], outputs, owner[rows])
        for k, (probe, c, r) in enumerate(zip(built.probes, outputs, expected)):
            if r is None or r.shape != c.shape:
                absent[k] = f"the reference has no tensor {probe.tensor}" if r is None else \
                    f"the reference's {probe.tensor} has {r.shape[1]} values, the C's {c.shape[1]}"
                continue
            difference = np.abs(c.astype(np.float64) - r.astype(np.float64))
            bound = atol + rtol * np.abs(r.astype(np.float64))
            _fold(worst[:, k], difference, owner[rows])
            _fold(ratio[:, k], difference / bound, owner[rows])
    results = {}
    for s, kind in enumerate(kinds):
        layers = []
        for k, probe in enumerate(built.probes):
            row = {"layer": probe.name, "index": probe.index, "tensor": probe.tensor, "size": probe.size}
            if k in absent:
                row.update(compared=False, reason=absent[k])
            else:
                row.update(compared=True, max_abs_error=float(worst[s, k]), tolerance_ratio=float(ratio[s, k]),
                           **derived.row(s, k, float(ratio[s, k])))
            layers.append(row)
        first = next((row["layer"] for row in layers if row["compared"] and not row["within_tolerance"]), None)
        results[kind] = {"available": True, "reference": reference, "inputs": len(sets[kind]), "atol": atol,
                         "rtol": rtol,
                         "tolerance": DERIVED if derived.fallback is None else f"fixed tolerance: {derived.fallback}",
                         "layers": layers, "first_over_tolerance": first}
    return results


def _fold(largest: np.ndarray, values: np.ndarray, owner: np.ndarray) -> None:
    """``largest[s]`` raised to the largest of ``values`` (rows, elements) over the rows of set ``s`` (``owner``):
    inf where a row has NaN or Inf."""
    rows = np.where(np.isfinite(values).all(axis=1), values.max(axis=1, initial=0.0), np.inf)
    np.maximum.at(largest, owner, rows)


class _Derived:
    """Each probed layer's float64 value and derived bound, and the C's distance to them, batch by batch, per set."""

    def __init__(self, code: GeneratedCode, model: Model, tensors: list[str], sets: int = 1):
        self.model, self.code, self.fallback = model, code, None
        self.probes = probed.probes_of(code.manifest)  # the probed build's, in the same order as ``tensors``
        self.channels_last = (code.manifest.get("model") or {}).get("format") == "keras"
        self.order = bounds.Order.from_manifest(code.manifest)  # the code's declared order of accumulation
        self.names = graph_tensors(code, model, tensors)
        self.distance = np.zeros((sets, len(tensors)))
        self.ratio = np.zeros((sets, len(tensors)))
        self.bound = np.zeros((sets, len(tensors)))
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

    def add(self, inputs: np.ndarray, outputs: list[np.ndarray], owner: np.ndarray) -> None:
        """The figures of a batch of ``inputs`` whose probed layer ``outputs`` are given, row ``i`` of set
        ``owner[i]``."""
        if self.fallback is not None:
            return
        # the C's own values of every layer, in the graph's layout: each layer is evaluated from them
        seeds = {name: graph_layout(c, probe, self.code) for name, c, probe in zip(self.names, outputs, self.probes)
                 if name is not None and name not in self.reordered}
        try:
            local = bounds.local_bounds(self.model, inputs, seeds, self.order)
        except ModelError as exc:
            self.fallback = str(exc)
            return
        for k, name in enumerate(self.names):
            if name in self.reordered:
                self.missing[k] = (f"the graph's {name} is flattened channels first, the Keras layer's channels last "
                                   f"(the same values in another order)")
                continue
            if name is None or local[name] is None:
                self.missing[k] = f"the model's graph has no tensor {name or 'for this layer'} of the C's " \
                    f"{self.probes[k].size} values"
                continue
            value, limit = local[name]
            distance = np.abs(seeds[name] - value)
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero bound allows only a zero distance
                ratio = np.where(distance == 0, 0.0, distance / limit)
            _fold(self.distance[:, k], distance, owner)
            _fold(self.ratio[:, k], ratio, owner)
            np.maximum.at(self.bound[:, k], owner, limit.max(axis=1, initial=0.0))

    def row(self, s: int, k: int, fixed_ratio: float) -> dict:
        """Set ``s``'s figures of layer ``k`` and its judgement: by its derived bound, else (fallback) by the fixed
        tolerance."""
        if self.fallback is not None or k in self.missing:
            return {"judged_by": f"fixed tolerance: {self.fallback or self.missing[k]}",
                    "within_tolerance": fixed_ratio <= 1}
        return {"judged_by": "derived bound", "graph_tensor": self.names[k],
                "c_to_float64": float(self.distance[s, k]), "largest_bound": float(self.bound[s, k]),
                "bound_ratio": float(self.ratio[s, k]), "within_tolerance": bool(self.ratio[s, k] <= 1)}
