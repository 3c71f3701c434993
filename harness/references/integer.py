"""The exact integer arbiter of int8 quantized ONNX models (issue 42): which of the C and ONNX Runtime follows the
model's declared arithmetic.

Why it exists. For a float model the oracle measures the C and the float32 references against a float64
evaluation (``float64``): the real-number semantics, approximated far better than either. A quantized model has no
such yardstick: its meaning is integer arithmetic plus a rounding rule at every requantization, and the two
implementations Assay compares follow two different documented rules. Assay's generated C follows TFLite's
reference kernels (CMSIS-NN), a fixed-point multiplier with double rounding; ONNX Runtime's CPU kernels (MLAS)
requantize in float32 with rounding half to even. Both are "correct", and they differ by one unit in the last
place (LSB) where the exact requantized value is near a .5 boundary. A bit-exact evaluator of each rule says which
of the two a C output follows, and by how many LSB a disagreement goes beyond what the rules allow.

``evaluate(model, inputs, rule, tensors)`` runs the graph in numpy int64 under one named rule and returns the graph's
outputs (float32, after the final DequantizeLinear) and the integer values of named intermediate tensors (for the
per-layer comparison). It never imports ``codegen``: the contract (docs/quantized.md, the manifest's
``"quantization"`` object) is written down here again from TFLite's and ONNX Runtime's sources.

Models: ONNX Runtime's ``quantize_static`` output, QOperator (QuantizeLinear, QLinearConv, QLinearMatMul, QGemm,
QLinearAdd, QLinearGlobalAveragePool, QLinearAveragePool (fixed-point rule only), MaxPool/Flatten/Reshape/Relu on
integer tensors, DequantizeLinear) and QDQ
(float ops between DequantizeLinear and QuantizeLinear: a "DQ -> op -> Q" group has the integer meaning of the
corresponding QLinear op); ConvInteger and MatMulInteger (their int32 accumulator, the same under both rules).
int8 or uint8 activations, int8 (or uint8) weights, per-tensor or per-channel; and QuantizeLinear/DequantizeLinear
on their own of every quantized type (int16, int4, int2 and their unsigned forms, float8, float4e2m1; a float16
DequantizeLinear scale), per tensor, per axis or blocked (docs/quantized.md, "What is accepted").
DynamicQuantizeLinear gives its three outputs (the same under both rules; the generator writes them at graph outputs
only). What else a graph holds (int16 or int4 between the integer ops, a DQ/Q pattern that does not fold) is a
``ModelError`` naming the node, its op and why.

Common to both rules (all exact):
- QuantizeLinear of a float32 graph input: ``q = saturate(rint(x / s) + zp)``, ``x / s`` in float32, rounding half
  to even (ONNX; MLAS divides, clamps, converts with the default MXCSR rounding; the C uses ``rintf``); to a float8 or
  float4 type ``x / s`` rounded to it by ml_dtypes (nearest, ties to even; clipped to its largest value first when
  ``saturate``, as ONNX's reference does). Per axis or blocked, ``s`` and ``zp`` broadcast along ``axis``
  (``_broadcast``).
- Accumulators: ``acc = bias + sum (x - zp_x) (w - zp_w[c])`` in int32 (padding taps read zp_x, adding 0). They are
  computed here as float64 matrix products of the centred integers (``float64._conv``, BLAS): every partial sum is an
  integer below 2^53 for fewer than 2^37 taps, so the products are exact whatever the summation order; an
  accumulator outside int32 is refused (C and MLAS would wrap).
- MaxPool, Flatten, Reshape on integer tensors: exact; Relu on an integer tensor of a QOperator graph is ONNX's
  ``max(q, 0)`` (its zero point plays no part: that is what the graph declares).
- DequantizeLinear (graph output): ``float32(q - zp) * s`` in float32.

Rule ``"fixed-point"`` (Assay's generated C; TFLite reference kernels, common.h, integer_ops/conv.h, add.h,
pooling.h):
- ``M = (double)s_x * (double)s_w[c] / (double)s_y`` (QGemm: ``(double)alpha * s_a * s_b[c] / s_y``), quantized by
  QuantizeMultiplier: ``(q, shift) = frexp(M)``, ``m0 = llround(q 2^31)`` (half away from zero), ``m0 = 2^31`` ->
  ``(2^30, shift + 1)``, ``shift < -31`` -> ``(0, 0)``; ``M == 0`` -> ``(0, 0)``.
- ``y = saturate(zp_y + MBQM(acc, m0, shift))``, ``MBQM(x) = RDBPOT(SRDHM(x 2^max(shift, 0), m0), max(-shift, 0))``,
  ``SRDHM(a, b) = (a == b == INT32_MIN) ? INT32_MAX : trunc((a b + (a b >= 0 ? 2^30 : 1 - 2^30)) / 2^31)`` (ties
  toward +infinity),
  ``RDBPOT(x, e) = (x >> e) + ((x & (2^e - 1)) > ((2^e - 1) >> 1) + (x < 0))`` (half away from zero).
  ``x 2^shift`` must fit int32 (it does for M < 1, the usual case); an input that overflows it is refused.
- QLinearAdd (TFLite ADD, left_shift 20): ``t = 2 * max(s_a, s_b)`` (float32, then double),
  ``(m_a, e_a) = QM(s_a / t)``, ``(m_b, e_b) = QM(s_b / t)``, ``(m_y, e_y) = QM(t / (2^20 s_y))``;
  ``y = saturate(zp_y + MBQM(MBQM((a - zp_a) 2^20, m_a, e_a) + MBQM((b - zp_b) 2^20, m_b, e_b), m_y, e_y))``.
- Average pooling (QLinearGlobalAveragePool, QLinearAveragePool, QDQ GlobalAveragePool/AveragePool; windows count
  their valid taps only, as TFLite's): with the same (scale, zero point) in and out, TFLite's reference AveragePool
  itself: ``y = rdiv(sum q, n)``, ``rdiv`` rounding half away from zero (``(s + n/2) / n`` or ``(s - n/2) / n``,
  C division); else
  ``y = saturate(zp_y + MBQM(rdiv(sum (q - zp_x), n), QM(s_x / s_y)))``: the contract's division, then a
  requantization; two roundings, stated here so that the C can be held to it.
- QDQ groups: ``DQ -> Conv/Gemm/MatMul [-> Relu] -> Q`` is the QLinear op (the bias's DequantizeLinear must have
  zero point 0 and the scale s_x s_w[c], as ``quantize_static`` writes it; a Relu clamps the accumulator at 0, the
  real value's sign); ``DQ -> MaxPool/Flatten/Reshape/Relu -> Q`` is the op on ``q - zp_x`` requantized by
  ``M = s_x / s_y`` (exact, ``M = 1``, when the scales and zero points are equal); ``DQ, DQ -> Add -> Q`` is
  QLinearAdd; ``DQ -> GlobalAveragePool/AveragePool -> Q`` the average above.

Rule ``"litert"`` (LiteRT's interpreter with its reference kernels, ``BUILTIN_REF``, TensorFlow 2.21; the rule of
the ``litert`` reference of a ``.tflite`` model): the fixed-point rule, but for QGemm, the conversion of TFLite's
FULLY_CONNECTED. Its reference kernel (kernels/fully_connected.cc, ``kernel_type == kReference``;
reference/integer_ops/fully_connected.h, the overloads that "receive the scales in float and perform requant in
float") requantizes in double, once: ``y = saturate(zp_y + round((double) acc * M))``, ``M`` the fixed-point
rule's double and ``round`` C's, half away from zero. Measured before it was written down: on a seeded DS-CNN-like
model 17 of 3 600 logits of LiteRT differ by 1 LSB from the fixed-point rule and none from this one, while its
CONV_2D, DEPTHWISE_CONV_2D and AVERAGE_POOL_2D equal the fixed-point rule on every output
(``tests/harness/models/test_tflite_loader.py``). From the same accumulator it is within 1 LSB of the fixed-point rule
(both land on floor(v) or ceil(v) of ``v = acc M``, "The 1-LSB analysis" below).

Rule ``"onnxruntime"`` (ONNX Runtime 1.x CPU, x86-64; core/mlas/lib/quantize.cpp ``MlasRequantizeOutput``,
providers/cpu/quantization/qlinearconv.cc, quantize_linear_matmul.cc, contrib_ops/cpu/quantization/quant_gemm.cc,
qlinear_global_average_pool.cc with mlas/lib/qlgavgpool.cpp, mlas/lib/intrinsics/avx2/qladd_avx2.cpp):
- ``scale = s_x * s_w[c] / s_y`` in float32, left to right (QGemm: ``alpha * s_a * s_b[c] / s_y``);
  ``y = clip(rint(float32(acc) * scale), lo - zp_y, hi - zp_y) + zp_y``: int32 to float32 (rounding to nearest
  even above 2^24), one float32 product, rounding half to even.
- QLinearGlobalAveragePool: ``acc = sum q - zp_x n``, ``scale = s_x / (s_y * float32(n))``, then the same.
- QLinearAdd, MLAS's AVX2 kernel: ``r_a = s_a / s_y``, ``r_b = s_b / s_y``, ``f = zp_y - (r_a zp_a + r_b zp_b)``
  (float32, unfused), ``y = saturate(rint(fma(a, r_a, fma(b, r_b, f))))`` with fused multiply-adds (for an operand
  of one element, ``f + that * r`` is folded into ``f``, unfused); other broadcasts are refused under this rule.
- QDQ graphs: ONNX Runtime (graph optimisations off) runs ``DQ -> float32 op -> Q``: a float32 convolution or GEMM
  whose summation order and fused multiply-adds are MLAS's own blocking, which numpy cannot reproduce bit for bit.
  The rule is not available for QDQ graphs (a ``ModelError``): the harness's ONNX Runtime reference runs them itself.

The 1-LSB analysis. From the same integer accumulator the two rules differ by at most 1 LSB. Let v = acc M exactly,
M < 1 (shift <= 0, right shift e = -shift). Fixed-point: ``m0 2^(shift - 31)`` is M to within 2^(shift - 32)
(``|m0 - q 2^31| <= 1/2``); SRDHM rounds ``acc m0 / 2^31`` to nearest (ties toward +infinity), an error of at most
1/2 that the right shift divides by 2^e; RDBPOT rounds again (ties away from zero). So the result r satisfies
``|r - v| <= 1/2 + 2^-(e+1) + |acc| 2^(shift-32)``, below 1: r is round(v), or its neighbour when v is within
``2^-(e+1) + |acc| 2^(shift-32)`` of a .5 boundary (double rounding; a few percent of random accumulators at e = 5).
ORT: ``float32(acc) * float32(scale)`` is v to within three float32 roundings (2^-24 relative each), under 1/2 for
any unsaturated output, so its ``rint`` is also within 1 of v. Both rules land on floor(v) or ceil(v), and saturating
to the same range keeps them at most 1 apart: from the same integer input, a layer's outputs under the two rules
differ by at most 1 LSB (``tests/harness/references/test_integer.py`` checks the fixed-point bound against exact
rational arithmetic, and counts the differences layer by layer on a small CNN). Across layers a 1-LSB difference
propagates (it is an input difference to the next layer), so the oracle compares layer by layer, each layer from the
C's own input.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from harness.errors import ModelError
from harness.references import as_graph_input, float64

FIXED_POINT = "fixed-point"
ONNXRUNTIME = "onnxruntime"
LITERT = "litert"
RULES = (FIXED_POINT, ONNXRUNTIME, LITERT)

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}
ADD_LEFT_SHIFT = 20  # TFLite's ADD for 8-bit inputs


class Evaluation(NamedTuple):
    """The graph's outputs (in the graph's order) and the integer values of the tensors asked for (None for a name
    the graph does not have, or whose value is not an integer tensor: a float op's output inside a QDQ group)."""

    outputs: list[np.ndarray]
    tensors: dict[str, np.ndarray | None]


def evaluate(model, inputs: np.ndarray, rule: str, tensors=()) -> Evaluation:
    """``model`` (a path or an ``onnx.ModelProto``) on ``inputs`` (N, ...), the values of its one graph input
    (float32; int8/uint8 for a graph whose input is already quantized: one layer cut out of a model, given as
    integers or as the float32 ABI's values, ``as_graph_input``), under ``rule`` (``"fixed-point"`` or
    ``"onnxruntime"``)."""
    import onnx
    from onnx import helper, numpy_helper

    if rule not in RULES:
        raise ModelError(f"integer arbiter: unknown rule {rule!r} (known: {', '.join(RULES)})")
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(Path(model)))
    graph = proto.graph
    values: dict[str, object] = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    feeds = [value for value in graph.input if value.name not in values]
    if len(feeds) != 1:
        raise ModelError(f"integer arbiter: {graph.name or 'graph'} has {len(feeds)} inputs (one is supported)")
    values[feeds[0].name] = as_graph_input(np.asarray(inputs), helper.tensor_dtype_to_np_dtype(
        feeds[0].type.tensor_type.elem_type)) if np.asarray(inputs).dtype == np.float32 else np.asarray(inputs)
    for node in graph.node:
        handler = _OPS.get(((node.domain or "ai.onnx").replace("ai.onnx", ""), node.op_type))
        if handler is None:
            raise ModelError(f"{_label(node)}: not an op of the integer arbiter")
        args = [values[name] if name else None for name in node.input]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in _MULTI_OUTPUT:
            values.update(zip(node.output, handler(_Context(node, rule), args, attrs)))
            continue
        if len([name for name in node.output if name]) != 1:
            raise ModelError(f"{_label(node)}: {len(node.output)} outputs (one is supported)")
        values[node.output[0]] = handler(_Context(node, rule), args, attrs)
    outputs = [_materialise(values[value.name], value.name) for value in graph.output]
    return Evaluation(outputs, {name: _integer_value(values.get(name)) for name in tensors})


