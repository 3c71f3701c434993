"""Semantics-preserving model transformations (§2.2 of the ACETONE paper), applied to the IR.

Each transformation is a function of the graph that changes it in place and
returns how many places it changed; every strategy (V1, V2, V3) generates
from the transformed graph, so one option set means the same model for all
three. They run in the fixed order of ``ORDER`` whatever order the user names
them in:

* ``fold-bn`` (Property 4): a BatchNormalization whose input comes from a
  Conv2D or Dense layer (no activation between, no other reader) is folded
  into that layer: kernel'[.., o] = kernel[.., o] * scale[o] and bias' =
  bias * scale + shift, computed in float64 and stored as float32.
* ``relu-after-pool`` (Property 3): a ReLU-like activation (relu, relu6,
  clip, leaky_relu with a non-negative slope) applied just before a max
  pooling is applied after it instead. These activations are monotone
  non-decreasing and piecewise linear, so max(f(x_i)) = f(max(x_i)) holds
  exactly in float arithmetic too; padded cells are ignored by the pooling,
  so padding does not break it.
* ``fuse-activation`` (Definition 14): an elementwise activation layer is
  computed by the layer that produces its input (``ir.fuse_activations``).

A layer a transformation removes stays in the graph as a comment-only layer
whose note says where its computation went, so the manifest still lists
every source layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from codegen.errors import UnsupportedModel
from codegen.ir import FUSED_OP, Activation, Graph, Node, fuse_activations

ORDER = ("fold-bn", "relu-after-pool", "fuse-activation")
DEFAULT = ("fuse-activation",)  # the strategies' default: the paper's extended layers (Definition 14)
MONOTONE_PIECEWISE_LINEAR = frozenset({"relu", "relu6", "clip", "leaky_relu"})


def parse(names: Iterable[str] | str | None) -> tuple[str, ...]:
    """Transformation names (a sequence or a comma-separated string; ``none`` or empty for none) in ``ORDER``."""
    if names is None:
        return DEFAULT
    if isinstance(names, str):
        names = [part.strip() for part in names.split(",") if part.strip()]
    chosen = set(names) - {"none"}
    unknown = sorted(chosen - set(ORDER))
    if unknown:
        raise UnsupportedModel(f"unknown transformation(s) {', '.join(unknown)}; known: {', '.join(ORDER)}, none")
    return tuple(name for name in ORDER if name in chosen)


def apply(graph: Graph, names: tuple[str, ...]) -> dict[str, int]:
    """Apply ``names`` (already in ``ORDER``) to ``graph``; return how many places each changed."""
    return {name: TRANSFORMS[name](graph) for name in names}


def applicable(graph: Graph) -> tuple[str, ...]:
    """The transformations that would change ``graph`` (tried on throw-away copies of the node list)."""
    found = []
    for name in ORDER:
        trial = _copy(graph)
        if name != "fuse-activation":
            fuse_activations(trial)  # the others are judged on top of the default
        if TRANSFORMS[name](trial):
            found.append(name)
    return tuple(found)


def _copy(graph: Graph) -> Graph:
    """A copy deep enough for the transformations: nodes and tensors are new objects, arrays shared."""
    from dataclasses import replace

    copy = replace(graph, tensors=dict(graph.tensors), nodes=[])
    for node in graph.nodes:
        copy.nodes.append(replace(node, inputs=list(node.inputs), attrs=dict(node.attrs), params=dict(node.params),
                                  input_shapes=list(node.input_shapes)))
    return copy


def _only_reader(graph: Graph, tensor: str) -> Node | None:
    readers = graph.consumers(tensor)
    return readers[0] if len(readers) == 1 and tensor != graph.output else None


def _absorb(graph: Graph, removed: Node, into: Node, note: str) -> None:
    """``into`` now writes ``removed``'s output; ``removed`` becomes a comment-only layer."""
    del graph.tensors[into.output]
    into.output = removed.output
    into.output_shape = graph.tensors[removed.output].shape
    removed.op, removed.inputs, removed.output, removed.note = FUSED_OP, [], None, note


