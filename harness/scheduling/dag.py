"""The application model of the multi-core paper (§2.2): a DAG of tasks with WCETs and communication costs.

Plain data: node names, integer weights and a dict of edges, so the scheduling
algorithms, the CP-SAT model and the validity checker share one description
and nothing here knows about models, generators or targets. Weights are
integers (cycles, or the §4 benchmark's units) because CP-SAT solves over the
integers.

Several sinks are joined by a virtual sink of weight 0 reached by edges of
cost 0 (§2.2, the red part of Figure 3): constraint 6 of the exact model and
the "no redundant copy" rule are about the one sink.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cached_property

VIRTUAL_SINK = "(sink)"


@dataclass(frozen=True)
class Dag:
    """Nodes ``0..n-1`` named ``names``, with WCETs ``weights`` and edges ``(u, v) -> communication cost``.

    ``sizes`` optionally gives, per node, the number of floats its output carries (the tensor an edge copies).
    """

    names: tuple[str, ...]
    weights: tuple[int, ...]
    edges: dict[tuple[int, int], int]
    sizes: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        n = len(self.names)
        if len(self.weights) != n or len(set(self.names)) != n:
            raise ValueError("a DAG needs one weight per node and unique node names")
        if any(not isinstance(w, int) or w < 0 for w in self.weights):
            raise ValueError("node weights must be non-negative integers")
        for (u, v), cost in self.edges.items():
            if not (0 <= u < n and 0 <= v < n) or u == v:
                raise ValueError(f"edge ({u}, {v}) does not join two distinct nodes of 0..{n - 1}")
            if not isinstance(cost, int) or cost < 0:
                raise ValueError(f"edge ({u}, {v}) has a cost {cost!r}; costs must be non-negative integers")
        if len(self.order) != n:
            raise ValueError("the graph has a cycle")

    @property
    def n(self) -> int:
        return len(self.names)

    @cached_property
    def parents(self) -> tuple[tuple[int, ...], ...]:
        found: list[list[int]] = [[] for _ in self.names]
        for u, v in sorted(self.edges):
            found[v].append(u)
        return tuple(tuple(p) for p in found)

    @cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        found: list[list[int]] = [[] for _ in self.names]
        for u, v in sorted(self.edges):
            found[u].append(v)
        return tuple(tuple(c) for c in found)

    @cached_property
    def order(self) -> tuple[int, ...]:
        """A topological order (Kahn's algorithm, smallest index first); shorter than ``n`` on a cycle."""
        indegree = [0] * len(self.names)
        succ: list[list[int]] = [[] for _ in self.names]
        for u, v in self.edges:
            indegree[v] += 1
            succ[u].append(v)
        ready = sorted(i for i, d in enumerate(indegree) if d == 0)
        out = []
        while ready:
            node = ready.pop(0)
            out.append(node)
            for child in sorted(succ[node]):
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
            ready.sort()
        return tuple(out)

    @cached_property
    def sinks(self) -> tuple[int, ...]:
        return tuple(i for i in range(self.n) if not self.children[i])

    @property
    def sink(self) -> int:
        """The one sink (``with_single_sink`` makes one)."""
        if len(self.sinks) != 1:
            raise ValueError(f"the DAG has {len(self.sinks)} sinks; call with_single_sink() first")
        return self.sinks[0]

    @cached_property
    def levels(self) -> tuple[int, ...]:
        """Kruatrachue's level: the largest sum of WCETs on a path from the node to a sink (node included)."""
        level = [0] * self.n
        for node in reversed(self.order):
            level[node] = self.weights[node] + max((level[c] for c in self.children[node]), default=0)
        return tuple(level)

    @cached_property
    def heads(self) -> tuple[int, ...]:
        """The largest sum of WCETs on a path from a source to the node (node excluded): an earliest start."""
        head = [0] * self.n
        for node in self.order:
            head[node] = max((head[p] + self.weights[p] for p in self.parents[node]), default=0)
        return tuple(head)

    @property
    def sequential(self) -> int:
        """The single-core makespan: every task once, no communication (the numerator of eq. 15)."""
        return sum(self.weights)

    @property
    def critical_path(self) -> int:
        return max(self.levels, default=0)

    def size(self, node: int) -> int:
        return self.sizes[node] if self.sizes else 0

    def with_single_sink(self) -> Dag:
        """This DAG, or a copy with a virtual sink (weight 0) after every sink through edges of cost 0."""
        if len(self.sinks) <= 1:
            return self
        sink = self.n
        edges = dict(self.edges) | {(s, sink): 0 for s in self.sinks}
        sizes = (*self.sizes, 0) if self.sizes else ()
        return Dag((*self.names, VIRTUAL_SINK), (*self.weights, 0), edges, sizes)

    def density(self) -> float:
        """Eq. 14: |E| over the largest number of edges a DAG on these nodes can have."""
        return len(self.edges) / (self.n * (self.n - 1) / 2) if self.n > 1 else 0.0


def random_dag(n: int, density: float, seed: int, low: int = 1, high: int = 10) -> Dag:
    """A §4.1 random DAG: ``n`` nodes, edges from lower to higher indices drawn to ``density`` (eq. 14),
    node WCETs and edge costs uniform integers in [low, high], then made one-sink (§2.2).

    The number of edges is ``round(density * n(n-1)/2)``, drawn without replacement among the pairs
    ``i < j``, so every set of graphs has exactly the stated density before the sink step.
    """
    rng = random.Random(seed)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = rng.sample(pairs, round(density * len(pairs)))
    weights = tuple(rng.randint(low, high) for _ in range(n))
    edges = {pair: rng.randint(low, high) for pair in sorted(chosen)}
    return Dag(tuple(str(i) for i in range(n)), weights, edges).with_single_sink()