# a graph with any of these is a quantized model: the integer arbiter, not the float64 one, is its yardstick (and
# an op of them it cannot evaluate is refused by name there)
QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
                           "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool",
                           "QLinearAveragePool", "QLinearSigmoid", "QLinearSoftmax", "QLinearLeakyRelu",
                           "QLinearConcat", "ConvInteger", "MatMulInteger"})


def quantized(path: Path | str) -> bool:
    """Whether the ONNX graph at ``path`` is a quantized model (one of ``QUANTIZED_OPS``)."""
    path = Path(path)
    return _graph_facts(str(path), path.stat().st_mtime_ns)[0]


def output_scale(path: Path | str) -> float | None:
    """The scale of the graph's output DequantizeLinear (one LSB of the output, in real units), 1 for an int8/uint8
    graph output (it crosses the ABI as its integer values: one LSB is 1), or None when it is neither."""
    real = real_output_scale(path)
    path = Path(path)
    return real if real is not None else (1.0 if _graph_facts(str(path), path.stat().st_mtime_ns)[2] else None)


def real_output_scale(path: Path | str) -> float | None:
    """The scale of the graph's output DequantizeLinear when it is one per-tensor constant (the output is then in
    real units, comparable with a float network's), else None."""
    path = Path(path)
    return _graph_facts(str(path), path.stat().st_mtime_ns)[1]


