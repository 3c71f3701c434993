"""The layer-local derived verdict: each layer of the C judged from the C's own input to it (docs/semantic.md).

The end-to-end derived bound must hold for every correct float32 implementation of the whole network, so it
carries every layer's worst rounding through the rest of the network: on cifarnet it is at least 7.4e-5, and a
defect that moves an output by 2e-5 passes it. Judging each layer alone is rigorous and tight at once: the C's
output of every layer is read (the probes of ``harness.runners.probed``, the buffers the manifest names in
``layers[*].output``), each layer is evaluated in float64 *from the C's own float32 input to it*, and the C's
output of the layer must lie within the bound of that layer's rounding alone (``bounds.local_bounds``: gamma_n
|W| |x| or the running error of the declared order of accumulation, plus the libm's ulp), which holds for any
correct float32 implementation of the layer given that input. No error is carried from one layer to the next, so
no layer's bound grows with depth. A layer outside its bound fails, named with the input, the element and both
figures.

A probed tensor the float64 graph does not hold under the same values (a Keras layer flattened channels last,
the export's Flatten channels first) is neither judged nor seeded: the layer after it is then evaluated from the
last seeded tensor through the exact reshaping, which is still rigorous.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.contract import ERROR, FAIL, PASS
from harness.digests import digest
from harness.core.intermediate import graph_tensors
from harness.core.pipeline import to_code_layout
from harness.errors import ModelError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.references import bounds
from harness.runners import probed
from harness.tensors import convert

RULE = "layer-local"


def unavailable(code: GeneratedCode, model: Model) -> str | None:
    """Why the C cannot be judged layer by layer (the end-to-end bound alone then decides), or None."""
    unnamed = [str(layer.get("index", k)) for k, layer in enumerate(code.manifest.get("layers", []))
               if isinstance(layer.get("output"), dict) and not (isinstance(layer.get("name"), str)
                                                                  and isinstance(layer["output"].get("tensor"), str))]
    if unnamed:  # which layer and tensor a buffer holds is what pairs it with the float64 graph
        return f"the manifest's layers {', '.join(unnamed)} name no layer or tensor (layers[*].name, output.tensor)"
    if not probed.probes_of(code.manifest):
        return "the manifest names no layer output buffers (layers[*].output)"
    missing = bounds.missing_rules(model)
    if missing:
        return f"no derived bound for {', '.join(missing)}"
    if "onnx" not in model.files:
        return f"{model.name} has no ONNX graph to evaluate in float64"
    return None


def identity() -> str:
    """What the layer-local verdict depends on besides the model, the code and the inputs (a content key's part):
    this module's source and the probes'; the bound rules are ``refcache.bounds_identity``'s."""
    return digest([Path(__file__).read_text(), Path(probed.__file__).read_text()])


def judge(code: GeneratedCode, model: Model, inputs: np.ndarray, work: Path, timeout: float,
          order: bounds.Order | None, index: np.ndarray | None = None) -> dict:
    """The layer-local verdict of ``code`` on ``inputs`` (canonical layout; ``index``: their numbers in the
    campaign, for the cause): ``verdict`` (pass, fail, or error when some layer's bound is not a finite number),
    ``cause`` naming the first layer outside its bound, ``layers`` (per probed layer: whether it was judged, the
    largest |C - float64| and bound, and the margin bound / distance), ``margin`` (the smallest over the layers),
    ``covers_output`` (whether a judged layer is the model's output, so that the layers judge the whole network),
    the ``accumulation`` rule the bounds used; ``judged: False`` and ``reason`` when the C cannot be judged so."""
    why = unavailable(code, model)
    accumulation = order.key() if order else "any"
    if why:
        return {"rule": RULE, "judged": False, "reason": why, "accumulation": accumulation}
    built = probed.build(code, work)
    folds = [_Fold() for _ in built.probes]
    names, reasons = _graph_names(code, model, built.probes)
    numbers = np.arange(len(inputs)) if index is None else np.asarray(index)
    for start, outputs in probed.run(built, to_code_layout(inputs, model, code), timeout):
        rows = inputs[start:start + len(outputs[0])]
        seeds = {names[k]: graph_layout(c, probe, code) for k, (probe, c) in enumerate(zip(built.probes, outputs))
                 if names[k] is not None}
        try:
            local = bounds.local_bounds(model, rows, seeds, order)
        except ModelError as exc:
            return {"rule": RULE, "judged": False, "reason": str(exc), "accumulation": accumulation}
        for k, name in enumerate(names):
            if name is None:
                continue
            if local[name] is None:
                names[k], reasons[k] = None, f"the graph's {name} does not have the C's {built.probes[k].size} values"
                continue
            folds[k].add(numbers[start:start + len(rows)], seeds[name], *local[name])
    layers = [{"layer": p.name, "index": p.index, "tensor": p.tensor, "graph_tensor": names[k],
               **(folds[k].figures() if names[k] is not None else {"judged": False, "reason": reasons[k]})}
              for k, p in enumerate(built.probes)]
    judged = [(row, folds[k]) for k, row in enumerate(layers) if row["judged"]]
    margins = [row["margin"] for row, _ in judged if row["margin"] is not None]
    result = {"rule": RULE, "judged": bool(judged), "accumulation": accumulation, "inputs": len(inputs),
              "layers": layers, "margin": min(margins, default=None),
              "covers_output": bool({row["graph_tensor"] for row, _ in judged} & _graph_outputs(model))}
    if not judged:
        return {**result, "reason": "no layer's tensor is in the model's float64 graph"}
    broken = next((row for row, fold in judged if not fold.finite), None)
    failing = next(((row, fold) for row, fold in judged if fold.outside), None)
    if broken is not None:
        return {**result, "verdict": ERROR, "cause": f"layer-local tolerance: the bound of layer {broken['layer']} "
                                                     f"({broken['tensor']}) is not a finite number"}
    if failing is not None:
        row, fold = failing
        return {**result, "verdict": FAIL, "first_failing": row["layer"], "cause": fold.cause(row)}
    return {**result, "verdict": PASS, "cause": None, "first_failing": None}


def _graph_names(code: GeneratedCode, model: Model, probes: tuple[probed.Probe, ...]
                 ) -> tuple[list[str | None], list[str | None]]:
    """The float64 graph's tensor of each probe, or None with the reason it is not judged."""
    names = graph_tensors(code, model, [p.tensor for p in probes])
    reasons: list[str | None] = [None if name else "the model's graph has no tensor for this layer" for name in names]
    for k, name in enumerate(names):  # one seed per tensor: the last layer that writes it holds its final value
        if name is not None and name in names[k + 1:]:
            names[k], reasons[k] = None, f"the graph's {name} is a later layer's tensor too, judged there"
    if _channels_last(code):
        # a Keras layer flattens channels last, the export's Flatten or Reshape channels first: the same values in
        # another order, which neither compares element by element nor seeds the next layer
        import onnx

        graph = onnx.load(str(model.file("onnx"))).graph
        reordered = {out for node in graph.node if node.op_type in ("Flatten", "Reshape") for out in node.output}
        for k, name in enumerate(names):
            if name in reordered:
                names[k], reasons[k] = None, f"the graph's {name} is flattened channels first, the C's channels last"
    return names, reasons


def _graph_outputs(model: Model) -> set[str]:
    """The names of the float64 graph's outputs."""
    import onnx

    return {out.name for out in onnx.load(str(model.file("onnx")), load_external_data=False).graph.output}


def _channels_last(code: GeneratedCode) -> bool:
    return (code.manifest.get("model") or {}).get("format") == "keras"


def graph_layout(c: np.ndarray, probe: probed.Probe, code: GeneratedCode) -> np.ndarray:
    """The C's (n, size) values of a probed tensor in the float64 graph's layout (channels first for code from
    Keras, whose export's graph is channels first; the code's own otherwise), flat, float64."""
    c = np.asarray(c, np.float64)
    layout = probe.layout
    if not _channels_last(code) or not layout or len(layout) < 2 or len(layout) != len(probe.shape):
        return c
    graph = "C" + layout.replace("C", "")
    return convert(c.reshape(len(c), *probe.shape), layout, graph).reshape(len(c), -1)


class _Fold:
    """One layer's figures over the batches: the largest distance and bound, the smallest margin, the worst
    element outside the bound (largest distance / bound) and how many inputs have one."""

    def __init__(self):
        self.distance = self.bound = 0.0
        self.margin = np.inf
        self.finite = True
        self.outside = 0
        self.worst: tuple[float, int, int, float, float] | None = None  # (ratio, input, element, distance, bound)

    def add(self, numbers: np.ndarray, c: np.ndarray, value: np.ndarray, bound: np.ndarray) -> None:
        """Fold one batch in: ``numbers`` are its rows' input numbers in the campaign."""
        self.finite = self.finite and bool((np.isfinite(bound) & (bound >= 0)).all())
        with np.errstate(invalid="ignore", divide="ignore"):
            distance = np.where(np.isfinite(c), np.abs(c - value), np.inf)
            ratio = np.where(distance == 0, 0.0, distance / bound)
        self.distance = max(self.distance, float(distance.max(initial=0.0)))
        self.bound = max(self.bound, float(bound.max(initial=0.0)))
        self.margin = min(self.margin, float(np.where(distance > 0, bound / np.maximum(distance, 1e-300),
                                                      np.inf).min(initial=np.inf)))
        bad = ~(distance <= bound)
        self.outside += int(bad.any(axis=1).sum())
        if bad.any():
            row, col = np.unravel_index(int(np.argmax(np.where(bad, ratio, -1.0))), ratio.shape)
            if self.worst is None or ratio[row, col] > self.worst[0]:
                self.worst = (float(ratio[row, col]), int(numbers[row]), int(col), float(distance[row, col]),
                              float(bound[row, col]))

    def figures(self) -> dict:
        return {"judged": True, "c_distance": self.distance, "bound": self.bound,
                "margin": self.margin if np.isfinite(self.margin) else None}  # None: the C equals float64

    def cause(self, row: dict) -> str:
        _, index, element, distance, bound = self.worst
        return (f"layer {row['layer']} ({row['tensor']}) at input #{index}, element {element}: |C - float64 from the "
                f"C's own input| = {distance:.4e} above the layer's local bound {bound:.4e} ({self.outside} inputs "
                f"outside it)")
