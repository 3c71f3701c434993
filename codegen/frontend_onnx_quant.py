"""Quantized ONNX graphs (int8, uint8) to the IR's integer ops (``ir``'s docstring, docs/codegen.md).

Two forms of the same model reach the same IR nodes:

* QOperator: QuantizeLinear at the input, QLinearConv, QLinearMatMul, QGemm, QLinearAdd, QLinearAveragePool,
  QLinearGlobalAveragePool (the last four com.microsoft), MaxPool, Flatten, Reshape on the quantized tensors,
  DequantizeLinear at the output. Each handler reads its scales and zero points as constants.
* QDQ: float ops between DequantizeLinear and QuantizeLinear nodes. ``fold_qdq`` finds, before the handlers
  run, each ``DQ(x), DQ(w), DQ(bias) -> Conv | Gemm | MatMul (-> Relu) -> Q`` group and each
  ``DQ -> MaxPool | Flatten | Reshape | Transpose -> Q`` group keeping the scale, each ``DQ(a), DQ(b) -> Add -> Q``
  and ``DQ -> AveragePool | GlobalAveragePool -> Q`` group, and builds the same integer node from the group's
  integers as the QOperator form, named after its Conv (or other) node; the ReLU of a Conv/Gemm/MatMul group raises
  the saturation's low bound to the output zero point (Q(relu(v)) = max(Q(v), zero point), exactly). ONNX
  Runtime's quantizer writes no ``Add -> Relu -> Q``: it drops the Relu into the Q's range, or keeps it as its
  own ``DQ -> Relu -> Q``; both the generator and the arbiter refuse an ``Add -> Relu -> Q``.

ConvInteger and MatMulInteger write their int32 accumulator as an exact float32 when a range proof bounds it by 2^24
(``_int32_output``); DynamicQuantizeLinear writes its outputs, run-time scale included, at the graph's outputs.
QuantizeLinear and DequantizeLinear on their own take every quantized type (int16, int4, int2 and their unsigned
forms, float8, float4e2m1), per tensor, per axis or blocked (``_per_element``). Everything else quantized is refused
by name: another type than int8 and uint8 between the integer ops, a DQ whose values a float op reads (a pattern
that does not fold), a zero point or scale that is not a constant, per-axis activation scales of an integer op.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from codegen import quantize
from codegen.frontend_onnx import (EXTENSIONS, HANDLERS, OTHER_DOMAINS, QUANTIZED_ONNX_TYPES, _Builder, _dense,
                                   _image, _image_out, _matmul_by_constant, _window, conv_layer, declared, gemm_axes,
                                   handles)
from codegen.ir import ACTIVATION_TYPES, QUANTIZED_TYPES, Node
from codegen.minifloat import FORMATS

# Ops of another domain than ONNX's own that are handled (ONNX Runtime's quantizer writes them).
MICROSOFT_OPS = tuple(("com.microsoft", op) for op in ("QGemm", "QuantizeLinear", "DequantizeLinear", "QLinearAdd",
                                                       "QLinearAveragePool", "QLinearGlobalAveragePool"))
# QDQ: the float ops that fold with their DQ inputs and Q output into one integer node, and the ops that only
# move values (they fold when the Q keeps the DQ's scale and zero point).
COMPUTE_OPS = ("Conv", "Gemm", "MatMul")
MOVE_OPS = ("MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze")
# QDQ ops without weights whose Q may change the scale: an Add of two dequantized tensors, the average poolings.
RESCALE_OPS = ("Add", "AveragePool", "GlobalAveragePool")
# A window's sum of q stays in int32 (|q| <= 255) up to this many taps.
MAX_POOL_TAPS = 2**23


@dataclass(frozen=True)
class QParams:
    """A scale and zero point pair as constants: float32 scales, integer zero points, one or per channel."""

    scale: np.ndarray
    zero_point: np.ndarray
    dtype: str
    scale_type: str = "float32"  # the scale's declared type (a float16 one makes DequantizeLinear's output float16)


def _qparams(b: _Builder, node, name: str, k_scale: int, k_zero: int, what: str, default: str | None = None,
             per_tensor: bool = True, types: tuple[str, ...] = ACTIVATION_TYPES,
             scales: tuple[str, ...] = ("float32", "float16")) -> QParams:
    """The constant scale (input ``k_scale``, of a type of ``scales``, widened to float32: ``_float32_scale``) and
    zero point (input ``k_zero``, absent: zeros of ``default``), of a type of ``types`` (the integer ops take int8
    and uint8; QuantizeLinear and DequantizeLinear every quantized type, a float8/float4 zero point 0 as ONNX's
    reference reads it)."""
    declared_scale = b.const(node, name, k_scale, f"{what} scale")
    if str(declared_scale.dtype) not in scales:
        raise b.reject(node, name, f"has a {declared_scale.dtype} {what} scale; {' and '.join(scales)} scales are "
                                   "supported")
    scale = _float32_scale(b, node, name, declared_scale, what)
    if not np.all(np.isfinite(scale)) or np.any(scale <= 0):
        raise b.reject(node, name, f"has {what} scale {scale.reshape(-1)[:4].tolist()}; scales must be positive")
    if b.has_input(node, k_zero):
        zero = b.const(node, name, k_zero, f"{what} zero point")
        dtype = str(zero.dtype)
    elif default is None:
        raise b.reject(node, name, f"needs a constant {what} zero point (input {k_zero})")
    else:
        zero, dtype = np.zeros(scale.shape, np.int64), default
    if dtype not in types:
        raise b.reject(node, name, f"quantizes {what} to {dtype}; {', '.join(types)} are supported")
    if dtype in FORMATS and np.any(zero.astype(np.float32) != 0):
        raise b.reject(node, name, f"has a non-zero {dtype} {what} zero point; a float8/float4 zero point is 0")
    if per_tensor and scale.size != 1:
        raise b.reject(node, name, f"has a per-axis {what} scale of {scale.size} values; activations are "
                                   "quantized per tensor")
    return QParams(scale.reshape(-1), zero.reshape(-1).astype(np.int64), dtype, str(declared_scale.dtype))


def _float32_scale(b: _Builder, node, name: str, scale: np.ndarray, what: str) -> np.ndarray:
    """A constant scale as float32: a float32 one as it is, a float16 one widened (every float16 is a float32, so
    its exact value reaches the generation-time multiplier; docs/quantized.md, "float16 scales"); other types are
    refused, because narrowing them would change the scale the model declares."""
    if scale.dtype not in (np.float32, np.float16):
        raise b.reject(node, name, f"has a {scale.dtype} {what} scale; float32 and float16 scales are supported")
    return scale.astype(np.float32)


def _bias(b: _Builder, node, name: str, bias: np.ndarray | None, channels: int) -> dict:
    """An int32 bias (QLinearConv's B, QGemm's C) as the node's ``bias`` param, or none."""
    if bias is None:
        return {}
    if bias.dtype != np.int32:
        raise b.reject(node, name, f"has a {bias.dtype} bias; int32 is supported")
    return {"bias": bias.reshape(-1) if bias.size == channels else bias}