def input_rank(path: Path | str) -> int:
    """The declared rank of the graph's one input: a sample's rank when the graph has no batch axis (then a reduction
    over the whole input, DynamicQuantizeLinear's, is one sample's and the graph is evaluated sample by sample)."""
    path = Path(path)
    return _graph_facts(str(path), path.stat().st_mtime_ns)[3]


@functools.lru_cache(maxsize=16)
def _graph_facts(path: str, _mtime_ns: int) -> tuple[bool, float | None, bool, int]:
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(path, load_external_data=False).graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    last = producers.get(graph.output[0].name) if len(graph.output) == 1 else None
    scale = constants.get(last.input[1]) if last is not None and last.op_type == "DequantizeLinear" else None
    integer_output = len(graph.output) == 1 and graph.output[0].type.tensor_type.elem_type in (
        onnx.TensorProto.INT8, onnx.TensorProto.UINT8)
    feed = next((value for value in graph.input if value.name not in constants), None)
    return (any(node.op_type in QUANTIZED_OPS for node in graph.node),
            float(scale.reshape(())) if scale is not None and scale.size == 1 else None, integer_output,
            len(feed.type.tensor_type.shape.dim) if feed is not None else 0)


def _label(node) -> str:
    return f"node '{node.name or node.output[0]}' ({node.op_type})"


class _Context(NamedTuple):
    node: object
    rule: str

    def refuse(self, why: str) -> ModelError:
        return ModelError(f"{_label(self.node)}: {why}")


class _Dequantized(NamedTuple):
    """A DequantizeLinear not yet computed: its integer tensor and parameters, which the QDQ group it feeds uses."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int
    block: int = 0  # blocked quantization's block_size (ONNX 21): the scale repeated along ``axis``


class _Pending(NamedTuple):
    """A float op of a QDQ group, waiting for the QuantizeLinear that gives it its integer meaning."""

    context: _Context
    args: list
    attrs: dict
    relu: bool = False


def _integer_value(value) -> np.ndarray | None:
    if isinstance(value, _Dequantized):
        return value.q
    if isinstance(value, np.ndarray) and value.dtype.kind in "iu":
        return value
    return None


def _materialise(value, name: str) -> np.ndarray:
    """A graph output's value: a DequantizeLinear is computed here, in float32."""
    if isinstance(value, _Dequantized):
        return _dequantize(value)
    if isinstance(value, _Pending):
        raise value.context.refuse(f"its output '{name}' is a graph output with no QuantizeLinear: the QDQ group "
                                   "does not fold into an integer op")
    return np.asarray(value)