def fold_batch_norm(graph: Graph) -> int:
    """Property 4: BatchNorm after Conv2D or Dense becomes new kernel and bias of that layer."""
    count = 0
    for bn in [node for node in graph.nodes if node.op == "BatchNorm" and node.act is None]:
        producer = graph.producer(bn.inputs[0])
        if (producer is None or producer.op not in ("Conv2D", "Dense") or producer.act is not None
                or _only_reader(graph, bn.inputs[0]) is not bn):
            continue
        y = graph.tensors[bn.inputs[0]]
        scale, shift = (np.asarray(bn.params[k], dtype=np.float64).reshape(-1) for k in ("scale", "shift"))
        folded = _fold(producer, y.shape, y.axis("C"), scale, shift)
        if folded is None:
            continue
        producer.params.update(folded)
        _absorb(graph, bn, producer, f"batch normalization folded into layer '{producer.name}' (Property 4)")
        count += 1
    return count


def _fold(node: Node, shape: tuple[int, ...], channel_axis: int, scale: np.ndarray,
          shift: np.ndarray) -> dict[str, np.ndarray] | None:
    """New kernel and bias of ``node`` with the per-channel affine map folded in, or None if it cannot be."""
    kernel = np.asarray(node.params["kernel"], dtype=np.float64)
    channels = shape[channel_axis]
    if node.op == "Conv2D":
        k_axis = node.attrs["kernel_layout"].index("O")
    else:
        if node.attrs.get("alpha", 1.0) != 1.0 or node.attrs.get("beta", 1.0) != 1.0:
            return None
        w_axes = node.attrs["w_axes"]
        if channel_axis != len(shape) - 1 or len(shape) - 1 not in w_axes:
            return None  # the channel must be the output axis the kernel runs along
        k_axis = w_axes.index(len(shape) - 1)
    view = [1] * kernel.ndim
    view[k_axis] = channels
    bias = np.zeros(channels)
    if "bias" in node.params:
        stored = np.asarray(node.params["bias"], dtype=np.float64)
        if stored.size == channels:
            bias = stored.reshape(-1)
        elif stored.size == 1:
            bias = np.full(channels, float(stored.reshape(-1)[0]))
        else:
            return None  # a bias that varies along another axis
    return {"kernel": kernel * scale.reshape(view), "bias": bias * scale + shift}


def _relu_like(act: Activation | None) -> bool:
    if act is None or act.kind not in MONOTONE_PIECEWISE_LINEAR:
        return False
    return act.kind != "leaky_relu" or act.params[0] >= 0.0


def _max_pool(node: Node | None) -> bool:
    return node is not None and node.op == "Pool2D" and node.attrs["kind"] == "max" and node.act is None


def relu_after_pool(graph: Graph) -> int:
    """Property 3: move a ReLU-like activation from before a max pooling to after it."""
    count = 0
    for node in list(graph.nodes):
        if node.op == "Activation" and _relu_like(node.attrs["act"]):
            pool = _only_reader(graph, node.output)
            if not _max_pool(pool):
                continue
            _swap(graph, node, pool)
            count += 1
        elif node.op != "Activation" and node.output is not None and _relu_like(node.act):
            pool = _only_reader(graph, node.output)
            if not _max_pool(pool):
                continue
            pool.act, node.act = node.act, None
            pool.note = f"{pool.act.kind} of layer '{node.name}' applied after the pooling (Property 3)"
            count += 1
    return count


def _swap(graph: Graph, act: Node, pool: Node) -> None:
    """X -act-> A -pool-> B becomes X -pool-> A' -act-> B, A' having the pooled shape."""
    middle = act.output
    pooled = graph.tensors[pool.output]
    graph.tensors[middle] = type(pooled)(middle, pooled.shape, pooled.layout)
    pool.inputs, pool.output = [act.inputs[0]], middle
    act.inputs, act.output = [middle], pooled.name
    pool.input_shapes = [graph.tensors[pool.inputs[0]].shape]
    act.input_shapes = [pooled.shape]
    pool.output_shape = act.output_shape = pooled.shape
    act.note = f"applied after max pooling '{pool.name}' (Property 3)"
    first, second = graph.nodes.index(act), graph.nodes.index(pool)
    graph.nodes[first], graph.nodes[second] = pool, act


def _fuse(graph: Graph) -> int:
    before = sum(node.op == FUSED_OP for node in graph.nodes)
    fuse_activations(graph)
    return sum(node.op == FUSED_OP for node in graph.nodes) - before


TRANSFORMS: dict[str, Callable[[Graph], int]] = {
    "fold-bn": fold_batch_norm,
    "relu-after-pool": relu_after_pool,
    "fuse-activation": _fuse,
}
