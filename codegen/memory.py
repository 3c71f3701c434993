"""Static memory: where every tensor lives.

The model input is read in place from the ``input`` argument and the final
tensor is written straight into ``output``. Every other tensor gets an offset
in one static arena (``static float <prefix>arena[N]``); two tensors share
space only when their lifetimes do not overlap. Views (Flatten, Reshape,
Dropout...) share their input's storage and extend its lifetime. Quantized
tensors (int8, uint8) live in an arena of their own C type,
``<prefix>arena_i8`` or ``<prefix>arena_u8``, planned the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codegen.cwriter import INT_MAX
from codegen.errors import UnsupportedModel
from codegen.ir import QUANTIZED_TYPES, VIEW_OPS, Graph

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
    # quantized tensors' arenas: dtype -> (symbol, size in elements), only those some tensor uses
    integer_arenas: dict[str, tuple[str, int]] = field(default_factory=dict)

    def declarations(self) -> list[str]:
        """The C definitions of the arenas, float first."""
        lines = [f"static float {self.arena_symbol}[{self.arena_size}];"] if self.arena_size else []
        return lines + [f"static {QUANTIZED_TYPES[dtype][2]} {symbol}[{size}];"
                        for dtype, (symbol, size) in self.integer_arenas.items()]


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

    # one arena per stored type (a float8/float4 type's values are floats, in an arena of their own all the same)
    symbols = {"float32": arena_symbol, "int8": f"{arena_symbol}_i8", "uint8": f"{arena_symbol}_u8",
               **{dtype: f"{arena_symbol}_{dtype}" for dtype in QUANTIZED_TYPES if dtype not in ("int8", "uint8")}}
    blocks: dict[str, dict[str, tuple[int, int]]] = {dtype: {} for dtype in symbols}  # live: root -> (offset, size)
    high = dict.fromkeys(symbols, 0)
    for index, node in enumerate(graph.nodes):
        out = node.output
        if out is not None and out not in views and out not in storage:
            dtype = graph.tensors[out].dtype
            size = _aligned(graph.tensors[out].size)
            offset = _first_fit(sorted(blocks[dtype].values()), size)
            blocks[dtype][out] = (offset, size)
            storage[out] = Buffer(symbols[dtype], offset)
            high[dtype] = max(high[dtype], offset + size)
        for live in blocks.values():
            for name in [name for name in live if last_use.get(name, -1) <= index]:
                del live[name]
    for dtype, size in high.items():
        if size > INT_MAX:
            unit = "floats" if dtype == "float32" else f"{dtype} values"
            raise UnsupportedModel(f"{graph.source}: the intermediate tensors need an arena of {size} {unit}; "
                                   f"buffers are limited to INT_MAX ({INT_MAX}) elements")
    buffers = {name: storage[root(name)] for name in graph.tensors}
    integer = {dtype: (symbols[dtype], size) for dtype, size in high.items() if dtype != "float32" and size}
    return MemoryPlan(buffers, arena_symbol, high["float32"], integer)


def _aligned(size: int) -> int:
    return (size + ALIGN - 1) // ALIGN * ALIGN


def _first_fit(blocks: list[tuple[int, int]], size: int) -> int:
    offset = 0
    for start, length in blocks:
        if start - offset >= size:
            return offset
        offset = max(offset, start + length)
    return offset