# --- the fixed-point primitives (TFLite's common.h / gemmlowp), vectorised in int64 -------------------------------


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: (m0, shift) with ``real ~ m0 2^(shift - 31)``, m0 in [2^30, 2^31) or 0."""
    if real == 0.0:
        return 0, 0
    fraction, shift = math.frexp(real)
    m0 = int(math.floor(fraction * 2.0 ** 31 + 0.5))  # llround: q 2^31 is exact, + 0.5 too (it is below 2^31)
    if m0 == 2 ** 31:
        m0, shift = m0 // 2, shift + 1
    if shift < -31:
        return 0, 0
    return m0, shift


def saturating_rounding_doubling_high_mul(a, b) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul of int32 values: round(a b / 2^31), ties toward +infinity (the
    nudge 1 - 2^30 of a negative product), and INT32_MAX for INT32_MIN * INT32_MIN."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    product = a * b
    nudged = product + np.where(product >= 0, 2 ** 30, 1 - 2 ** 30)
    quotient = np.where(nudged >= 0, nudged >> 31, -((-nudged) >> 31))  # C's division: toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, quotient)


def rounding_divide_by_pot(x, exponent) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero."""
    x, exponent = np.asarray(x, np.int64), np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def multiply_by_quantized_multiplier(x, m0, shift) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (int32 x): the double rounding of ``x m0 2^(shift - 31)``."""
    x, shift = np.asarray(x, np.int64), np.asarray(shift, np.int64)
    shifted = x << np.maximum(shift, 0)
    if np.any((shifted < INT32_MIN) | (shifted > INT32_MAX)):
        raise ModelError("x * 2^shift leaves int32 (a multiplier above 1): the fixed-point rule is undefined there")
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m0), np.maximum(-shift, 0))


# --- requantization under each rule ----------------------------------------------------------------------------


def _along(values, axis: int, ndim: int) -> np.ndarray:
    """A per-channel vector shaped to broadcast along ``axis`` of an ndim array (a scalar stays a scalar)."""
    values = np.asarray(values).reshape(-1)
    if values.size == 1:
        return values.reshape(())
    shape = [1] * ndim
    shape[axis] = values.size
    return values.reshape(shape)


def _output_type(context: _Context, zero_point) -> np.dtype:
    """The output type a QLinear op's output zero point declares: int8 or uint8, else refused."""
    dtype = np.asarray(zero_point).dtype
    if dtype not in _RANGES:
        raise context.refuse(f"output zero point of type {dtype} (int8 and uint8 only)")
    return dtype


def _saturate(y: np.ndarray, dtype) -> np.ndarray:
    low, high = _RANGES[np.dtype(dtype)]
    return np.clip(y, low, high).astype(dtype)


def _check_int32(context: _Context, acc: np.ndarray) -> np.ndarray:
    if acc.size and (acc.min() < INT32_MIN or acc.max() > INT32_MAX):
        raise context.refuse("an accumulator leaves int32 (C and MLAS would wrap)")
    return acc


def _requantize(context: _Context, acc: np.ndarray, s_x, s_w, s_y, zp_y, dtype, axis: int = 1,
                alpha: float = 1.0) -> np.ndarray:
    """``acc`` (int64, units of s_x s_w[c]) to the output type, the channel along ``axis``, under the rule."""
    acc = _check_int32(context, acc)
    s_x, s_w, s_y = (np.asarray(s, np.float32).reshape(-1) for s in (s_x, s_w, s_y))
    zp = np.int64(np.asarray(zp_y).reshape(-1)[0])
    if context.rule == ONNXRUNTIME:
        scale = np.float32(np.float32(alpha) * s_x[0]) * s_w / s_y[0]  # float32 throughout, left to right
        product = acc.astype(np.float32) * _along(scale, axis, acc.ndim)
        return _saturate(np.rint(product).astype(np.int64) + zp, dtype)
    reals = [float(alpha) * float(s_x[0]) * float(w) / float(s_y[0]) for w in s_w]
    if context.rule == LITERT and context.node.op_type == "QGemm":  # TFLite's reference FULLY_CONNECTED
        exact = acc.astype(np.float64) * _along(np.asarray(reals, np.float64), axis, acc.ndim)  # one double product
        whole = np.trunc(exact)
        rounded = whole + np.sign(exact) * (np.abs(exact - whole) >= 0.5)  # C's round: half away from zero
        return _saturate(rounded.astype(np.int64) + zp, dtype)
    m0, shift = zip(*(quantize_multiplier(real) for real in reals))
    scaled = multiply_by_quantized_multiplier(acc, _along(m0, axis, acc.ndim), _along(shift, axis, acc.ndim))
    return _saturate(scaled + zp, dtype)


# --- quantize / dequantize -----------------------------------------------------------------------------------


def _quantization(context: _Context, args: list, scale_index: int, dtype_default=np.uint8):
    """(scale float32, zero point int64, dtype) of a per-tensor quantization given as inputs ``scale_index``,
    ``scale_index + 1``."""
    scale = np.asarray(args[scale_index], np.float32)
    zero = args[scale_index + 1] if len(args) > scale_index + 1 and args[scale_index + 1] is not None \
        else np.zeros((), dtype_default)
    zero = np.asarray(zero)
    if zero.dtype not in _RANGES:
        raise context.refuse(f"zero point of type {zero.dtype} (int8 and uint8 only)")
    if scale.size != 1 or zero.size != 1:
        raise context.refuse("a per-axis quantization of an activation (per-tensor only)")
    return scale.reshape(()), np.int64(zero.reshape(())), zero.dtype


# The types of QuantizeLinear and DequantizeLinear beyond the integer ops' 8 bits (docs/quantized.md, "What is
# accepted"): the integers by their range, the float8/float4 formats by ml_dtypes' type of the same name (values
# rounded to nearest even, saturating as ONNX's Cast does when told).
_QDQ_INTEGERS = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767), "uint16": (0, 65535),
                 "int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}
_QDQ_FLOATS = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn")