def _quantized_input(b: _Builder, node, name: str, k: int = 0, types: tuple[str, ...] = ACTIVATION_TYPES) -> str:
    x = b.tensor(node, name, k)
    if b.graph.tensors[x].dtype not in types:
        raise b.reject(node, name, f"reads '{x}', which is not a quantized ({', '.join(types)}) tensor")
    return x


def _mark(b: _Builder, node, name: str, tensor: str, q: QParams) -> None:
    """Make ``tensor`` quantized with ``q``; one activation type per model."""
    kinds = {t.dtype for t in b.graph.tensors.values() if t.quantized} - {q.dtype}
    if kinds:
        raise b.reject(node, name, f"makes {q.dtype} values in a model of {kinds.pop()} activations; one "
                                   "activation type per model is supported")
    t = b.graph.tensors[tensor]
    per_tensor = q.scale.size == 1
    t.dtype = q.dtype
    t.scale = float(q.scale[0]) if per_tensor else q.scale.astype(float).tolist()
    t.zero_point = int(q.zero_point[0]) if per_tensor else q.zero_point.astype(int).tolist()


def _integer_layer(b: _Builder, node, name: str, layer: Node, xq: QParams, wq: QParams, yq: QParams,
                   channels: int, relu: bool, alpha: float = 1.0) -> None:
    """Complete a QConv2D or QDense ``layer`` (its kernel and bias set): zero points, saturation bounds,
    per-channel (m0, shift) from the scales (``quantize.requantization``), its output marked quantized."""
    if wq.scale.size not in (1, channels) or wq.zero_point.size not in (1, channels):
        raise b.reject(node, name, f"has {wq.scale.size} weight scales for {channels} output channels")
    kernel = layer.params["kernel"]
    if str(kernel.dtype) not in QUANTIZED_TYPES or str(kernel.dtype) != wq.dtype:
        raise b.reject(node, name, f"has {kernel.dtype} weights with {wq.dtype} zero points; int8 and uint8 "
                                   "weights are supported")
    try:
        multiplier, shift = quantize.requantization(xq.scale[0], wq.scale, yq.scale[0], alpha)
    except ValueError as exc:
        raise b.reject(node, name, f"cannot be requantized: {exc}") from None
    layer.attrs.update(x_zero_point=int(xq.zero_point[0]), **_saturation(yq, relu))
    layer.params.update(multiplier=multiplier, shift=shift)
    if np.any(wq.zero_point):
        layer.params["w_zero_point"] = wq.zero_point.astype(np.int32)
    _mark(b, node, name, layer.output, yq)


