"""The DAG of a generated model (§2.2): layers from the generator's manifest, weights from per-layer WCETs.

Nodes are the manifest's layers that have inputs (a fused activation has none:
its producer computes it and it emits no code); an edge joins a layer to each
layer its ``inputs`` name (docs/manifest.md). A node's weight is its layer's
WCET bound; a layer whose span holds no code (a reshape: the paper's Table 1
gives it 0) weighs 0, and a layer with code but no WCET is an error rather
than a silent 0.

An edge's weight is the cost of moving the producer's output tensor from one
core to another: the Writing operator on the source core plus the Reading
operator on the destination (§5.2-5.3). Those operators are not generated yet,
so ``CopyCost`` is a *provisional* model, a parameter of every schedule that
is recorded with it: each operator waits on its flag, copies the tensor and
bumps the flag, so it costs ``fixed`` cycles plus ``per_float`` cycles per
float copied, and an edge costs two operators. The defaults are small: a
word copy loop at -O0 on an in-order ARM core is a load, a store and the loop
counter's update and branch, 8 cycles per float with single-cycle memory,
and the flag handshake a few loads, a compare and a store. Once the operators
exist, their per-operator WCETs replace this model.
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

    def cycles(self, floats: int) -> int:
        return 2 * (self.fixed + self.per_float * floats)  # Writing + Reading

    def describe(self) -> dict:
        return {"model": "provisional-copy", "fixed_cycles": self.fixed, "cycles_per_float": self.per_float,
                "formula": "2 * (fixed_cycles + cycles_per_float * floats)  (Writing + Reading operators)"}


class LayerGraphError(ValueError):
    """The manifest or the WCETs cannot make a DAG (one line naming the layer)."""


def has_code(layer: dict) -> bool:
    """Whether the layer's span holds more than its opening comment."""
    first, last = layer["lines"]
    return last > first


def from_manifest(manifest: dict, wcets: dict[str, int], cost: CopyCost) -> Dag:
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
