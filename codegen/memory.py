"""Static memory: where every tensor lives.

The model input is read in place from the ``input`` argument and the final
tensor is written straight into ``output``. Every other tensor gets an offset
in one static arena (``static float <prefix>arena[N]``); two tensors share
space only when their lifetimes do not overlap. Views (Flatten, Reshape,
Dropout...) share their input's storage and extend its lifetime.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.cwriter import INT_MAX
from codegen.errors import UnsupportedModel
from codegen.ir import VIEW_OPS, Graph

ALIGN = 4  # floats (16 bytes)


@dataclass(frozen=True)
class Buffer:
    symbol: str
    offset: int

    def at(self, index: str) -> str:
        """A C lvalue for element ``index`` (a C expression) of the tensor stored here."""
        if self.offset == 0:
            return f"{self.symbol}[{index}]"
        if index == "0":
            return f"{self.symbol}[{self.offset}]"
        return f"{self.symbol}[{self.offset} + {index}]"


@dataclass(frozen=True)
class MemoryPlan:
    buffers: dict[str, Buffer]  # tensor name -> storage
    arena_symbol: str
    arena_size: int  # floats; 0 when no intermediate tensor is needed


def plan(graph: Graph, arena_symbol: str) -> MemoryPlan:
    """Assign storage to every tensor of ``graph`` (marks a view that must copy with attrs['copy'])."""
    views = {node.output: node.inputs[0] for node in graph.nodes if node.op in VIEW_OPS}

    def root(tensor: str) -> str:
        while tensor in views:
            tensor = views[tensor]
        return tensor

    if graph.output == graph.input:
        raise UnsupportedModel(f"{graph.source}: the model has no layer between its input and its output")
    if root(graph.output) == graph.input:
        # The output is only a reinterpretation of the input: the last view copies.
        del views[graph.output]
        graph.producer(graph.output).attrs["copy"] = True

    storage = {graph.input: Buffer("input", 0), root(graph.output): Buffer("output", 0)}
    last_use: dict[str, int] = {}
    for index, node in enumerate(graph.nodes):
        for name in node.inputs:
            last_use[root(name)] = index

    blocks: dict[str, tuple[int, int]] = {}  # live arena tensors: root -> (offset, size)
    high = 0
    for index, node in enumerate(graph.nodes):
        out = node.output
        if out is not None and out not in views and out not in storage:
            size = _aligned(graph.tensors[out].size)
            offset = _first_fit(sorted(blocks.values()), size)
            blocks[out] = (offset, size)
            storage[out] = Buffer(arena_symbol, offset)
            high = max(high, offset + size)
        for name in [name for name in blocks if last_use.get(name, -1) <= index]:
            del blocks[name]
    if high > INT_MAX:
        raise UnsupportedModel(f"{graph.source}: the intermediate tensors need an arena of {high} floats; "
                               f"buffers are limited to INT_MAX ({INT_MAX}) elements")
    buffers = {name: storage[root(name)] for name in graph.tensors}
    return MemoryPlan(buffers, arena_symbol, high)


def _aligned(size: int) -> int:
    return (size + ALIGN - 1) // ALIGN * ALIGN


def _first_fit(blocks: list[tuple[int, int]], size: int) -> int:
    offset = 0
    for start, length in blocks:
        if start - offset >= size:
            return offset
        offset = max(offset, start + length)
    return offset