def _saturation(yq: QParams, relu: bool = False) -> dict:
    """The attrs ``y_zero_point``, ``low`` and ``high`` of an integer node writing ``yq`` values; a fused ReLU raises
    ``low`` to the zero point."""
    low, high, _ = QUANTIZED_TYPES[yq.dtype]
    zero = int(yq.zero_point[0])
    return {"y_zero_point": zero, "low": max(low, zero) if relu else low, "high": high}


def _qconv(b: _Builder, node, name: str, x: str, xq: QParams, weight: np.ndarray, wq: QParams, bias,
           yq: QParams, relu: bool = False, output: str | None = None) -> None:
    channels = weight.shape[0]
    layer = conv_layer(b, node, name, x, weight, _bias(b, node, name, bias, channels), op="QConv2D", output=output)
    _integer_layer(b, node, name, layer, xq, wq, yq, channels, relu)


def _qgemm(b: _Builder, node, name: str, x: str, xq: QParams, weight: np.ndarray, wq: QParams, bias,
           yq: QParams, relu: bool = False, output: str | None = None) -> None:
    """A Gemm whose A is the quantized tensor and B a constant; ``alpha`` scales the multiplier (QGemm adds its
    int32 C to the accumulator before it)."""
    x_axes, w_axes, (m, n) = gemm_axes(b, node, name, x, weight, side=0)
    params = _bias(b, node, name, bias, n)
    if "bias" in params and params["bias"].size not in (1, n, m * n):
        raise b.reject(node, name, f"has C of shape {list(bias.shape)} for an output of {[m, n]}")
    if "bias" in params and params["bias"].size == m * n:
        params["bias"] = params["bias"].reshape(m, n)
    alpha = float(b.attr(node, "alpha", 1.0))
    if alpha <= 0:
        raise b.reject(node, name, f"has alpha={alpha}; a positive alpha is supported")
    layer = _dense(b, node, name, x, x_axes, weight, w_axes, (m, n), {}, params, op="QDense", output=output)
    _integer_layer(b, node, name, layer, xq, wq, yq, n, relu, alpha)


def _qmatmul(b: _Builder, node, name: str, x: str, xq: QParams, weight: np.ndarray, wq: QParams, bias,
             yq: QParams, relu: bool = False, output: str | None = None) -> None:
    """X @ W with the quantized tensor on the left and a constant W (per-column scales along its last axis)."""
    n = weight.shape[-1] if weight.ndim > 1 else 1
    layer = _matmul_by_constant(b, node, name, x, b.full(x), weight, _bias(b, node, name, bias, n), op="QDense",
                                output=output)
    _integer_layer(b, node, name, layer, xq, wq, yq, n, relu)


def _qadd(b: _Builder, node, name: str, a: str, aq: QParams, other: str, oq: QParams, yq: QParams,
          output: str | None = None) -> None:
    """A QAdd node (TFLite's 8-bit ADD, ``quantize.addition``) of quantized tensors ``a`` and ``other``: of the same
    ONNX shape (a residual connection), or one of them of one element; other broadcasts are refused."""
    shapes = [b.full(a), b.full(other)]
    if shapes[0] != shapes[1] and min(int(np.prod(shape)) for shape in shapes) != 1:
        raise b.reject(node, name, f"adds tensors of shapes {list(shapes[0])} and {list(shapes[1])}; equal shapes or "
                                   "a one-element operand are supported")
    full = tuple(np.broadcast_shapes(*shapes))
    keeps = any(not b.lead[t] and len(b.full(t)) == len(full) for t in (a, other))  # as ``_binary``
    try:
        multiplier, shift = quantize.addition(aq.scale[0], oq.scale[0], yq.scale[0])
    except ValueError as exc:
        raise b.reject(node, name, f"cannot be requantized: {exc}") from None
    layer = b.add(node, name, "QAdd", [a, other], full,
                  {"a_zero_point": int(aq.zero_point[0]), "b_zero_point": int(oq.zero_point[0]), **_saturation(yq)},
                  {"multiplier": multiplier, "shift": shift}, lead=False if keeps else None, output=output)
    _mark(b, node, name, layer.output, yq)


