"""A small graph IR shared by the front ends and the C back end.

Tensors keep the source model's axis order and layout: Keras graphs are
channels-last (``HWC``), ONNX graphs channels-first (``CHW``). Nothing is
transposed; emitters find an axis by its letter, so Flatten and Reshape are
plain reinterpretations of the same memory in both layouts, and parameters stay
as the source stores them (the emitters index them through their own layout
strings such as ``HWIO`` or ``OIHW``).

A node's ``op`` selects its emitter (see ``layers.EMITTERS``); ``kind`` is the
source layer class or ONNX op type and ``name`` the source layer name, both
reported in the manifest and in the C comment that opens the layer's code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Ops that only reinterpret their input's memory; they emit no code.
VIEW_OPS = frozenset({"View"})
# Ops that emit no code at all because another layer absorbed them.
FUSED_OP = "Fused"
# Producers that can apply an elementwise activation to each value they store.
FUSABLE_OPS = frozenset({"Dense", "Conv2D", "Pool2D", "GlobalPool2D", "BatchNorm", "Elementwise", "Concat"})


def default_layout(rank: int, channels_last: bool) -> str | None:
    """Axis letters of a tensor of this rank (no batch axis), as harness/tensors.py names them."""
    if rank == 1:
        return "C"
    if rank == 2:
        return "HC" if channels_last else "CH"
    if rank == 3:
        return "HWC" if channels_last else "CHW"
    return None


# In a Dense node's ``x_axes``/``w_axes``: the axis summed over.
CONTRACTED = -1


def dense_axes(rank: int, weight_layout: str) -> dict:
    """Dense attrs for ``X @ W`` over the last axis of a rank-``rank`` input, ``W`` stored ``IO`` or ``OI``.

    A Dense node is a matrix product written as an index map rather than a
    fixed form, so ``X @ W``, ``W @ X`` and transposed Gemm operands share one
    emitter: ``x_axes`` and ``w_axes`` give, for each axis of the input tensor
    and of the stored weight, the output axis it runs along, ``CONTRACTED``
    for the summed axis, or ``None`` for an axis of size 1 read at index 0.
    """
    rows = tuple(range(rank - 1))
    w_axes = (CONTRACTED, rank - 1) if weight_layout == "IO" else (rank - 1, CONTRACTED)
    return {"x_axes": rows + (CONTRACTED,), "w_axes": w_axes}


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


@dataclass
class Tensor:
    """A float32 tensor without its batch axis, stored contiguously in ``shape`` order."""

    name: str
    shape: tuple[int, ...]
    layout: str | None  # one letter per axis, or None for ranks without a name (> 3)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def strides(self) -> tuple[int, ...]:
        return row_major_strides(self.shape)

    def axis(self, letter: str) -> int:
        if self.layout is None or letter not in self.layout:
            raise KeyError(f"tensor {self.name} {list(self.shape)} has no axis {letter} (layout {self.layout})")
        return self.layout.index(letter)

    def dim(self, letter: str) -> int:
        return self.shape[self.axis(letter)]


@dataclass(frozen=True)
class Activation:
    """An activation function by name with its numeric parameters (see ``activations.py``)."""

    kind: str
    params: tuple[float, ...] = ()

    @property
    def is_identity(self) -> bool:
        return self.kind == "linear"


@dataclass
class Node:
    """One source layer (or ONNX node) and the computation it stands for."""

    name: str
    kind: str
    op: str
    inputs: list[str]
    output: str | None
    attrs: dict = field(default_factory=dict)
    params: dict[str, np.ndarray] = field(default_factory=dict)
    act: Activation | None = None
    input_shapes: list[tuple[int, ...]] = field(default_factory=list)
    output_shape: tuple[int, ...] = ()
    note: str = ""  # why a node emits no code (fusion), shown in its comment


@dataclass
class Graph:
    """A single-input, single-output feed-forward graph in topological order."""

    source: str  # file name, for messages and comments
    fmt: str  # "keras" or "onnx"
    tensors: dict[str, Tensor] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    input: str = ""
    output: str = ""
    input_name: str = ""  # source names reported in the manifest
    output_name: str = ""

    def add_tensor(self, name: str, shape: tuple[int, ...], layout: str | None) -> Tensor:
        tensor = Tensor(name, tuple(int(d) for d in shape), layout)
        self.tensors[name] = tensor
        return tensor

    def add_node(self, node: Node) -> Node:
        node.input_shapes = [self.tensors[name].shape for name in node.inputs]
        if node.output is not None:
            node.output_shape = self.tensors[node.output].shape
        self.nodes.append(node)
        return node

    def consumers(self, tensor: str) -> list[Node]:
        return [node for node in self.nodes if tensor in node.inputs]

    def producer(self, tensor: str) -> Node | None:
        for node in self.nodes:
            if node.output == tensor:
                return node
        return None


def fuse_activations(graph: Graph) -> None:
    """Fold each elementwise Activation node into its producer (Definition 14 of the paper).

    The activation node stays in the list as a comment-only layer so that every
    source layer still appears in the manifest; its note names the layer that
    now computes it.
    """
    for node in graph.nodes:
        if node.op != "Activation":
            continue
        source = node.inputs[0]
        producer = graph.producer(source)
        if (producer is None or producer.op not in FUSABLE_OPS or producer.act is not None
                or source == graph.output or len(graph.consumers(source)) != 1):
            continue
        producer.act = node.attrs["act"]
        producer.output = node.output
        node.op, node.inputs, node.output = FUSED_OP, [], None
        node.note = f"{node.attrs['act'].kind} computed by layer '{producer.name}'"
    for name in [name for name in graph.tensors if name != graph.input]:
        if graph.producer(name) is None and not graph.consumers(name):
            del graph.tensors[name]
