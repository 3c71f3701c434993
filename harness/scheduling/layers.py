"""The DAG of a generated model (§2.2): layers from the generator's manifest, weights from per-layer WCETs.

Nodes are the manifest's layers that have inputs (a fused activation has none:
its producer computes it and it emits no code); an edge joins a layer to each
layer its ``inputs`` name (docs/manifest.md). A node's weight is its layer's
WCET bound; a layer whose span holds no code (a reshape: the paper's Table 1
gives it 0) weighs 0, and a layer with code but no WCET is an error rather
than a silent 0.

An edge's weight is the cost of moving the producer's output tensor from one
core to another: the Writing operator on the source core plus the Reading
operator on the destination (§5.2-5.3). ``OperatorCost`` takes both from the
WCET analysis of the generated operators for that tensor size
(``harness.stages.schedule.operator_wcet``, waits excluded: the schedule's
communication already starts when the producer ends). ``CopyCost`` is the
earlier *provisional* model, ``fixed + per_float * floats`` per operator,
still selectable (``assay schedule --comm-fixed/--comm-per-float``) and used
for hand-made DAGs. Either is recorded with every schedule
(``communication_cost``), and ``operator_cycles`` reads it back for the
parallel WCET composition.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from harness.scheduling.dag import Dag


@dataclass(frozen=True)
class CopyCost:
    """Provisional cost of one inter-core communication of ``floats`` floats (module docstring)."""

    fixed: int = 20  # cycles per operator: flag wait (when no wait is needed), flag update
    per_float: int = 8  # cycles per float copied by one operator

    def operator(self, kind: str, floats: int) -> int:
        return self.fixed + self.per_float * floats

    def cycles(self, floats: int) -> int:
        return self.operator("write", floats) + self.operator("read", floats)

    def describe(self) -> dict:
        return {"model": "provisional-copy", "fixed_cycles": self.fixed, "cycles_per_float": self.per_float,
                "formula": "2 * (fixed_cycles + cycles_per_float * floats)  (Writing + Reading operators)"}


@dataclass(frozen=True)
class OperatorCost:
    """Edge cost from the WCETs of the generated Writing and Reading operators, per tensor size."""

    table: dict[int, dict[str, int]]  # floats -> {"write": cycles, "read": cycles}
    target: str
    timing: str

    def operator(self, kind: str, floats: int) -> int:
        if floats not in self.table:
            raise LayerGraphError(f"no operator WCET for a tensor of {floats} floats")
        return self.table[floats][kind]

    def cycles(self, floats: int) -> int:
        return self.operator("write", floats) + self.operator("read", floats)

    def describe(self) -> dict:
        return {"model": "operator-wcet", "target": self.target, "timing": self.timing,
                "formula": "WCET(Writing operator) + WCET(Reading operator) of the tensor's size, waits excluded",
                "operators": [{"floats": n, "write_cycles": c["write"], "read_cycles": c["read"]}
                              for n, c in sorted(self.table.items())]}


def operator_cycles(cost: dict):
    """``(kind, floats) -> cycles`` of one operator from a schedule's ``communication_cost`` record."""
    if cost.get("model") == "operator-wcet":
        return OperatorCost({o["floats"]: {"write": o["write_cycles"], "read": o["read_cycles"]}
                             for o in cost["operators"]}, cost["target"], cost["timing"]).operator
    return CopyCost(cost["fixed_cycles"], cost["cycles_per_float"]).operator


def edge_sizes(manifest: dict) -> set[int]:
    """The output sizes (floats) of the layers whose output another layer reads: the tensors edges move."""
    by_index = {layer["index"]: layer for layer in manifest.get("layers", [])}
    return {prod(by_index[source]["output_shape"]) for layer in manifest.get("layers", [])
            for source in layer.get("inputs") or [] if source is not None and source in by_index}


class LayerGraphError(ValueError):
    """The manifest or the WCETs cannot make a DAG (one line naming the layer)."""


def has_code(layer: dict) -> bool:
    """Whether the layer's span holds more than its opening comment."""
    first, last = layer["lines"]
    return last > first


def from_manifest(manifest: dict, wcets: dict[str, int], cost: CopyCost | OperatorCost) -> Dag:
    """The model's DAG: one node per layer with inputs, weighted by ``wcets`` (layer name -> cycles)."""
    layers = [layer for layer in manifest.get("layers", []) if layer.get("inputs")]
    if not layers:
        raise LayerGraphError("the manifest lists no layer with inputs (a manifest older than the 'inputs' field?)")
    index = {layer["index"]: i for i, layer in enumerate(layers)}
    weights = []
    for layer in layers:
        wcet = wcets.get(layer["name"])
        if wcet is None and has_code(layer):
            raise LayerGraphError(f"layer '{layer['name']}' has code but no WCET")
        weights.append(int(wcet or 0))
    sizes = tuple(prod(layer["output_shape"]) for layer in layers)
    edges: dict[tuple[int, int], int] = {}
    for i, layer in enumerate(layers):
        for source in layer["inputs"]:
            if source is None:
                continue  # the inference's input: in memory every core reads
            if source not in index:
                raise LayerGraphError(f"layer '{layer['name']}' reads layer {source}, which is not in the manifest")
            edges[(index[source], i)] = cost.cycles(sizes[index[source]])
    return Dag(tuple(layer["name"] for layer in layers), tuple(weights), edges, sizes)