def _qaverage(b: _Builder, node, name: str, x: str, xq: QParams, yq: QParams, output: str | None = None) -> None:
    """A QAvgPool node: a global average pool (``node``'s op type names one) as the window of the whole plane, or
    an AveragePool's windows, counting their valid taps only (TFLite's; ``count_include_pad=1`` is refused)."""
    if b.attr(node, "channels_last", 0):
        raise b.reject(node, name, "has channels_last=1; channels-first ([N, C, H, W]) inputs are supported")
    image, one_d = _image(b, node, name, x)
    c, *size = b.shape(image)
    if "Global" in node.op_type:
        spatial = len(size)
        kernel, strides, dilations, pads, out = tuple(size), (1,) * spatial, (1,) * spatial, (0,) * 2 * spatial, \
            (1,) * spatial
    else:
        if b.attr(node, "count_include_pad", 0):
            raise b.reject(node, name, "has count_include_pad=1; the quantized average counts a window's valid taps "
                                       "only (TFLite's AveragePool)")
        kernel, strides, dilations, pads, out = _window(b, node, name, tuple(size), b.attr(node, "kernel_shape", []),
                                                        bool(b.attr(node, "ceil_mode", 0)), one_d)
    if int(np.prod(kernel)) > MAX_POOL_TAPS:
        raise b.reject(node, name, f"averages windows of {int(np.prod(kernel))} taps; at most {MAX_POOL_TAPS} keep "
                                   "the sum in int32")
    attrs = {"kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads,
             "x_zero_point": int(xq.zero_point[0]), **_saturation(yq)}
    params = {}
    if (xq.scale[0], xq.zero_point[0]) != (yq.scale[0], yq.zero_point[0]):
        try:
            params["multiplier"], params["shift"] = quantize.requantization(xq.scale[0], np.ones(1, np.float32),
                                                                            yq.scale[0])
        except ValueError as exc:
            raise b.reject(node, name, f"cannot be requantized: {exc}") from None
    layer = _image_out(b, node, name, "QAvgPool", image, (c, *out), one_d, attrs, params, output)
    _mark(b, node, name, layer.output, yq)


# ------------------------------------------------------------------------------------------------ QOperator

@handles("QuantizeLinear")
def _quantize_linear(b, node, name):
    """ONNX QuantizeLinear to any quantized type (``QUANTIZED_ONNX_TYPES``), per tensor, per axis or blocked."""
    x = b.tensor(node, name)
    if b.graph.tensors[x].quantized:
        raise b.reject(node, name, f"quantizes '{x}', which is already quantized")
    output_dtype = b.attr(node, "output_dtype", 0)  # ONNX: the zero point's type, else uint8
    if output_dtype and output_dtype not in QUANTIZED_ONNX_TYPES:
        raise b.reject(node, name, f"quantizes to output_dtype {output_dtype}, not a quantized type")
    if b.attr(node, "precision", 0) not in (0, 1):
        raise b.reject(node, name, "divides in another precision than float32 (precision)")
    q = _qparams(b, node, name, 1, 2, "y", QUANTIZED_ONNX_TYPES.get(output_dtype, "uint8"), per_tensor=False,
                 types=tuple(QUANTIZED_TYPES), scales=("float32",))  # a float16 scale goes with a float16 input
    if output_dtype and QUANTIZED_ONNX_TYPES[output_dtype] != q.dtype:
        raise b.reject(node, name, f"has output_dtype {QUANTIZED_ONNX_TYPES[output_dtype]} and a {q.dtype} zero point")
    attrs, params = _per_element(b, node, name, x, q)
    attrs["saturate"] = int(b.attr(node, "saturate", 1))
    layer = b.add(node, name, "Quantize", [x], b.full(x), attrs, params, lead=b.lead[x])
    _mark(b, node, name, layer.output, q)


@handles("DequantizeLinear")
def _dequantize_linear(b, node, name):
    """ONNX DequantizeLinear of any quantized type to float32, per tensor, per axis or blocked."""
    x = _quantized_input(b, node, name, types=tuple(QUANTIZED_TYPES))
    dtype = b.graph.tensors[x].dtype
    if b.attr(node, "output_dtype", 0) not in (0, 1):
        raise b.reject(node, name, "dequantizes to another type than float32 (output_dtype)")
    q = _qparams(b, node, name, 1, 2, "x", dtype, per_tensor=False, types=tuple(QUANTIZED_TYPES))
    if q.dtype != dtype:
        raise b.reject(node, name, f"reads {dtype} values with a {q.dtype} zero point")
    attrs, params = _per_element(b, node, name, x, q)
    if not params:
        attrs = {"scale": float(q.scale[0]), "zero_point": int(q.zero_point[0])}
    layer = b.add(node, name, "Dequantize", [x], b.full(x), attrs, params, lead=b.lead[x])
    if q.scale_type == "float16":  # ONNX: the output has the scale's type; the C rounds the product to it
        b.graph.tensors[layer.output].dtype = "float16"


