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
* 3-D: ``Pool2D`` and ``ConvTranspose2D`` also read ``CDHW`` volumes (rank-4
  IR tensors); their ``kernel``, ``strides`` and ``dilations`` then have one
  value per spatial axis in layout order (D, H, W), ``pads`` the begins then
  the ends (``(front, top, left, back, bottom, right)``) and the transposed
  kernel layout is ``IODHW``. Emitters loop over the input's spatial letters.
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
* ``Resize``: resized ``axes``, ``taps`` (K per axis) and ``extrapolation``;
  tables ``i<k>`` (and, unless nearest, ``w<k>``; ``in<k>`` where
  ``tf_crop_and_resize`` leaves the region) of K taps per output index of
  resized axis k, made by ``resize_params`` from ``resize_taps``: y is the
  sum over the taps of every axis of the product of their weights times x
  at their indices (nearest, linear, cubic, antialias: all data).
* ``LRN``: ``size``, ``alpha``, ``beta``, ``bias`` over channel ``axis``.

Quantized tensors and ops (int8 models, ``codegen/quantize.py``; docs/codegen.md "Quantized models"): a tensor
whose ``dtype`` is ``int8`` or ``uint8`` stores q, the real value being ``scale * (q - zero_point)`` (its
``scale`` and ``zero_point``); every other tensor is float32. Integer ops compute in int32 and requantize with
per-channel fixed-point constants made at generation time (``quantize.requantization``), so the C does integer
arithmetic only between ``Quantize`` and ``Dequantize``:

* ``Quantize``: float32 input to its quantized output (ONNX QuantizeLinear with the output tensor's scale and
  zero point: saturate(round_half_even(x / scale) + zero_point), in float32; to a float8/float4 type x / scale
  rounded to it, ``minifloat``, attr ``saturate``). Per-axis or blocked: params ``scale`` (float32) and
  ``zero_point`` (int32, absent when all 0) and attr ``blocks`` (``quant_blocks``); the output's ``scale`` and
  ``zero_point`` then None.
