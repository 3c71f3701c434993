"""int8 models for the quantized code generator's tests, and an independent numpy model of the int8 contract.

``quantized_pair`` builds a float ONNX model from a fixed seed and quantizes it with ONNX Runtime's
``quantize_static`` (per-channel int8 weights, int8 or uint8 activations, the same calibration data) in both
formats, QDQ and QOperator. ``FixedPoint`` runs a QOperator or QDQ model in numpy int64 by the contract's
"fixed-point" rule (TFLite's ``QuantizeMultiplier``, ``MultiplyByQuantizedMultiplier``, ADD and AveragePool;
docs/quantized.md), written here from the formulas and not from codegen's or the harness's code, so the C's
integer outputs can be checked bit for bit.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import NamedTuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


# --- models ------------------------------------------------------------------------------------------------------

class FloatNet:
    """A float ONNX graph of Conv/Relu/MaxPool/Flatten/Gemm nodes with seeded initializers (opset 13, as
    ONNX Runtime's quantizer writes)."""

    def __init__(self, input_shape: tuple[int, ...], seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.input_shape = input_shape
        self.nodes, self.inits = [], []
        self.count = 0

    def _init(self, shape, scale: float) -> str:
        self.count += 1
        name = f"w{self.count}"
        self.inits.append(numpy_helper.from_array((self.rng.normal(size=shape) * scale).astype(np.float32), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type.lower()}{self.count}", **attrs))
        return out

    def conv(self, x: str, c_in: int, c_out: int, k: int, group: int = 1, relu: bool = True, **attrs) -> str:
        fan_in = c_in // group * k * k
        y = self.op("Conv", [x, self._init((c_out, c_in // group, k, k), 1 / math.sqrt(fan_in)),
                             self._init((c_out,), 0.1)], group=group, **attrs)
        return self.op("Relu", [y]) if relu else y

    def gemm(self, x: str, k: int, n: int, relu: bool = False) -> str:
        y = self.op("Gemm", [x, self._init((n, k), 1 / math.sqrt(k)), self._init((n,), 0.1)], transB=1)
        return self.op("Relu", [y]) if relu else y

    def model(self) -> onnx.ModelProto:
        """The graph, its last node's output named ``y`` (the graph output)."""
        self.nodes[-1].output[0] = "y"
        graph = helper.make_graph(self.nodes, "qnet", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                     ["N", *self.input_shape])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", None])], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def small_cnn() -> FloatNet:
    """make.py's CNN: Conv-Relu-MaxPool-Conv-Relu-Flatten-Gemm on a 1x8x8 image."""
    net = FloatNet((1, 8, 8))
    x = net.conv("x", 1, 4, 3, pads=[1, 1, 1, 1])
    x = net.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = net.conv(x, 4, 8, 3, pads=[1, 1, 1, 1])
    x = net.op("Flatten", [x])
    net.gemm(x, 8 * 4 * 4, 10)
    return net


def ds_cnn() -> FloatNet:
    """DS-CNN-like (keyword spotting): a strided Conv, then two depthwise-separable blocks (depthwise 3x3 with
    group = C, pointwise 1x1), MaxPool, Flatten, Gemm, on a 1x10x8 'spectrogram'."""
    net = FloatNet((1, 10, 8), seed=1)
    x = net.conv("x", 1, 8, 3, strides=[2, 2], pads=[1, 1, 1, 1])
    for _ in range(2):
        x = net.conv(x, 8, 8, 3, group=8, pads=[1, 1, 1, 1])
        x = net.conv(x, 8, 8, 1)
    x = net.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = net.op("Flatten", [x])
    net.gemm(x, 8 * 2 * 2, 6)
    return net


def dense_only() -> FloatNet:
    """An MLP: Gemm-Relu-MatMul-Relu-Gemm on 20 features (the MatMul quantizes to QLinearMatMul)."""
    net = FloatNet((20,), seed=2)
    x = net.gemm("x", 20, 16, relu=True)
    x = net.op("Relu", [net.op("MatMul", [x, net._init((16, 12), 0.25)])])
    net.gemm(x, 12, 5)
    return net


def single_conv() -> FloatNet:
    net = FloatNet((2, 6, 6), seed=3)
    net.conv("x", 2, 3, 3, relu=False, pads=[1, 1, 1, 1])
    return net


def single_gemm() -> FloatNet:
    net = FloatNet((24,), seed=4)
    net.gemm("x", 24, 7)
    return net


def residual() -> FloatNet:
    """A residual block (ResNet-like): a stem Conv-Relu, then Conv-Relu-Conv added to the block's input, Relu,
    Flatten, Gemm, on a 1x6x6 image (the Add quantizes to QLinearAdd, QDQ's DQ, DQ -> Add -> Q)."""
    net = FloatNet((1, 6, 6), seed=5)
    block = net.conv("x", 1, 4, 3, pads=[1, 1, 1, 1])
    x = net.conv(block, 4, 4, 3, pads=[1, 1, 1, 1])
    x = net.conv(x, 4, 4, 3, relu=False, pads=[1, 1, 1, 1])
    x = net.op("Relu", [net.op("Add", [x, block])])
    net.gemm(net.op("Flatten", [x]), 4 * 6 * 6, 5)
    return net


def average_head() -> FloatNet:
    """DS-CNN's head: a strided Conv, a depthwise-separable block, a full-window 4x4 AveragePool, Flatten, Gemm,
    on a 1x8x8 'spectrogram'."""
    net = FloatNet((1, 8, 8), seed=6)
    x = net.conv("x", 1, 8, 3, strides=[2, 2], pads=[1, 1, 1, 1])
    x = net.conv(x, 8, 8, 3, group=8, pads=[1, 1, 1, 1])
    x = net.conv(x, 8, 8, 1)
    x = net.op("AveragePool", [x], kernel_shape=[4, 4])
    net.gemm(net.op("Flatten", [x]), 8, 6)
    return net


def global_average() -> FloatNet:
    """Conv-Relu, a padded strided 3x3 AveragePool (its border windows count their valid taps), Conv-Relu,
    GlobalAveragePool, Flatten, Gemm, on a 2x7x7 image."""
    net = FloatNet((2, 7, 7), seed=8)
    x = net.conv("x", 2, 6, 3, pads=[1, 1, 1, 1])
    x = net.op("AveragePool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = net.conv(x, 6, 8, 3, pads=[1, 1, 1, 1])
    x = net.op("GlobalAveragePool", [x])
    net.gemm(net.op("Flatten", [x]), 8, 4)
    return net


MODELS = {"cnn": small_cnn, "ds_cnn": ds_cnn, "dense": dense_only, "single_conv": single_conv,
          "single_gemm": single_gemm, "residual": residual, "average_head": average_head,
          "global_average": global_average}


def calibration(shape: tuple[int, ...], n: int = 32, seed: int = 7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (1, *shape)).astype(np.float32) for _ in range(n)]


def quantized_pair(kind: str, directory: Path, activations: str = "int8") -> dict[str, Path]:
    """The float model ``kind`` of ``MODELS`` and its QDQ and QOperator quantizations (int8 weights per channel,
    ``activations`` int8 or uint8, the same calibration data), saved in ``directory``: {"float", "qdq", "qop"}
    -> path."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    net = MODELS[kind]()
    model = net.model()
    paths = {"float": directory / f"{kind}_float.onnx"}
    onnx.save(model, paths["float"])
    data = calibration(net.input_shape)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([{"x": x} for x in data])

        def get_next(self):
            return next(self.items, None)

    for fmt, key in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop")):
        paths[key] = directory / f"{kind}_{key}.onnx"
        quantize_static(str(paths["float"]), str(paths[key]), Reader(), quant_format=fmt, per_channel=True,
                        activation_type=QuantType.QInt8 if activations == "int8" else QuantType.QUInt8,
                        weight_type=QuantType.QInt8)
    return paths


# --- the contract's fixed-point rule in numpy int64 -----------------------------------------------------------

def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: frexp, m0 = llround(q * 2^31) half away from zero, 2^31 -> 2^30 and shift + 1,
    shift < -31 -> (0, 0)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    m0 = int(math.floor(q * 2.0**31 + 0.5))
    if m0 == 2**31:
        m0, shift = m0 // 2, shift + 1
    return (0, 0) if shift < -31 else (m0, shift)


def multiply_by_quantized_multiplier(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc * 2^max(shift, 0), m0), max(-shift, 0)),
    in int64, elementwise over broadcast arrays; the left-shifted value saturates to int32."""
    acc, m0, shift = (np.asarray(v, dtype=np.int64) for v in (acc, m0, shift))
    a = np.clip(acc * (np.int64(1) << np.maximum(shift, 0)), INT32_MIN, INT32_MAX)
    ab = a * m0
    nudged = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    high = np.sign(nudged) * (np.abs(nudged) // (1 << 31))  # C's division, toward zero
    high = np.where((a == INT32_MIN) & (m0 == INT32_MIN), INT32_MAX, high)
    e = np.maximum(-shift, 0)
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> e) + ((high & mask) > threshold)


def requantize(acc: np.ndarray, s_x: float, s_w: np.ndarray, s_y: float, zp_y: int, dtype, axis: int,
               alpha: float = 1.0) -> np.ndarray:
    """y = saturate(zp_y + MBQM(acc, m0[c], shift[c])) with M[c] = (double)s_x * s_w[c] / s_y (* alpha) along
    ``axis`` of ``acc``."""
    pairs = [quantize_multiplier(float(np.float32(s_x)) * float(s) / float(np.float32(s_y)) * alpha)
             for s in np.asarray(s_w, dtype=np.float32).reshape(-1)]
    shape = [1] * acc.ndim
    shape[axis] = len(pairs)
    m0 = np.array([p[0] for p in pairs], dtype=np.int64).reshape(shape)
    shift = np.array([p[1] for p in pairs], dtype=np.int64).reshape(shape)
    low, high = RANGES[np.dtype(dtype)]
    return np.clip(zp_y + multiply_by_quantized_multiplier(acc, m0, shift), low, high)


def round_divide(total: np.ndarray, count: np.ndarray) -> np.ndarray:
    """total / count rounded half away from zero: TFLite's ``(total + count / 2) / count`` for a positive total,
    ``(total - count / 2) / count`` else, in C's division toward zero."""
    return np.sign(total) * ((np.abs(total) + count // 2) // count)


class Dequantized(NamedTuple):
    """A DequantizeLinear's integers and parameters, which the QDQ op reading it uses as they are."""

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray


class Pending(NamedTuple):
    """A float op of a QDQ graph reading dequantized values: its integer meaning is known at its QuantizeLinear."""

    node: object
    ins: list


# A QDQ float op's QOperator form: its method and its inputs from the group's (dequantized inputs d, then the
# QuantizeLinear's scale and zero point).
QDQ_FORMS = {
    "Conv": ("_QLinearConv", lambda d, s, z: [*d[0], *d[1], s, z] + ([d[2].q] if len(d) > 2 else [])),
    "Gemm": ("_QGemm", lambda d, s, z: [*d[0], *d[1], d[2].q if len(d) > 2 else None, s, z]),
    "MatMul": ("_QLinearMatMul", lambda d, s, z: [*d[0], *d[1], s, z]),
    "Add": ("_QLinearAdd", lambda d, s, z: [*d[0], *d[1], s, z]),
    "AveragePool": ("_QLinearAveragePool", lambda d, s, z: [*d[0], s, z]),
    "GlobalAveragePool": ("_QLinearGlobalAveragePool", lambda d, s, z: [*d[0], s, z]),
}


class FixedPoint:
    """Runs a QOperator model (QuantizeLinear, QLinearConv, MaxPool, Flatten, Reshape, QGemm, QLinearMatMul,
    QLinearAdd, QLinearAveragePool, QLinearGlobalAveragePool, DequantizeLinear) or its QDQ form (each float op
    between DequantizeLinear and QuantizeLinear nodes evaluated as its QOperator form) on one sample by the
    contract: int64 accumulators, fixed-point requantization."""

    def __init__(self, path: Path) -> None:
        self.model = onnx.load(str(path))
        self.consts = {init.name: numpy_helper.to_array(init) for init in self.model.graph.initializer}

    def attr(self, node, key: str, default=None):
        for attribute in node.attribute:
            if attribute.name == key:
                return helper.get_attribute_value(attribute)
        return default

    def run(self, x: np.ndarray, probes: bool = False):
        values = {self.model.graph.input[0].name: x[None] if x.ndim == len(
            self.model.graph.input[0].type.tensor_type.shape.dim) - 1 else x}
        values.update(self.consts)
        for node in self.model.graph.node:
            ins = [values.get(i) for i in node.input]
            if node.op_type == "QuantizeLinear" and isinstance(ins[0], Pending):
                values[node.output[0]] = self._fold(ins[0], *ins[1:])
            elif node.op_type == "DequantizeLinear" and ins[0].dtype != np.float32:
                values[node.output[0]] = Dequantized(*ins)
            elif any(isinstance(value, Dequantized) for value in ins):
                values[node.output[0]] = Pending(node, ins)
            else:
                values[node.output[0]] = getattr(self, "_" + node.op_type)(node, ins)
        out = values[self.model.graph.output[0].name]
        out = self._DequantizeLinear(None, list(out)) if isinstance(out, Dequantized) else out
        return (out, values) if probes else out

    def _fold(self, pending: Pending, s_y: np.ndarray, zp_y: np.ndarray) -> np.ndarray:
        """A QDQ group ``DQ... -> op -> Q`` as its QOperator op; an op that moves values (the Q keeping the DQ's
        scale and zero point) on the integers."""
        node, ins = pending.node, pending.ins
        if node.op_type in QDQ_FORMS:
            method, inputs = QDQ_FORMS[node.op_type]
            return getattr(self, method)(node, inputs([value for value in ins if value is not None], s_y, zp_y))
        x = ins[0]
        assert (x.scale, x.zero_point) == (s_y, zp_y), f"{node.name}: a rescaling {node.op_type}"
        return getattr(self, "_" + node.op_type)(node, [x.q, *ins[1:]])

    def _QuantizeLinear(self, node, ins):
        x, s, zp = ins
        low, high = RANGES[zp.dtype]
        q = np.rint(x.astype(np.float32) / np.float32(s)) + np.float32(zp)  # rint: half to even
        return np.clip(q, low, high).astype(zp.dtype)

    def _DequantizeLinear(self, node, ins):
        q, s, zp = ins
        return ((q.astype(np.int32) - np.int32(zp)).astype(np.float32) * np.float32(s)).astype(np.float32)

    def _QLinearConv(self, node, ins):
        x, s_x, zp_x, w, s_w, zp_w, s_y, zp_y = ins[:8]
        bias = ins[8] if len(ins) > 8 else None
        pads = self.attr(node, "pads", [0, 0, 0, 0])
        strides = self.attr(node, "strides", [1, 1])
        group = self.attr(node, "group", 1)
        xi = x.astype(np.int64) - np.int64(zp_x)
        xi = np.pad(xi, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))  # padding adds 0
        wi = w.astype(np.int64) - np.asarray(zp_w, dtype=np.int64).reshape(-1, 1, 1, 1)
        c_out, c_per, kh, kw = w.shape
        oh = (xi.shape[2] - kh) // strides[0] + 1
        ow = (xi.shape[3] - kw) // strides[1] + 1
        acc = np.zeros((1, c_out, oh, ow), dtype=np.int64)
        per_out = c_out // group
        for oc in range(c_out):
            g = oc // per_out
            for i in range(oh):
                for j in range(ow):
                    window = xi[0, g * c_per:(g + 1) * c_per, i * strides[0]:i * strides[0] + kh,
                                j * strides[1]:j * strides[1] + kw]
                    acc[0, oc, i, j] = np.sum(window * wi[oc])
        if bias is not None:
            acc += bias.astype(np.int64).reshape(1, -1, 1, 1)
        return requantize(acc, s_x, s_w, s_y, int(zp_y), zp_y.dtype, axis=1).astype(zp_y.dtype)

    def _MaxPool(self, node, ins):
        (x,) = ins
        kh, kw = self.attr(node, "kernel_shape")
        sh, sw = self.attr(node, "strides", [1, 1])
        oh, ow = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
        out = np.empty((*x.shape[:2], oh, ow), dtype=x.dtype)
        for i in range(oh):
            for j in range(ow):
                out[:, :, i, j] = x[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw].max(axis=(2, 3))
        return out

    def _Flatten(self, node, ins):
        return ins[0].reshape(ins[0].shape[0], -1)

    def _Reshape(self, node, ins):
        return ins[0].reshape(ins[1])

    def _product(self, a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y, bias=None, alpha: float = 1.0):
        acc = (a.astype(np.int64) - np.int64(zp_a)) @ (b.astype(np.int64) - np.asarray(zp_b, np.int64).reshape(1, -1))
        if bias is not None:
            acc = acc + bias.astype(np.int64)
        return requantize(acc, s_a, s_b, s_y, int(zp_y), zp_y.dtype, axis=acc.ndim - 1,
                          alpha=alpha).astype(zp_y.dtype)

    def _QGemm(self, node, ins):
        a, s_a, zp_a, b, s_b, zp_b, c, s_y, zp_y = ins
        b = b.T if self.attr(node, "transB", 0) else b
        return self._product(a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y, c, float(self.attr(node, "alpha", 1.0)))

    def _QLinearMatMul(self, node, ins):
        return self._product(*ins)

    def _QLinearAdd(self, node, ins):
        """TFLite's ADD: t = 2 max(s_a, s_b); each (q - zp) 2^20 by QM(s / t), the sum by QM(t / (2^20 s_y))."""
        a, s_a, zp_a, b, s_b, zp_b, s_y, zp_y = ins
        twice = 2.0 * max(float(s_a), float(s_b))
        scaled = [multiply_by_quantized_multiplier((q.astype(np.int64) - np.int64(zp)) * 2**20,
                                                   *quantize_multiplier(float(s) / twice))
                  for q, s, zp in ((a, s_a, zp_a), (b, s_b, zp_b))]
        total = multiply_by_quantized_multiplier(scaled[0] + scaled[1], *quantize_multiplier(
            twice / (2.0**20 * float(s_y))))
        low, high = RANGES[zp_y.dtype]
        return np.clip(np.int64(zp_y) + total, low, high).astype(zp_y.dtype)

    def _average(self, sums: np.ndarray, counts: np.ndarray, s_x, zp_x, s_y, zp_y) -> np.ndarray:
        """The window sums of q over ``counts`` valid taps: their rounded average as it is (same scale and zero
        point in and out) or, of the centred sums, requantized by s_x / s_y."""
        low, high = RANGES[zp_y.dtype]
        if (float(s_x), int(zp_x)) == (float(s_y), int(zp_y)):
            return np.clip(round_divide(sums, counts), low, high).astype(zp_y.dtype)
        centred = round_divide(sums - np.int64(zp_x) * counts, counts)
        return requantize(centred, s_x, np.ones(1, np.float32), s_y, int(zp_y), zp_y.dtype, axis=1).astype(
            zp_y.dtype)

    def _QLinearGlobalAveragePool(self, node, ins):
        x, s_x, zp_x, s_y, zp_y = ins
        sums = x.astype(np.int64).sum(axis=(2, 3), keepdims=True)
        return self._average(sums, np.int64(x.shape[2] * x.shape[3]), s_x, zp_x, s_y, zp_y)

    def _QLinearAveragePool(self, node, ins):
        """Windows clipped to the input (count_include_pad = 0: the valid taps only)."""
        x, s_x, zp_x, s_y, zp_y = ins
        assert not self.attr(node, "count_include_pad", 0) and not self.attr(node, "ceil_mode", 0)
        kh, kw = self.attr(node, "kernel_shape")
        sh, sw = self.attr(node, "strides", [1, 1])
        top, left, bottom, right = self.attr(node, "pads", [0, 0, 0, 0])
        oh, ow = (x.shape[2] + top + bottom - kh) // sh + 1, (x.shape[3] + left + right - kw) // sw + 1
        sums = np.zeros((*x.shape[:2], oh, ow), dtype=np.int64)
        counts = np.zeros((1, 1, oh, ow), dtype=np.int64)
        for i in range(oh):
            rows = slice(max(i * sh - top, 0), min(i * sh - top + kh, x.shape[2]))
            for j in range(ow):
                columns = slice(max(j * sw - left, 0), min(j * sw - left + kw, x.shape[3]))
                window = x[:, :, rows, columns].astype(np.int64)
                sums[:, :, i, j], counts[0, 0, i, j] = window.sum(axis=(2, 3)), window.shape[2] * window.shape[3]
        return self._average(sums, counts, s_x, zp_x, s_y, zp_y)


def lsb(c: np.ndarray, reference: np.ndarray, scale: float) -> float:
    """The largest difference in units of the output scale (least significant bits)."""
    return float(np.max(np.abs(c.astype(np.float64) - reference.astype(np.float64))) / scale)


def output_quantization(manifest: dict) -> tuple[float, int]:
    """(scale, zero point) of the tensor the final Dequantize reads (the last quantized layer output)."""
    record = [layer["output"] for layer in manifest["layers"] if layer.get("output", {}).get("dtype")][-1]
    return record["scale"], record["zero_point"]