def _broadcast(values, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    """A QuantizeLinear/DequantizeLinear scale or zero point as an array broadcasting to ``shape``: one value as it is,
    per axis along ``axis``, blocked (``block`` > 0: ONNX 21) repeated ``block`` times along ``axis`` and cut to the
    axis's length (the last block may be shorter)."""
    values = np.asarray(values)
    if values.size == 1 and not block:
        return values.reshape(())
    axis %= max(len(shape), 1)
    if not block:
        return _along(values, axis, len(shape))
    blocked = np.repeat(values, block, axis=axis).take(range(shape[axis]), axis=axis)
    if blocked.shape != tuple(shape):
        raise ModelError(f"integer arbiter: a blocked scale of shape {list(values.shape)} for a tensor of shape "
                         f"{list(shape)}")
    return blocked


def _quantize_input(context: _Context, x: np.ndarray, args: list, attrs: dict) -> np.ndarray:
    """QuantizeLinear of a float32 tensor to any type of ``_QDQ_INTEGERS`` or ``_QDQ_FLOATS``, per tensor, per axis
    or blocked: saturate(rint(x / s) + zp) to an integer type, x / s rounded to a float8/float4 type (saturating to
    its largest value when ``saturate``; float4e2m1 always)."""
    import ml_dtypes
    from onnx import helper

    if x.dtype != np.float32:
        raise context.refuse(f"QuantizeLinear of a {x.dtype} tensor (float32 only)")
    if attrs.get("precision", 0) not in (0, 1):
        raise context.refuse("a division in another precision than float32 (precision)")
    zero = np.asarray(args[2]) if len(args) > 2 and args[2] is not None else None
    named = attrs.get("output_dtype", 0)
    dtype = zero.dtype if zero is not None else np.dtype(helper.tensor_dtype_to_np_dtype(named) if named else np.uint8)
    axis, block = int(attrs.get("axis", 1)), int(attrs.get("block_size", 0))
    with np.errstate(all="ignore"):  # inf / NaN saturate as MLAS's clamp does
        scaled = x / _broadcast(np.asarray(args[1], np.float32), x.shape, axis, block)
    if dtype.name in _QDQ_FLOATS:
        if zero is not None and np.any(zero.astype(np.float32) != 0):
            raise context.refuse(f"a non-zero {dtype.name} zero point (0 is the float8/float4 one)")
        if attrs.get("saturate", 1) or dtype.name == "float4_e2m1fn":
            info = ml_dtypes.finfo(dtype)
            scaled = np.clip(scaled, float(info.min), float(info.max))
        return scaled.astype(dtype)
    if dtype.name not in _QDQ_INTEGERS:
        raise context.refuse(f"QuantizeLinear to {dtype} (8-, 16-, 4- and 2-bit integers, float8, float4)")
    low, high = _QDQ_INTEGERS[dtype.name]
    zp = 0 if zero is None else _broadcast(zero.astype(np.int64), x.shape, axis, block)
    rounded = np.nan_to_num(np.rint(scaled), nan=0.0, posinf=1e9, neginf=-1e9).astype(np.int64)
    return np.clip(rounded + zp, low, high).astype(dtype)


def _dequantize(value: _Dequantized) -> np.ndarray:
    """DequantizeLinear in float32: (q - zp) * s, a float8/float4 q as the float it is (its zero point is 0); of a
    float16 scale, that product rounded to float16 (the output has the scale's type)."""
    q = value.q
    scale = _broadcast(value.scale.astype(np.float32), q.shape, value.axis, value.block)
    if q.dtype.name in _QDQ_FLOATS:
        product = q.astype(np.float32) * scale
    else:
        centred = q.astype(np.int64) - _broadcast(value.zero_point.astype(np.int64), q.shape, value.axis,
                                                  value.block)
        product = centred.astype(np.float32) * scale
    if value.scale.dtype != np.float16:
        return product
    with np.errstate(over="ignore"):  # beyond float16's largest value: infinity, as ONNX's cast gives
        return product.astype(np.float16)


_OPS: dict[tuple[str, str], Callable] = {}


def _op(*names: str, domain: str = ""):
    def register(function):
        for name in names:
            _OPS[(domain, name)] = function
        return function

    return register


@_op("QuantizeLinear")
def _quantize_linear(context: _Context, args: list, attrs: dict):
    x = args[0]
    if isinstance(x, np.ndarray):
        return _quantize_input(context, x, args, attrs)
    s_y, zp_y, dtype = _quantization(context, args, 1)
    if isinstance(x, _Dequantized):  # DQ -> Q: the same values requantized (exact when the parameters are equal)
        x = _activation(context, x)
        centred = x.q.astype(np.int64) - np.int64(x.zero_point.reshape(-1)[0])
        return _requantize(context, centred, x.scale, np.float32(1), s_y, zp_y, dtype)
    return _fold(x, s_y, zp_y, dtype)


# Ops whose handler returns a tuple, one value per output.
_MULTI_OUTPUT = ("DynamicQuantizeLinear",)


@_op("DynamicQuantizeLinear")
def _dynamic_quantize_linear(context: _Context, args: list, attrs: dict):
    """(y, y_scale, y_zero_point) of uint8 dynamic quantization, the same under both rules: ONNX Runtime's float32
    steps (core/util/qmath.h ``GetQuantizationParameter``, MLAS ``MlasQuantizeLinear``): ``lo = min(0, min x)``,
    ``hi = max(0, max x)``, ``s = hi == lo ? 1 : (hi - lo) / 255``, ``zp = rint(clip(0 - lo / s, 0, 255))``,
    ``y = clip(rint(x / s) + zp, 0, 255)``. ONNX's reference evaluator gives ``s = 1 / 255`` for an input of zeros
    (y and zp agree); the spec's formula divides 0 by 0 there (docs/quantized.md)."""
    x = args[0]
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise context.refuse("DynamicQuantizeLinear of a tensor that is not float32")
    lo, hi = np.float32(x.min(initial=np.float32(0))), np.float32(x.max(initial=np.float32(0)))  # 0 in the range
    scale = np.float32(1) if hi == lo else np.float32(np.float32(hi - lo) / np.float32(255))
    zero = np.float32(np.float32(0) - np.float32(lo / scale))
    zero_point = np.rint(np.clip(zero, np.float32(0), np.float32(255)))
    with np.errstate(all="ignore"):
        y = np.clip(np.rint(x / scale) + zero_point, 0, 255)
    return y.astype(np.uint8), np.asarray(scale, np.float32), np.asarray(zero_point).astype(np.uint8)


@_op("DequantizeLinear")
def _dequantize_linear(context: _Context, args: list, attrs: dict):
    q = np.asarray(args[0])
    if q.dtype.name not in (*_QDQ_INTEGERS, *_QDQ_FLOATS) and q.dtype != np.int32:
        raise context.refuse(f"DequantizeLinear of a {q.dtype} tensor (8-, 16-, 4- and 2-bit integers, float8, "
                             "float4 and an int32 bias only)")
    if attrs.get("output_dtype", 0) not in (0, 1):
        raise context.refuse("output_dtype other than float32")
    scale = np.asarray(args[1])  # float16: the output is float16 too (ONNX), the float32 product rounded to it
    scale = scale if scale.dtype == np.float16 else scale.astype(np.float32)
    zero = np.asarray(args[2]) if len(args) > 2 and args[2] is not None else np.zeros(scale.shape, q.dtype)
    if zero.dtype != q.dtype:
        raise context.refuse(f"zero point of type {zero.dtype} for a {q.dtype} tensor")
    if q.dtype.name in _QDQ_FLOATS and np.any(zero.astype(np.float32) != 0):
        raise context.refuse(f"a non-zero {q.dtype.name} zero point (0 is the float8/float4 one)")
    block = int(attrs.get("block_size", 0))
    return _Dequantized(q, scale, zero, int(attrs.get("axis", 1)) if scale.size > 1 or block else 0, block)


# --- the integer ops (accumulators, then the rule's requantization) ----------------------------------------------


def _integer(context: _Context, x, what: str) -> np.ndarray:
    if not isinstance(x, np.ndarray) or x.dtype not in _RANGES:
        kind = x.dtype if isinstance(x, np.ndarray) else type(x).__name__
        raise context.refuse(f"{what} is {kind}, not an int8/uint8 tensor")
    return x


def _centred(q: np.ndarray, zero_point, axis: int = 0) -> np.ndarray:
    """q - zp as float64 (exact), a per-channel zero point along ``axis``."""
    return q.astype(np.float64) - _along(np.asarray(zero_point, np.float64), axis, q.ndim)


def _exact(products: np.ndarray) -> np.ndarray:
    """An exact float64 result of integer products (every partial sum an integer below 2^53) as int64."""
    return products.astype(np.int64)


def _conv_acc(context: _Context, x, zp_x, w, zp_w, bias, attrs: dict) -> np.ndarray:
    if np.asarray(zp_x).size != 1:
        raise context.refuse("a per-axis input zero point")
    acc = _exact(float64._conv(None, [_centred(x, zp_x), _centred(w, zp_w, 0)], attrs))
    if bias is not None:
        acc = acc + _along(np.asarray(bias, np.int64), 1, acc.ndim)
    return acc


def _gemm_acc(context: _Context, a, zp_a, b, zp_b, bias, attrs: dict) -> np.ndarray:
    a = a.T if attrs.get("transA", 0) else a
    b = b.T if attrs.get("transB", 0) else b
    acc = _exact(_centred(a, zp_a) @ _centred(b, zp_b, 1))
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)
    return acc