def _per_element(b: _Builder, node, name: str, x: str, q: QParams) -> tuple[dict, dict]:
    """The attrs and params of a Quantize or Dequantize whose scale is per axis (``axis``) or blocked (``axis``,
    ``block_size``; ONNX 21): params ``scale`` and ``zero_point`` (when not all 0), attr ``blocks`` = (outer, axis
    length, inner, block, (outer, axis, inner) strides of the scale index) for the C's loops over ``x``'s IR shape
    (the axis split at it). Per tensor: none (the scale and zero point are literals)."""
    block = int(b.attr(node, "block_size", 0))
    if q.scale.size == 1 and not block:
        return {}, {}
    axis = b.axis(node, name, int(b.attr(node, "axis", 1)), x)  # refuses the batch axis: parameters per sample
    shape = b.shape(x)
    outer, size, inner = int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
    scale_shape = tuple(b.const(node, name, 1, "scale").shape)
    if block:
        count = -(-size // block)
        wanted = tuple(count if k == axis + b.lead[x] else d for k, d in enumerate(b.full(x)))
        strides = (count * inner, inner, 1)
    else:
        block, wanted, strides = 1, (size,), (0, 1, 0)
    if scale_shape != wanted:
        raise b.reject(node, name, f"has a scale of shape {list(scale_shape)} for {list(b.full(x))} along axis "
                                   f"{axis + b.lead[x]}; {list(wanted)} is the per-axis or blocked shape")
    params = {"scale": q.scale.astype(np.float32)}
    if np.any(q.zero_point):
        params["zero_point"] = q.zero_point.astype(np.int32)
    return {"blocks": (outer, size, inner, block, strides)}, params


@handles("QLinearConv")
def _qlinear_conv(b, node, name):
    x = _quantized_input(b, node, name)
    bias = b.const(node, name, 8, "bias") if b.has_input(node, 8) else None
    _qconv(b, node, name, x, _qparams(b, node, name, 1, 2, "x"), b.const(node, name, 3, "weight"),
           _qparams(b, node, name, 4, 5, "w", per_tensor=False), bias, _qparams(b, node, name, 6, 7, "y"))


@handles("QLinearMatMul")
def _qlinear_matmul(b, node, name):
    x = _quantized_input(b, node, name)
    _qmatmul(b, node, name, x, _qparams(b, node, name, 1, 2, "a"), b.const(node, name, 3, "b"),
             _qparams(b, node, name, 4, 5, "b", per_tensor=False), None, _qparams(b, node, name, 6, 7, "y"))


@handles("QGemm")
def _qgemm_op(b, node, name):
    """com.microsoft QGemm (ONNX Runtime): C is int32 at scale s_a * s_b, added before alpha and the output
    scale; without y_scale the output is float, which is refused."""
    x = _quantized_input(b, node, name)
    if not b.has_input(node, 7):
        raise b.reject(node, name, "has no y_scale (a float output); a quantized output is supported")
    if float(b.attr(node, "beta", 1.0)) != 1.0:
        raise b.reject(node, name, f"has beta={b.attr(node, 'beta')}; QGemm adds its int32 C as it is")
    bias = b.const(node, name, 6, "C") if b.has_input(node, 6) else None
    _qgemm(b, node, name, x, _qparams(b, node, name, 1, 2, "a"), b.const(node, name, 3, "B"),
           _qparams(b, node, name, 4, 5, "b", per_tensor=False), bias, _qparams(b, node, name, 7, 8, "y"))


@handles("QLinearAdd")
def _qlinear_add(b, node, name):
    """com.microsoft QLinearAdd: A, its scale and zero point, B, its scale and zero point, then C's."""
    _qadd(b, node, name, _quantized_input(b, node, name, 0), _qparams(b, node, name, 1, 2, "A"),
          _quantized_input(b, node, name, 3), _qparams(b, node, name, 4, 5, "B"), _qparams(b, node, name, 6, 7, "C"))


@handles("QLinearAveragePool", "QLinearGlobalAveragePool")
def _qlinear_average(b, node, name):
    """com.microsoft QLinearAveragePool (AveragePool's attributes) and QLinearGlobalAveragePool: X, its scale and
    zero point, then Y's."""
    _qaverage(b, node, name, _quantized_input(b, node, name), _qparams(b, node, name, 1, 2, "x"),
              _qparams(b, node, name, 3, 4, "y"))


# ------------------------------------------------------------------------ int32 outputs (ConvInteger, MatMulInteger)

# The largest |y| of an int32 output that the float32 ABI carries exactly: every integer up to 2^24 is a float32.
EXACT_INT32 = 2**24


def _int32_output(b: _Builder, node, name: str, x: str, weight: np.ndarray, k_w_zero: int, out_axis: int) -> dict:
    """The checks and IR attrs/params of ConvInteger and MatMulInteger: their int32 output must be a graph output,
    and a proof from the static ranges (the input type's range, the constant weights and zero points) that every
    output value has |y| <= 2^24, so the C writes it as an exact float32 (docs/quantized.md, "int32 outputs").
    ``out_axis`` is the weight's axis of output channels (per-channel weight zero points run along it)."""
    if node.output[0] not in {out.name for out in b.model.graph.output}:
        raise b.reject(node, name, "has an int32 output that another node reads; an int32 graph output is supported")
    x_type = b.graph.tensors[x].dtype
    x_zero = b.const(node, name, 2, "input zero point") if b.has_input(node, 2) else np.zeros(1, x_type)
    w_zero = b.const(node, name, k_w_zero, "weight zero point") if b.has_input(node, k_w_zero) else \
        np.zeros(1, weight.dtype)
    if str(x_zero.dtype) != x_type or x_zero.size != 1:
        raise b.reject(node, name, f"has a {x_zero.dtype} input zero point of {x_zero.size} values for {x_type} "
                                   "values; one of the input's type is supported")
    if str(weight.dtype) not in QUANTIZED_TYPES or w_zero.dtype != weight.dtype:
        raise b.reject(node, name, f"has {weight.dtype} weights with {w_zero.dtype} zero points; int8 and uint8 "
                                   "weights are supported")
    channels = weight.shape[out_axis]
    if w_zero.size not in (1, channels):
        raise b.reject(node, name, f"has {w_zero.size} weight zero points for {channels} output channels")
    low, high, _ = QUANTIZED_TYPES[x_type]
    x_zp = int(x_zero.reshape(-1)[0])
    centred = np.abs(weight.astype(np.int64) - _along(w_zero.astype(np.int64), out_axis, weight.ndim))
    taps = np.moveaxis(centred, out_axis, 0).reshape(channels, -1).sum(axis=1)
    bound = int(taps.max(initial=0)) * max(abs(low - x_zp), abs(high - x_zp))
    if bound > EXACT_INT32:
        raise b.reject(node, name, f"has an int32 output that can reach |y| = {bound} (from the input's range "
                                   f"[{low}, {high}], the weights and zero points), above 2^24 = {EXACT_INT32}: not "
                                   "every value is a float32, which the ABI carries")
    params = {"w_zero_point": w_zero.reshape(-1).astype(np.int32)} if np.any(w_zero) else {}
    return {"attrs": {"x_zero_point": x_zp}, "params": params}


def _along(values: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    """Per-channel ``values`` shaped to broadcast along ``axis`` of an ndim array (one value: a scalar)."""
    values = values.reshape(-1)
    return values.reshape(()) if values.size == 1 else values.reshape([-1 if k == axis else 1 for k in range(ndim)])


@handles("ConvInteger")
def _conv_integer(b, node, name):
    """ConvInteger: the int32 accumulator of (x - x_zero_point)(w - w_zero_point[c]) (padding reads the zero point,
    adding 0), written as an exact float32 (``_int32_output``)."""
    x = _quantized_input(b, node, name)
    weight = b.const(node, name, 1, "weight")
    checked = _int32_output(b, node, name, x, weight, 3, 0)
    layer = conv_layer(b, node, name, x, weight, checked["params"], op="IConv2D")
    layer.attrs.update(checked["attrs"])


@handles("MatMulInteger")
def _matmul_integer(b, node, name):
    """MatMulInteger by a constant B: the int32 accumulator of (a - a_zero_point)(b - b_zero_point[n]), written as an
    exact float32 (``_int32_output``)."""
    x = _quantized_input(b, node, name)
    weight = b.const(node, name, 1, "B")
    checked = _int32_output(b, node, name, x, weight, 3, weight.ndim - 1)
    layer = _matmul_by_constant(b, node, name, x, b.full(x), weight, checked["params"], op="IDense")
    layer.attrs.update(checked["attrs"])


# ---------------------------------------------------------------------------------------- DynamicQuantizeLinear

# DynamicQuantizeLinear's outputs, in order: y (uint8), y_scale and y_zero_point (rank 0: one value each).
DYNAMIC_PARTS = ("y", "scale", "zero_point")


@handles("DynamicQuantizeLinear")
def _dynamic_quantize_linear(b, node, name):
    """DynamicQuantizeLinear (uint8; docs/quantized.md, "DynamicQuantizeLinear"): one DynQuantize node per output
    the graph exposes, each computing the run-time scale and zero point and writing its part as float32 (y and the
    zero point as their exact integers, the scale as it is; a rank-0 output as one value). A run-time scale is
    supported at the graph's outputs only: an op reading one (a DequantizeLinear, a ConvInteger's zero point)
    would need run-time requantization, which the integer code does not have."""
    x = b.tensor(node, name)
    if b.graph.tensors[x].quantized:
        raise b.reject(node, name, f"quantizes '{x}', which is already quantized")
    if b.lead[x] and any(not isinstance((declared(value) or [1])[0], int) for value in b.model.graph.input):
        raise b.reject(node, name, "reduces over a batch of symbolic size; the C runs one sample at a time, which is "
                                   "this op's meaning for a graph input without a batch axis or a batch of 1")
    graph_outputs = {out.name for out in b.model.graph.output}
    read = [k for k, out in enumerate(node.output) if out and b.uses.get(out, 0)]
    inside = [node.output[k] for k in read if node.output[k] not in graph_outputs]
    if inside:
        raise b.reject(node, name, f"has its output '{inside[0]}' read by another node; a run-time scale and zero "
                                   "point are supported as graph outputs only")
    for k in read:
        b.add(node, name if k == read[0] else f"{name}:{DYNAMIC_PARTS[k]}", "DynQuantize", [x],
              b.full(x) if k == 0 else (1,), {"part": DYNAMIC_PARTS[k]},
              lead=b.lead[x] if k == 0 else False, output=node.output[k])


# ------------------------------------------------------------------------------------------------------ QDQ

def fold_qdq(b: _Builder, nodes: list, outputs: set[str]) -> dict[int, Callable | None]:
    """The QDQ groups of ``nodes``: per node id, what the front end does instead of its handler (a callable
    ``(builder, name)``) or None to skip it (a DQ, ReLU or Q its group computes). Empty for a graph without
    DequantizeLinear of computed values (QOperator or float)."""
    producer = {out: node for node in nodes for out in node.output}
    readers: dict[str, list] = {}
    for node in nodes:
        for tensor in node.input:
            readers.setdefault(tensor, []).append(node)

    def dq(tensor: str, constant: bool):
        node = producer.get(tensor)
        if node is None or node.op_type != "DequantizeLinear":
            return None
        source = producer.get(node.input[0])
        is_constant = node.input[0] in b.consts or (source is not None and source.op_type == "Constant")
        return node if is_constant == constant else None

    actions: dict[int, Callable | None] = {}
    for node in nodes:
        if node.op_type not in COMPUTE_OPS + MOVE_OPS + RESCALE_OPS or not node.input or \
                dq(node.input[0], False) is None:
            continue
        x_dq = dq(node.input[0], False)
        relu = None
        out = node.output[0]
        after = readers.get(out, [])
        if node.op_type in COMPUTE_OPS and len(after) == 1 and after[0].op_type == "Relu" and out not in outputs:
            relu, out = after[0], after[0].output[0]
            after = readers.get(out, [])
        if len(after) != 1 or after[0].op_type != "QuantizeLinear" or out in outputs:
            actions[id(node)] = _refusal(node, "reads dequantized values but its output is not quantized by one "
                                               "QuantizeLinear: the DQ -> op -> Q pattern does not fold")
            continue
        q = after[0]
        actions[id(q)] = None
        if relu is not None:
            actions[id(relu)] = None
        if node.op_type in MOVE_OPS:
            actions[id(node)] = _moved(node, x_dq, q)
            continue
        if node.op_type in RESCALE_OPS:
            operands = [x_dq] + ([dq(node.input[1], False)] if node.op_type == "Add" else [])
            actions[id(node)] = _rescaled(node, operands, q) if None not in operands else _refusal(
                node, "reads dequantized values but its operand B is not a DequantizeLinear of a computed tensor: "
                      "the DQ(a), DQ(b) -> Add -> Q pattern does not fold")
            continue
        k_bias = 2 if node.op_type in ("Conv", "Gemm") and len(node.input) > 2 and node.input[2] else None
        w_dq = dq(node.input[1], True) if len(node.input) > 1 else None
        b_dq = dq(node.input[k_bias], True) if k_bias else None
        if w_dq is None or (k_bias and b_dq is None):
            what = "weights" if w_dq is None else "bias"
            actions[id(node)] = _refusal(node, f"reads dequantized values but its {what} are not a "
                                               "DequantizeLinear of a constant: the pattern does not fold")
            continue
        actions[id(node)] = _group(node, x_dq, w_dq, b_dq, q, relu is not None)
    for node in nodes:
        if node.op_type == "DequantizeLinear" and dq(node.output[0], False) is node:
            others = [r for r in readers.get(node.output[0], []) if id(r) not in actions]
            if others:
                actions[id(node)] = _refusal(node, f"feeds '{others[0].name}' ({others[0].op_type}), which does not "
                                                   "fold into an integer layer (DQ -> Conv/Gemm/MatMul [-> Relu] -> "
                                                   "Q, DQ -> MaxPool/Flatten/Reshape/Transpose -> Q, DQ, DQ -> Add "
                                                   "-> Q, DQ -> AveragePool/GlobalAveragePool -> Q)")
            elif node.output[0] not in outputs:
                actions[id(node)] = None
        elif node.op_type == "DequantizeLinear" and dq(node.output[0], True) is node and node.output[0] not in \
                outputs and all(id(r) in actions for r in readers.get(node.output[0], [])):
            actions[id(node)] = None  # weights and biases the groups read as integers
    return actions


def _refusal(node, why: str) -> Callable:
    def refuse(b: _Builder, name: str) -> None:
        raise b.reject(node, name, why)
    return refuse


def _moved(node, x_dq, q) -> Callable:
    """``DQ -> op -> Q`` of an op that only moves values: the op on the quantized tensor, when Q keeps DQ's scale
    and zero point (else the values would be requantized)."""
    def build(b: _Builder, name: str) -> None:
        source = _qparams(b, x_dq, x_dq.name or name, 1, 2, "x", "uint8")
        target = _qparams(b, q, q.name or name, 1, 2, "y", "uint8")
        if (source.dtype, source.scale[0], source.zero_point[0]) != (target.dtype, target.scale[0],
                                                                     target.zero_point[0]):
            raise b.reject(node, name, "changes its values' scale or zero point between its DequantizeLinear and "
                                       "QuantizeLinear; the pattern folds when they are the same")
        clone = type(node)()
        clone.CopyFrom(node)
        clone.input[0], clone.output[0] = x_dq.input[0], q.output[0]
        HANDLERS[node.op_type](b, clone, name)
    return build


def _rescaled(node, dqs: list, q) -> Callable:
    """``DQ(a), DQ(b) -> Add -> Q`` and ``DQ -> AveragePool | GlobalAveragePool -> Q`` as the QLinearAdd and
    QLinear pooling nodes of the QOperator form, named after the float op."""
    def build(b: _Builder, name: str) -> None:
        operands = []
        for dq in dqs:
            x = _quantized_input(b, dq, dq.name or name)
            operands += [x, _qparams(b, dq, dq.name or name, 1, 2, "x", b.graph.tensors[x].dtype)]
        yq = _qparams(b, q, q.name or name, 1, 2, "y", "uint8")
        (_qadd if node.op_type == "Add" else _qaverage)(b, node, name, *operands, yq, q.output[0])
    return build


def _group(node, x_dq, w_dq, b_dq, q, relu: bool) -> Callable:
    """``DQ(x), DQ(w), DQ(bias) -> Conv | Gemm | MatMul (-> Relu) -> Q`` as the integer node of its QOperator
    form, named after the float op; the bias must be int32 at scale s_x * s_w with zero point 0 (the
    QLinearConv rule), Gemm's alpha and beta 1."""
    def build(b: _Builder, name: str) -> None:
        x = _quantized_input(b, x_dq, x_dq.name or name)
        xq = _qparams(b, x_dq, x_dq.name or name, 1, 2, "x", b.graph.tensors[x].dtype)
        weight = b.consts[w_dq.input[0]]
        wq = _qparams(b, w_dq, w_dq.name or name, 1, 2, "w", str(weight.dtype), per_tensor=False)
        axis = int(b.attr(w_dq, "axis", 1)) % weight.ndim
        out_axis = 0 if node.op_type == "Conv" or (node.op_type == "Gemm" and b.attr(node, "transB", 0)) else \
            weight.ndim - 1
        if wq.scale.size > 1 and axis != out_axis:
            raise b.reject(node, name, f"has weights quantized along axis {axis}, not per output channel")
        yq = _qparams(b, q, q.name or name, 1, 2, "y", "uint8")
        bias = None
        if b_dq is not None:
            bias = b.consts[b_dq.input[0]]
            bq_scale = b.const(b_dq, b_dq.name or name, 1, "bias scale").reshape(-1).astype(np.float64)
            expected = (np.float64(xq.scale[0]) * wq.scale.astype(np.float64))
            zero = b.consts.get(b_dq.input[2]) if len(b_dq.input) > 2 and b_dq.input[2] else None
            if bias.dtype != np.int32 or (zero is not None and np.any(zero)) or not np.allclose(
                    bq_scale, expected, rtol=1e-6, atol=0):
                raise b.reject(node, name, "has a bias that is not int32 at scale x_scale * w_scale with zero point "
                                           "0; the pattern does not fold")
        if node.op_type == "Gemm" and (float(b.attr(node, "alpha", 1.0)) != 1.0 or
                                       float(b.attr(node, "beta", 1.0)) != 1.0):
            raise b.reject(node, name, "has alpha or beta other than 1 between dequantized operands")
        build_layer = {"Conv": _qconv, "Gemm": _qgemm, "MatMul": _qmatmul}[node.op_type]
        build_layer(b, node, name, x, xq, weight, wq, bias, yq, relu, q.output[0])
    return build


def register() -> None:
    """Make ``frontend_onnx.load`` read quantized graphs (once): the QDQ folding, ONNX Runtime's ops and the
    quantization description. The front end does not import this module (no import cycle); the pipeline calls
    this before loading an ONNX model."""
    if (fold_qdq, describe) not in EXTENSIONS:
        EXTENSIONS.append((fold_qdq, describe))
        OTHER_DOMAINS.update(MICROSOFT_OPS)


def describe(b: _Builder, outputs: list[str], instead: dict) -> None:
    """Set ``graph.quantization`` of a model with quantized tensors (format QDQ when ``fold_qdq`` folded groups).
    An int8/uint8 graph input or output crosses the float32 ABI as its integer values (``frontend_onnx.load``)."""
    kinds = {t.dtype for t in b.graph.tensors.values() if t.quantized}
    if any(node.op == "DynQuantize" for node in b.graph.nodes):
        kinds.add("uint8")  # its uint8 values are written as float32 at the graph output: no integer tensor
    kinds = sorted(kinds)
    if not kinds:
        return
    b.graph.quantization = {"activations": ", ".join(kinds), "format": "qdq" if instead else "qoperator"}
