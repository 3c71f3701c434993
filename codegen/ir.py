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

Ops and their attrs (the contract every front end builds to; shapes are IR shapes):

* ``Conv2D``: ``kernel`` (kh, kw), ``strides``, ``dilations``, ``pads`` (top,
  left, bottom, right), ``kernel_layout`` (``HWIO`` or ``OIHW``) and
  ``group`` (default 1). The kernel's I axis holds ``C_in / group`` channels;
  output channel ``oc`` belongs to group ``oc // (C_out / group)`` and reads
  input channels ``g * C_in / group + i`` (ONNX's definition). Depthwise is
  ``group = C_in`` (Keras ``DepthwiseConv2D``: kernel ``(kh, kw, C, M)``
  reshaped to ``(kh, kw, 1, C * M)``); ``SeparableConv2D`` is that node then a
  1x1 ``Conv2D``. 1-D convolution and pooling are the 2-D ops on a ``View``
  with H = 1 (kernel ``(1, k)``), viewed back to rank 2 after.
* ``ConvTranspose2D``: the ``Conv2D`` attrs with ``kernel_layout`` ``IOHW``
  (ONNX, ``(C_in, C_out / group, kh, kw)``) or ``HWOI`` (Keras); input cell
  (ih, iw) adds ``x * w`` to output (ih * s + kh * d - pad_top, ...). The
  output tensor's shape already includes ``output_padding``.
* ``Pool2D`` (``kind`` max or avg), ``GlobalPool2D``, ``Dense`` (``x_axes``,
  ``w_axes``: ``dense_axes``), ``BatchNorm``, ``Pad``, ``Transpose``,
  ``Gather``, ``View``: as before; ``Concat`` (``axis``, any; ``parts``
  when some operands are constant params: ``{"tensor"}`` or ``{"param"}``
  in order).
* ``Activation`` (``attrs["act"]``) or a producer's fused ``act``: the kinds
  of ``activations.EXPRESSIONS`` (``hard_sigmoid``/``hard_swish`` with
  (alpha, beta), ``log``, ``sqrt``, ``neg``, ``abs``, ``reciprocal``...).
* ``PRelu``: param ``slope`` broadcast (numpy rules) to the output shape.
* ``Softmax``: ``inner`` values normalised together, ``stride`` apart
  (default 1), ``log`` (default False: LogSoftmax when True).
* ``Elementwise``: ``operator`` (+ - * / max min) over ``operands`` (tensors
  or constant params, broadcast); ``mean`` divides by their number.
* ``Reduce``: ``kind`` (``REDUCTIONS``) over input ``axes``; the output holds
  the kept axes in order (keepdims or not: same memory).
* ``Slice``: per input axis ``starts`` and ``steps``; output index e reads
  input index ``starts + e * steps`` (Split: one Slice per output).
* ``Resize``: resized ``axes`` and ``linear``, tables ``lo<k>`` (and for
  linear ``hi<k>``, ``wlo<k>``, ``whi<k>``) per resized axis k, made by
  ``resize_params`` from ``resize_taps``: y = wlo * x[lo] + whi * x[hi].
* ``LRN``: ``size``, ``alpha``, ``beta``, ``bias`` over channel ``axis``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# Ops that only reinterpret their input's memory; they emit no code.
VIEW_OPS = frozenset({"View"})
# Ops that emit no code at all because another layer absorbed them.
FUSED_OP = "Fused"
# Producers that can apply an elementwise activation to each value they store.
FUSABLE_OPS = frozenset({"Dense", "Conv2D", "ConvTranspose2D", "Pool2D", "GlobalPool2D", "BatchNorm", "Elementwise",
                         "Concat", "PRelu", "Reduce", "Slice", "Resize", "LRN"})


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


# Reductions of a ``Reduce`` node (ONNX ReduceSum, ReduceMean, ...; Keras ``keras.ops`` reductions).
REDUCTIONS = ("sum", "mean", "max", "min", "prod", "l1", "l2", "sumsquare", "logsum", "logsumexp")
# Coordinate transformations and nearest rounding of ``resize_taps`` (the ONNX Resize attribute values).
RESIZE_COORDINATES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def resize_taps(in_size: int, out_size: int, mode: str, coordinate: str, nearest: str = "round_prefer_floor",
                scale: float | None = None) -> tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...]] | None:
    """The (lo, hi, weight) of each output index of one resized axis, or None when it copies the axis.

    Computed in float32 as ONNX Runtime computes it (the source coordinate of
    output index o, clamped to the input; ``linear`` weights the two
    neighbours, ``nearest`` picks one), so nearest ties fall the same way.
    ``scale`` is the ONNX ``scales`` value (default ``out_size / in_size``).
    """
    f = np.float32
    scale = f(out_size / in_size if scale is None else scale)
    if out_size == in_size and scale == 1 and coordinate != "tf_half_pixel_for_nn":
        return None
    o = np.arange(out_size, dtype=f)
    if coordinate == "half_pixel":
        x = (o + f(0.5)) / scale - f(0.5)
    elif coordinate == "pytorch_half_pixel":
        x = (o + f(0.5)) / scale - f(0.5) if out_size > 1 else np.zeros_like(o)
    elif coordinate == "align_corners":  # the resized length is in_size * scale, not rounded (ONNX's reference)
        length = f(in_size) * scale
        x = o * f(in_size - 1) / (length - f(1)) if length > 1 else np.zeros_like(o)
    elif coordinate == "asymmetric":
        x = o / scale
    elif coordinate == "tf_half_pixel_for_nn":
        x = (o + f(0.5)) / scale
    else:
        raise ValueError(f"coordinate transformation {coordinate!r}")
    if mode == "nearest":
        rounded = {"floor": np.floor(x), "ceil": np.ceil(x),
                   "round_prefer_floor": np.where(x - np.floor(x) == f(0.5), np.floor(x), np.round(x)),
                   "round_prefer_ceil": np.where(x - np.floor(x) == f(0.5), np.ceil(x), np.round(x))}[nearest]
        lo = np.clip(rounded, 0, in_size - 1).astype(int)
        return tuple(int(v) for v in lo), tuple(int(v) for v in lo), (0.0,) * out_size
    if mode != "linear":
        raise ValueError(f"resize mode {mode!r}")
    x = np.clip(x, f(0), f(in_size - 1))
    lo = np.floor(x).astype(int)
    hi = np.minimum(lo + 1, in_size - 1)
    weight = (x - lo.astype(f)).astype(f)
    return tuple(int(v) for v in lo), tuple(int(v) for v in hi), tuple(float(v) for v in weight)


def resize_params(taps: list) -> tuple[dict, dict[str, np.ndarray]]:
    """A ``Resize`` node's attrs and params from ``resize_taps`` per IR axis (None: the axis is copied).

    Params per resized axis k: ``lo<k>`` (int32 source indices) and, for
    linear interpolation, ``hi<k>``, ``wlo<k>`` = 1 - weight and ``whi<k>`` =
    weight (float32), so the C reads tables rather than recomputing
    coordinates.
    """
    axes = tuple(k for k, tap in enumerate(taps) if tap is not None)
    linear = any(any(tap[2]) for tap in taps if tap is not None)
    params = {}
    for k in axes:
        lo, hi, weight = taps[k]
        params[f"lo{k}"] = np.array(lo, dtype=np.int32)
        if linear:
            whi = np.array(weight, dtype=np.float32)
            params.update({f"hi{k}": np.array(hi, dtype=np.int32), f"whi{k}": whi,
                           f"wlo{k}": (np.float32(1) - whi).astype(np.float32)})
    return {"axes": axes, "linear": linear}, params


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