def _matmul_acc(a, zp_a, b, zp_b) -> np.ndarray:
    return _exact(np.matmul(_centred(a, zp_a), _centred(b, zp_b, b.ndim - 1)))


@_op("QLinearConv")
def _qlinear_conv(context: _Context, args: list, attrs: dict):
    x, s_x, zp_x, w, s_w, zp_w, s_y, zp_y = args[:8]
    x, w = _integer(context, x, "the input"), _integer(context, w, "the weight")
    acc = _conv_acc(context, x, zp_x, w, zp_w, args[8] if len(args) > 8 else None, attrs)
    return _requantize(context, acc, s_x, s_w, s_y, zp_y, _output_type(context, zp_y), axis=1)


@_op("QGemm", domain="com.microsoft")
def _qgemm(context: _Context, args: list, attrs: dict):
    if len(args) < 9 or args[7] is None:
        raise context.refuse("QGemm without y_scale (a float output) is not supported")
    a, s_a, zp_a, b, s_b, zp_b, c, s_y, zp_y = args[:9]
    a, b = _integer(context, a, "A"), _integer(context, b, "B")
    if attrs.get("beta", 1.0) != 1.0 and c is not None:
        raise context.refuse("beta != 1")
    zp_b = np.asarray(zp_b).reshape(-1)
    acc = _gemm_acc(context, a, zp_a, b, zp_b, c, attrs)
    return _requantize(context, acc, s_a, s_b, s_y, zp_y, _output_type(context, zp_y), axis=1,
                       alpha=float(attrs.get("alpha", 1.0)))


@_op("QLinearMatMul")
def _qlinear_matmul(context: _Context, args: list, attrs: dict):
    a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y = args[:8]
    a, b = _integer(context, a, "A"), _integer(context, b, "B")
    acc = _matmul_acc(a, zp_a, b, np.asarray(zp_b).reshape(-1))
    return _requantize(context, acc, s_a, s_b, s_y, zp_y, _output_type(context, zp_y), axis=acc.ndim - 1)


def _zero_point(args: list, k: int) -> np.ndarray:
    """Input ``k`` of ConvInteger or MatMulInteger, a zero point, or 0 when it is absent (the spec's default)."""
    return np.asarray(args[k]) if len(args) > k and args[k] is not None else np.zeros(1, np.int64)


@_op("ConvInteger")
def _conv_integer(context: _Context, args: list, attrs: dict):
    """The int32 accumulator itself, no requantization: the same under both rules (exact)."""
    x, w = _integer(context, args[0], "the input"), _integer(context, args[1], "the weight")
    acc = _conv_acc(context, x, _zero_point(args, 2), w, _zero_point(args, 3), None, attrs)
    return _check_int32(context, acc).astype(np.int32)


@_op("MatMulInteger")
def _matmul_integer(context: _Context, args: list, attrs: dict):
    """The int32 accumulator of A B, no requantization: the same under both rules (exact)."""
    a, b = _integer(context, args[0], "A"), _integer(context, args[1], "B")
    acc = _matmul_acc(a, _zero_point(args, 2), b, _zero_point(args, 3).reshape(-1))
    return _check_int32(context, acc).astype(np.int32)