* ``Dequantize``: quantized input to float32, attrs ``scale`` and ``zero_point`` (the DequantizeLinear's own):
  (float)(q - zero_point) * scale (a float8/float4 q as the float it is); per-axis or blocked as ``Quantize``.
* ``QConv2D``: the ``Conv2D`` attrs (kernel layout ``OIHW``) and ``x_zero_point``, ``y_zero_point``, ``low``,
  ``high`` (the saturation bounds, ``low`` raised to ``y_zero_point`` by a fused ReLU); params ``kernel`` (int8),
  ``bias`` (int32, optional), ``multiplier`` and ``shift`` (int32, one per output channel or one for all) and
  ``w_zero_point`` (int32, per channel or one; absent when every weight zero point is 0). Output channel c:
  acc = bias[c] + sum (x - x_zero_point) * (w - w_zero_point[c]) over the window (padding adds 0), then
  y = clamp(y_zero_point + requantize(acc, multiplier[c], shift[c]), low, high).
* ``QDense``: the ``Dense`` attrs (index maps; ``alpha`` is in the multiplier) and the quantized attrs and params
  of ``QConv2D``, per output column (the output's last axis); ``bias`` broadcast to the output.
* ``QAdd``: two quantized inputs of the same shape (or one of one element, read at stride 0), attrs
  ``a_zero_point``, ``b_zero_point``, ``y_zero_point``, ``low``, ``high``; params ``multiplier`` and ``shift`` of
  three values (``quantize.addition``: operand A, operand B, the sum): TFLite's 8-bit ADD, docs/quantized.md.
* ``QAvgPool``: the ``Pool2D`` window attrs, ``x_zero_point``, ``y_zero_point``, ``low``, ``high``; each window's
  valid taps only are counted (n). Without params, the output has the input's scale and zero point and stores
  the rounded-half-away-from-zero division of the sum of q by n (TFLite's AveragePool); with ``multiplier`` and
  ``shift`` (one each, M = s_x / s_y), that division of the sum of q - x_zero_point is requantized and saturated.
  A global average pool is the window of the whole plane.
* ``IConv2D``, ``IDense`` (ONNX ConvInteger, MatMulInteger): the accumulator of ``QConv2D`` and ``QDense`` without
  bias or requantization, written to a float32 output as ``(float) acc``: exact, the front end having proved
  |acc| <= 2^24 from the static ranges.
* ``Pool2D`` (max), ``View``, ``Slice`` and ``Transpose`` read a quantized tensor as they read a float one and
  write the same representation (a max of q values is the q of the max: the scale is positive).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from codegen.errors import UnsupportedModel
from codegen.minifloat import FORMATS

# Ops that only reinterpret their input's memory; they emit no code.
VIEW_OPS = frozenset({"View"})
# Quantized tensor types: (lowest, highest value, C type). The integer ones narrower than a byte are stored unpacked,
# one value per byte; the float8 and float4 formats (``minifloat.FORMATS``) as ``float``, every value of them being a
# float32. Only QuantizeLinear and DequantizeLinear write or read the types other than int8 and uint8.
INTEGER_TYPES = {"int8": (-128, 127, "int8_t"), "uint8": (0, 255, "uint8_t"), "int16": (-32768, 32767, "int16_t"),
                 "uint16": (0, 65535, "uint16_t"), "int4": (-8, 7, "int8_t"), "uint4": (0, 15, "uint8_t"),
                 "int2": (-2, 1, "int8_t"), "uint2": (0, 3, "uint8_t")}
QUANTIZED_TYPES = {**INTEGER_TYPES, **{name: (-f.largest, f.largest, "float") for name, f in FORMATS.items()}}
# The activation types of the integer ops (QLinearConv, QLinearMatMul, QLinearAdd, the QDQ groups...).
ACTIVATION_TYPES = ("int8", "uint8")
# Ops that read quantized tensors and rescale them themselves, and ops that copy a quantized tensor's values
# (their output has the input's representation; ``Pool2D`` only as a max).
INTEGER_OPS = frozenset({"Dequantize", "QConv2D", "QDense", "QAdd", "QAvgPool", "IConv2D", "IDense"})
REPRESENTATION_OPS = frozenset({"View", "Pool2D", "Slice", "Transpose"})
# Ops that emit no code at all because another layer absorbed them.
FUSED_OP = "Fused"
# Producers that can apply an elementwise activation to each value they store.
FUSABLE_OPS = frozenset({"Dense", "Conv2D", "ConvTranspose2D", "Pool2D", "GlobalPool2D", "BatchNorm", "Elementwise",
                         "Concat", "PRelu", "Reduce", "Slice", "Resize", "LRN"})


# Graph inputs and outputs have at most this many axes besides a batch axis (both front ends).
MAX_RANK = 4


def default_layout(rank: int, channels_last: bool) -> str | None:
    """Axis letters of a tensor of this rank (no batch axis), as harness/tensors.py names them."""
    if rank == 1:
        return "C"
    if rank == 2:
        return "HC" if channels_last else "CH"
    if rank == 3:
        return "HWC" if channels_last else "CHW"
    if rank == 4:  # a volume ([C, D, H, W] for 3-D pooling), or any rank-4 tensor read by position
        return "DHWC" if channels_last else "CDHW"
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
RESIZE_COORDINATES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_crop_and_resize", "tf_half_pixel_for_nn")
RESIZE_MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


@dataclass(frozen=True)
class ResizeTaps:
    """One resized axis: output index o is sum over t of ``weight[o, t] * x[index[o, t]]`` (K taps per index).

    ``weight`` is None for ``nearest`` (K = 1, the tap copied); ``inside`` is None unless some output index
    falls outside ``tf_crop_and_resize``'s region, where the output is the extrapolation value.
    """

    index: np.ndarray  # (out, K) source indices, clamped to the input
    weight: np.ndarray | None  # (out, K) float64
    inside: np.ndarray | None  # (out,) bool


def _resize_source(o: np.ndarray, in_size: int, out_size: int, scale: float, coordinate: str,
                   roi: tuple[float, float]) -> np.ndarray:
    """The source coordinate of output indices ``o`` (the spec's formulas; the resized length is
    ``in_size * scale``, a fraction when made from scales, as in ONNX's reference)."""
    width = scale * in_size
    if coordinate == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if coordinate == "half_pixel_symmetric":
        return in_size / 2 * (1 - out_size / width) + (o + 0.5) / scale - 0.5
    if coordinate == "pytorch_half_pixel":
        return np.full_like(o, -0.5) if width == 1 else (o + 0.5) / scale - 0.5
    if coordinate == "align_corners":
        return np.zeros_like(o) if width == 1 else o * (in_size - 1) / (width - 1)
    if coordinate == "asymmetric":
        return o / scale
    if coordinate == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if coordinate == "tf_crop_and_resize":
        start, end = roi
        span = np.full_like(o, (end - start) * (in_size - 1) / 2) if width == 1 else \
            o * (end - start) * (in_size - 1) / (width - 1)
        return span + start * (in_size - 1)
    raise ValueError(f"coordinate transformation {coordinate!r}")


def _resize_coefficients(ratio: np.ndarray, mode: str, nearest: str, scale: float, cubic_a: float,
                         antialias: bool) -> np.ndarray:
    """Per output index (rows), the filter's coefficients for a source at ``ratio`` in (0, 1] right of the
    tap before it; antialias widens the filter by 1 / scale when downsampling (ONNX's definitions)."""
    r = ratio[:, None]
    if mode == "nearest":
        pick_high = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                     "floor": np.zeros(ratio.shape, bool), "ceil": np.ones(ratio.shape, bool)}[nearest]
        pick_high = pick_high | (ratio == 1)
        return np.stack([~pick_high, pick_high], axis=1).astype(np.float64)
    a, s = cubic_a, min(scale, 1.0)
    if mode == "linear" and not antialias:
        return np.concatenate([1 - r, r], axis=1)
    if mode == "linear":
        start = int(np.floor(-1 / s) + 1)
        coeffs = np.clip(1 - np.abs((np.arange(start, 2 - start)[None, :] - r) * s), 0, 1)
        return coeffs / coeffs.sum(axis=1, keepdims=True)
    if mode != "cubic":
        raise ValueError(f"resize mode {mode!r}")
    if not antialias:
        u = 1 - r
        return np.concatenate([((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                               ((a + 2) * r - (a + 3)) * r * r + 1,
                               ((a + 2) * u - (a + 3)) * u * u + 1,
                               ((a * (u + 1) - 5 * a) * (u + 1) + 8 * a) * (u + 1) - 4 * a], axis=1)
    start = int(np.floor(-2 / s) + 1)
    d = np.abs(s * (np.arange(start, 2 - start)[None, :] - r))
    coeffs = np.where(d <= 1, (a + 2) * d ** 3 - (a + 3) * d ** 2 + 1,
                      np.where(d < 2, a * d ** 3 - 5 * a * d ** 2 + 8 * a * d - 4 * a, 0.0))
    return coeffs / coeffs.sum(axis=1, keepdims=True)


def resize_taps(in_size: int, out_size: int, mode: str, coordinate: str, nearest: str = "round_prefer_floor",
                scale: float | None = None, *, cubic_a: float = -0.75, exclude_outside: bool = False,
                antialias: bool = False, roi: tuple[float, float] = (0.0, 1.0)) -> ResizeTaps | None:
    """The taps of each output index of one resized axis, or None when it copies the axis.

    Computed in float64 as ONNX's reference computes them (``onnx/reference/ops/op_resize.py``: source
    coordinate, its ``ratio`` in (0, 1] past the tap before it, the filter's K coefficients, the K nearest
    source indices with ties to the lower, edge-clamped), so every mode is data: nearest K = 1, linear 2,
    cubic 4, antialias the widened filter's support. ``scale`` is the ONNX ``scales`` value (default
    ``out_size / in_size``); ``roi`` the (start, end) of ``tf_crop_and_resize`` on this axis.
    """
    scale = out_size / in_size if scale is None else float(scale)
    if out_size == in_size and np.isclose(scale, 1.0) and coordinate != "tf_half_pixel_for_nn" and (
            coordinate != "tf_crop_and_resize" or np.allclose(roi, (0.0, 1.0))):
        return None
    source = _resize_source(np.arange(out_size, dtype=np.float64), in_size, out_size, scale, coordinate, roi)
    floor = np.floor(source)
    ratio = np.where(source == floor, 1.0, source - floor)
    coeffs = _resize_coefficients(ratio, mode, nearest, scale, cubic_a, antialias)
    n = coeffs.shape[1]
    pad = -(-n // 2)
    padded = source + pad  # the K nearest indices of the edge-padded axis, ties to the lower (the reference's)
    frac = padded - np.floor(padded)
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    index = (np.floor(padded).astype(np.int64) + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        coeffs = np.where((index < 0) | (index >= in_size), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    index = np.clip(index, 0, in_size - 1)
    inside = None
    if coordinate == "tf_crop_and_resize" and ((source < 0) | (source > in_size - 1)).any():
        inside = (source >= 0) & (source <= in_size - 1)
    if mode == "nearest":
        return ResizeTaps(index[np.arange(out_size), np.argmax(coeffs, axis=1)][:, None], None, inside)
    return ResizeTaps(index, coeffs, inside)


def resize_params(taps: list[ResizeTaps | None],
                  extrapolation: float = 0.0) -> tuple[dict, dict[str, np.ndarray]]:
    """A ``Resize`` node's attrs and params from ``resize_taps`` per IR axis (None: the axis is copied).

    Attrs: ``axes`` (the resized ones), ``taps`` (K per IR axis, 0 when copied), ``extrapolation`` (the
    value written outside the region, or None when no index is outside). Params per resized axis k, flat
    (out, K) row-major: ``i<k>`` (int32 source indices), ``w<k>`` (float32 weights, none for nearest) and
    ``in<k>`` (int32, 1 inside the region) when some index is outside, so the C reads tables rather than
    recomputing coordinates.
    """
    axes = tuple(k for k, tap in enumerate(taps) if tap is not None)
    params = {}
    for k in axes:
        tap = taps[k]
        params[f"i{k}"] = tap.index.astype(np.int32).reshape(-1)
        if tap.weight is not None:
            params[f"w{k}"] = tap.weight.astype(np.float32).reshape(-1)
        if tap.inside is not None:
            params[f"in{k}"] = tap.inside.astype(np.int32)
    outside = any(taps[k].inside is not None for k in axes)
    return ({"axes": axes, "taps": tuple(0 if tap is None else tap.index.shape[1] for tap in taps),
             "extrapolation": float(extrapolation) if outside else None}, params)


def row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return tuple(reversed(strides))


@dataclass
class Tensor:
    """A tensor without its batch axis, stored contiguously in ``shape`` order: float32, or quantized (``dtype`` of
    ``QUANTIZED_TYPES``, the real value of a stored q being ``scale * (q - zero_point)``)."""

    name: str
    shape: tuple[int, ...]
    layout: str | None  # one letter per axis, or None for ranks without a name (> 4)
    dtype: str = "float32"
    scale: float | list[float] | None = None  # a list: per axis or per block (a QuantizeLinear's own output)
    zero_point: int | list[int] | None = None

    @property
    def quantized(self) -> bool:
        return self.dtype in QUANTIZED_TYPES

    @property
    def ctype(self) -> str:
        return QUANTIZED_TYPES[self.dtype][2] if self.quantized else "float"

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
    # A graph of several inputs or outputs (frontend_onnx): (source name, IR shape, offset) of each tensor in the
    # packed ``input`` and ``output`` vectors, in the source's order; empty for one input and one output.
    packed_inputs: list[tuple[str, tuple[int, ...], int]] = field(default_factory=list)
    packed_outputs: list[tuple[str, tuple[int, ...], int]] = field(default_factory=list)
    # A quantized model (int8 or uint8 tensors): {"format": "qoperator" | "qdq", "activations": "int8" | "uint8"}.
    quantization: dict | None = None

    def add_tensor(self, name: str, shape: tuple[int, ...], layout: str | None) -> Tensor:
        tensor = Tensor(name, tuple(int(d) for d in shape), layout)
        self.tensors[name] = tensor
        return tensor

    def add_node(self, node: Node) -> Node:
        """Append ``node``; an op of ``REPRESENTATION_OPS`` reading a quantized tensor writes the same
        representation, and any other op but ``INTEGER_OPS`` is refused on one (it would read q as reals)."""
        quantized = [self.tensors[name] for name in node.inputs if self.tensors[name].quantized]
        if quantized:
            copies = node.op in REPRESENTATION_OPS and (node.op != "Pool2D" or node.attrs.get("kind") == "max") \
                and quantized[0].dtype in ACTIVATION_TYPES
            if not copies and node.op not in INTEGER_OPS:
                raise UnsupportedModel(
                    f"{self.source}: node '{node.name}' ({node.kind}) reads the quantized ({quantized[0].dtype}) "
                    f"tensor '{quantized[0].name}'; on quantized tensors only the quantized ops, MaxPool and the "
                    "reshaping ops (Flatten, Reshape, Transpose, Slice...) are supported")
            if copies:
                out = self.tensors[node.output]
                out.dtype, out.scale, out.zero_point = quantized[0].dtype, quantized[0].scale, quantized[0].zero_point
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


# A graph of several inputs or outputs reads one packed input vector and writes one packed output vector: the
# tensors in the source's order, each in row-major order in its own layout (docs/zoo.md), so that the C entry keeps
# one input and one output pointer and every runner is unchanged. The front ends add the (un)packing as ordinary IR
# nodes (a Slice, and a View for a tensor of rank above 1, per input; a View per output and one Concat), which
# every strategy but V1's layer chain already emits.
PACKED_INPUT, PACKED_OUTPUT = "input:packed", "output:packed"


def unpack_inputs(graph: Graph, inputs: list[tuple[str, str]]) -> None:
    """Make ``graph.input`` the packed vector of ``inputs`` ((IR tensor, source name), each tensor already added):
    each becomes a Slice of it, viewed with the tensor's own shape."""
    offset = 0
    total = sum(graph.tensors[tensor].size for tensor, _ in inputs)
    graph.add_tensor(PACKED_INPUT, (total,), default_layout(1, channels_last=False))
    graph.input = graph.input_name = PACKED_INPUT
    for tensor, source in inputs:
        shape = graph.tensors[tensor].shape
        flat = tensor if len(shape) == 1 else graph.add_tensor(f"{tensor}:flat", (graph.tensors[tensor].size,),
                                                               default_layout(1, channels_last=False)).name
        graph.add_node(Node(name=f"unpack:{source}", kind="Input", op="Slice", inputs=[PACKED_INPUT], output=flat,
                            attrs={"starts": (offset,), "steps": (1,)}))
        if flat != tensor:
            graph.add_node(Node(name=f"view:{source}", kind="Input", op="View", inputs=[flat], output=tensor))
        graph.packed_inputs.append((source, shape, offset))
        offset += graph.tensors[tensor].size


def pack_outputs(graph: Graph, outputs: list[tuple[str, str]]) -> None:
    """Make ``graph.output`` the packed vector of ``outputs`` ((IR tensor, source name)): each viewed as a vector,
    joined by a Concat (a lone output is its own vector)."""
    flats, offset = [], 0
    for tensor, source in outputs:
        shape, flat = graph.tensors[tensor].shape, tensor
        if len(shape) != 1:
            flat = graph.add_tensor(f"{tensor}:flat", (graph.tensors[tensor].size,),
                                    default_layout(1, channels_last=False)).name
            graph.add_node(Node(name=f"view:{source}", kind="Output", op="View", inputs=[tensor], output=flat))
        flats.append(flat)
        graph.packed_outputs.append((source, shape, offset))
        offset += graph.tensors[tensor].size
    graph.output_name = PACKED_OUTPUT
    if len(flats) == 1:
        graph.output = flats[0]
        return
    graph.add_tensor(PACKED_OUTPUT, (offset,), default_layout(1, channels_last=False))
    graph.add_node(Node(name="pack:outputs", kind="Output", op="Concat", inputs=flats, output=PACKED_OUTPUT,
                        attrs={"axis": 0}))
    graph.output = PACKED_OUTPUT


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