def _qlinear_add(context: _Context, a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y, dtype) -> np.ndarray:
    """QLinearAdd of two integer tensors under the rule (formulas in the module docstring)."""
    s_a, s_b, s_y = (np.float32(np.asarray(s).reshape(-1)[0]) for s in (s_a, s_b, s_y))
    zp_a, zp_b, zp_y = (np.int64(np.asarray(z).reshape(-1)[0]) for z in (zp_a, zp_b, zp_y))
    if context.rule == ONNXRUNTIME:
        return _saturate(np.rint(_ort_add(context, a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y)).astype(np.int64), dtype)
    twice = float(np.float32(2) * max(s_a, s_b))
    (m_a, e_a), (m_b, e_b) = quantize_multiplier(float(s_a) / twice), quantize_multiplier(float(s_b) / twice)
    m_y, e_y = quantize_multiplier(twice / (2.0 ** ADD_LEFT_SHIFT * float(s_y)))
    scaled_a = multiply_by_quantized_multiplier((a.astype(np.int64) - zp_a) << ADD_LEFT_SHIFT, m_a, e_a)
    scaled_b = multiply_by_quantized_multiplier((b.astype(np.int64) - zp_b) << ADD_LEFT_SHIFT, m_b, e_b)
    return _saturate(zp_y + multiply_by_quantized_multiplier(scaled_a + scaled_b, m_y, e_y), dtype)


def _ort_add(context: _Context, a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y) -> np.ndarray:
    """MLAS's AVX2 QLinearAdd before rounding: float32 with fused multiply-adds (``_fma32``)."""
    ratio_a, ratio_b = np.float32(s_a / s_y), np.float32(s_b / s_y)
    fixed = np.float32(np.float32(zp_y) - np.float32(ratio_a * np.float32(zp_a) + ratio_b * np.float32(zp_b)))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    if a.size == 1 and b.size != 1:
        return _fma32(b32, ratio_b, np.float32(fixed + a32.reshape(()) * ratio_a))
    if b.size == 1 and a.size != 1:
        return _fma32(a32, ratio_a, np.float32(fixed + b32.reshape(()) * ratio_b))
    if a.shape != b.shape:
        raise context.refuse(f"QLinearAdd broadcasting {a.shape} and {b.shape}: the onnxruntime rule reproduces "
                             "equal shapes or a one-element operand only")
    return _fma32(a32, ratio_a, _fma32(b32, ratio_b, np.broadcast_to(fixed, b.shape)))


def _fma32(x: np.ndarray, y, z) -> np.ndarray:
    """float32 fma(x, y, z) rounded once: x y is exact in float64 (an 8-bit integer times a float32); the sum's
    float64 rounding ``s`` and its exact error ``e`` (TwoSum) decide the one case where rounding s to float32 is not
    rounding the exact sum: s a float32 midpoint with e != 0."""
    product = np.asarray(x, np.float64) * np.float64(y)
    addend = np.asarray(z, np.float64)
    total = product + addend
    virtual = total - product
    error = (product - (total - virtual)) + (addend - virtual)
    rounded = total.astype(np.float32)
    up, down = np.nextafter(rounded, np.float32(np.inf)), np.nextafter(rounded, np.float32(-np.inf))
    above = total == (rounded.astype(np.float64) + up.astype(np.float64)) / 2
    below = total == (rounded.astype(np.float64) + down.astype(np.float64)) / 2
    return np.where(above & (error > 0), up, np.where(below & (error < 0), down, rounded)).astype(np.float32)


@_op("QLinearAdd", domain="com.microsoft")
def _qlinear_add_op(context: _Context, args: list, attrs: dict):
    a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y = args[:8]
    a, b = _integer(context, a, "A"), _integer(context, b, "B")
    return _qlinear_add(context, a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y, _output_type(context, zp_y))


def _average(context: _Context, q: np.ndarray, s_x, zp_x, s_y, zp_y, dtype, window: dict | None) -> np.ndarray:
    """Average pooling of integers under the rule: global (``window`` None) or over AveragePool's windows (their
    valid taps only)."""
    zp_x, zp_y = np.int64(np.asarray(zp_x).reshape(-1)[0]), np.int64(np.asarray(zp_y).reshape(-1)[0])
    s_x, s_y = np.float32(np.asarray(s_x).reshape(-1)[0]), np.float32(np.asarray(s_y).reshape(-1)[0])
    raw, counts = _window_sums(context, q.astype(np.int64), window)
    if context.rule == ONNXRUNTIME:
        if window is not None:
            raise context.refuse("windowed average pooling under the onnxruntime rule (not reproduced)")
        acc = _check_int32(context, raw - zp_x * counts)
        scale = s_x / (s_y * np.float32(counts))
        return _saturate(np.rint(acc.astype(np.float32) * scale).astype(np.int64) + zp_y, dtype)
    if (s_x, zp_x) == (s_y, zp_y):
        return _saturate(_rounding_divide(raw, counts), dtype)
    centred = _rounding_divide(_check_int32(context, raw - zp_x * counts), counts)
    m0, shift = quantize_multiplier(float(s_x) / float(s_y))
    return _saturate(zp_y + multiply_by_quantized_multiplier(centred, m0, shift), dtype)


def _window_sums(context: _Context, q: np.ndarray, window: dict | None):
    """(sums, counts) of integer windows: every spatial position (global), or AveragePool's (count_include_pad 0)."""
    if window is None:
        axes = tuple(range(2, q.ndim))
        return q.sum(axis=axes, keepdims=True), int(np.prod(q.shape[2:], dtype=np.int64))
    if window.get("count_include_pad", 0):
        raise context.refuse("count_include_pad=1 (TFLite counts the valid taps only)")
    kernel, strides, dilations, pads = float64._window_attrs(q, window, window["kernel_shape"])
    axes = tuple(range(-len(kernel), 0))
    sums = _exact(float64._windows(q.astype(np.float64), kernel, strides, dilations, pads).sum(axis=axes))
    ones = np.ones((1, 1, *q.shape[2:]), np.float64)
    counts = _exact(float64._windows(ones, kernel, strides, dilations, pads).sum(axis=axes))
    return sums, counts


def _rounding_divide(total: np.ndarray, count) -> np.ndarray:
    """TFLite's average: total / count rounded half away from zero, with C's truncating division."""
    count = np.asarray(count, np.int64)
    shifted = np.where(total > 0, total + count // 2, total - count // 2)
    return np.sign(shifted) * (np.abs(shifted) // count)


@_op("QLinearGlobalAveragePool", "QLinearAveragePool", domain="com.microsoft")
def _qlinear_average_pool(context: _Context, args: list, attrs: dict):
    """The global average, or the windowed one (``QLinearAveragePool``: under the fixed-point rule only, ONNX
    Runtime's own kernel, qlinear_pool.cc, is not reproduced here)."""
    if attrs.get("channels_last", 0):
        raise context.refuse("channels_last=1")
    x, s_x, zp_x, s_y, zp_y = args[:5]
    x = _integer(context, x, "the input")
    window = None if context.node.op_type == "QLinearGlobalAveragePool" else attrs
    return _average(context, x, s_x, zp_x, s_y, zp_y, _output_type(context, zp_y), window)


# --- ops on integer tensors (QOperator) or inside QDQ groups ---------------------------------------------------------

_PASS_THROUGH = {
    "MaxPool": lambda x, args, attrs: float64._max_pool(None, [x], attrs),
    "Flatten": lambda x, args, attrs: float64._flatten(None, [x], attrs),
    "Reshape": lambda x, args, attrs: float64._reshape(None, [x, args[1]], attrs),
}
_ACCUMULATING = ("Conv", "Gemm", "MatMul")


@_op("MaxPool", "Flatten", "Reshape", "Relu", "Conv", "Gemm", "MatMul", "Add", "GlobalAveragePool", "AveragePool")
def _float_op(context: _Context, args: list, attrs: dict):
    """An op on integer tensors of a QOperator graph (exact), or one of a QDQ group (pending its QuantizeLinear)."""
    op, x = context.node.op_type, args[0]
    if isinstance(x, np.ndarray) and x.dtype in _RANGES and op in (*_PASS_THROUGH, "Relu"):
        if op == "Relu":
            return np.maximum(x, 0).astype(x.dtype)  # ONNX Relu on the integers themselves
        return _PASS_THROUGH[op](x.astype(np.float64), args, attrs).astype(x.dtype)  # exact on small integers
    if op == "Relu" and isinstance(x, _Pending) and x.context.node.op_type in _ACCUMULATING and not x.relu:
        return x._replace(relu=True)
    if not any(isinstance(arg, _Dequantized) for arg in args):
        raise context.refuse("a float op outside a DequantizeLinear -> op -> QuantizeLinear group")
    if context.rule == ONNXRUNTIME:
        raise context.refuse("a QDQ group: ONNX Runtime runs it as a float32 op whose summation order numpy cannot "
                             "reproduce; the onnxruntime rule is for QOperator graphs (use ONNX Runtime itself)")
    return _Pending(context, args, attrs)


def _fold(pending: _Pending, s_y, zp_y, dtype) -> np.ndarray:
    """A QDQ group ``DQ -> op -> Q`` evaluated as the integer op (fixed-point rule)."""
    context, args, attrs = pending.context, pending.args, pending.attrs
    op = context.node.op_type
    inputs = [arg for arg in args if isinstance(arg, _Dequantized)]
    if op in _ACCUMULATING:
        acc, s_x, s_w = _group_acc(context, args, attrs)
        if pending.relu:
            acc = np.maximum(acc, 0)
        return _requantize(context, acc, s_x, s_w, s_y, zp_y, dtype, axis=1 if op != "MatMul" else acc.ndim - 1,
                           alpha=float(attrs.get("alpha", 1.0)))
    x = _activation(context, args[0])
    if op == "Add":
        b = _activation(context, args[1])
        return _qlinear_add(context, x.q, x.scale, x.zero_point, b.q, b.scale, b.zero_point, s_y, zp_y, dtype)
    if op in ("GlobalAveragePool", "AveragePool"):
        return _average(context, x.q, x.scale, x.zero_point, s_y, zp_y, dtype, attrs if op == "AveragePool" else None)
    if len(inputs) != 1:
        raise context.refuse(f"{len(inputs)} dequantized inputs")
    centred = x.q.astype(np.int64) - np.int64(x.zero_point.reshape(-1)[0])
    if op == "Relu":
        values = np.maximum(centred, 0)
    else:
        fill = centred.astype(np.float64) if op == "MaxPool" else centred
        values = _exact(np.asarray(_PASS_THROUGH[op](fill, args, attrs)))
    return _requantize(context, values, x.scale, np.float32(1), s_y, zp_y, dtype)


def _activation(context: _Context, value) -> _Dequantized:
    if not isinstance(value, _Dequantized) or value.q.dtype not in _RANGES or value.scale.size != 1:
        raise context.refuse("an input that is not a per-tensor DequantizeLinear of an 8-bit tensor")
    return value


def _group_acc(context: _Context, args: list, attrs: dict):
    """(accumulator, s_x, s_w) of a QDQ Conv/Gemm/MatMul group, after checking that it folds."""
    op = context.node.op_type
    x = _activation(context, args[0])
    w = args[1]
    if not isinstance(w, _Dequantized) or w.q.dtype not in _RANGES:
        raise context.refuse("a weight that is not a DequantizeLinear of an 8-bit tensor")
    out_axis = {"Conv": 0, "Gemm": 0 if attrs.get("transB", 0) else 1, "MatMul": w.q.ndim - 1}[op]
    if w.scale.size > 1 and w.axis % w.q.ndim != out_axis:
        raise context.refuse(f"weight quantized along axis {w.axis}, not the output channels' ({out_axis})")
    bias = args[2] if len(args) > 2 else None
    if bias is not None:
        expected = np.float32(x.scale.reshape(())) * w.scale.reshape(-1)
        if not isinstance(bias, _Dequantized) or bias.q.dtype != np.int32 or np.any(bias.zero_point != 0) or \
                not np.allclose(bias.scale.reshape(-1), expected, rtol=1e-6, atol=0):
            raise context.refuse("a bias that is not an int32 DequantizeLinear of zero point 0 and scale s_x s_w")
        if attrs.get("beta", 1.0) != 1.0:
            raise context.refuse("beta != 1")
        bias = bias.q
    if op == "Conv":
        acc = _conv_acc(context, x.q, x.zero_point, w.q, w.zero_point, bias, attrs)
    elif op == "Gemm":
        acc = _gemm_acc(context, x.q, x.zero_point, w.q, w.zero_point.reshape(-1), bias, attrs)
    else:
        acc = _matmul_acc(x.q, x.zero_point, w.q, w.zero_point.reshape(-1))
    return acc, x.scale, w.scale
