"""Quantized ONNX models for the integer arbiter's tests, made from fixed seeds: one QLinear op between a graph input's
QuantizeLinear and an output's DequantizeLinear, the small CNN of issue 42 quantized by ONNX Runtime's
``quantize_static`` (QOperator and QDQ, calibrated on the same data), and one node of a model cut out with its
integer input (the per-layer comparison)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.references.onnxruntime_ref import session_options

ONNX_TYPES = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8}
X_SCALE = np.float32(2 / 255)


def zero_point(dtype, offset: int = 0) -> np.ndarray:
    """A zero point of ``dtype``: ``offset`` for int8, 128 + ``offset`` for uint8 (inputs centred near 0)."""
    return np.array(offset + (128 if np.dtype(dtype) == np.uint8 else 0), dtype)


def _model(nodes, initializers: dict, input_shape, output_rank: int, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *input_shape[1:]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * output_rank)],
        [numpy_helper.from_array(np.asarray(value), name) for name, value in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def _weights(rng, shape, per_channel: bool, weight_zero: int):
    """int8 weights, their scales (one per output channel, axis 0, or one) and zero points of the same shape."""
    w = rng.integers(-127, 128, shape).astype(np.int8)
    channels = shape[0]
    scales = rng.uniform(0.002, 0.01, channels if per_channel else ()).astype(np.float32)
    zeros = np.full(channels if per_channel else (), weight_zero, np.int8)
    return w, scales, zeros


def _output_quantization(std: float, dtype):
    """An output scale covering about four standard deviations of the real output, centred."""
    return np.float32(8 * std / 255), zero_point(dtype, 2)


def qlinear_model(op: str, rng, dtype=np.int8, per_channel: bool = True, weight_zero: int = 0, channels: int = 3,
                  outputs: int = 8, kernel: int = 3, size: int = 9, **attrs) -> tuple[onnx.ModelProto, tuple]:
    """``x -> QuantizeLinear -> op -> DequantizeLinear -> y`` and the input shape; ``op`` one of QLinearConv,
    QGemm, QLinearMatMul, MaxPool, QLinearAdd, QLinearAddScalar, QLinearGlobalAveragePool."""
    zp_x = zero_point(dtype, -3)
    quantize = helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"], name="quantize")
    dequantize = helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"], name="dequantize")
    init = {"sx": X_SCALE, "zx": zp_x}
    if op == "QLinearConv":
        shape = (1, channels, size, size)
        group = attrs.get("group", 1)
        w, sw, zw = _weights(rng, (outputs, channels // group, kernel, kernel), per_channel, weight_zero)
        taps = channels // group * kernel * kernel
        init.update(w=w, sw=sw, zw=zw, b=rng.integers(-2000, 2000, outputs).astype(np.int32))
        init["sy"], init["zy"] = _output_quantization(float(X_SCALE * np.mean(sw) * 70 * np.sqrt(taps)), dtype)
        node = helper.make_node(op, ["xq", "sx", "zx", "w", "sw", "zw", "sy", "zy", "b"], ["yq"], name="layer",
                                kernel_shape=[kernel, kernel], **attrs)
        rank = 4
    elif op in ("QGemm", "QLinearMatMul"):
        shape = (1, 24)
        w, sw, zw = _weights(rng, (outputs, 24), per_channel, weight_zero)
        init["sy"], init["zy"] = _output_quantization(float(X_SCALE * np.mean(sw) * 70 * np.sqrt(24)), dtype)
        if op == "QGemm":
            init.update(w=w, sw=sw, zw=zw, b=rng.integers(-2000, 2000, outputs).astype(np.int32))
            node = helper.make_node(op, ["xq", "sx", "zx", "w", "sw", "zw", "b", "sy", "zy"], ["yq"], name="layer",
                                    domain="com.microsoft", transB=1, **attrs)
        else:
            init.update(w=np.ascontiguousarray(w.T), sw=sw, zw=zw)
            node = helper.make_node(op, ["xq", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["yq"], name="layer")
        rank = 2
    elif op == "MaxPool":
        shape, rank = (1, channels, size, size), 4
        init["sy"], init["zy"] = X_SCALE, zp_x
        node = helper.make_node(op, ["xq"], ["yq"], name="layer", kernel_shape=[kernel, kernel], **attrs)
    elif op in ("QLinearAdd", "QLinearAddScalar"):
        shape, rank = (1, channels, size, size), 4
        second = ["xq2"] if op == "QLinearAdd" else ["c"]
        init.update(s2=np.float32(1.7 / 255), z2=zero_point(dtype, 5), c=rng.integers(-100, 100, ()).astype(dtype))
        init["sy"], init["zy"] = np.float32(3.1 / 255), zero_point(dtype, -1)
        quantize = [quantize, helper.make_node("QuantizeLinear", ["x", "s2", "z2"], ["xq2"], name="quantize2")]
        node = helper.make_node("QLinearAdd", ["xq", "sx", "zx", *second, "s2", "z2", "sy", "zy"], ["yq"],
                                name="layer", domain="com.microsoft")
    elif op == "QLinearGlobalAveragePool":
        shape, rank = (1, channels, size, size), 4
        init["sy"], init["zy"] = np.float32(0.4 / 255), zero_point(dtype, 1)
        node = helper.make_node(op, ["xq", "sx", "zx", "sy", "zy"], ["yq"], name="layer", domain="com.microsoft")
    else:
        raise ValueError(op)
    nodes = [*(quantize if isinstance(quantize, list) else [quantize]), node, dequantize]
    return _model(nodes, init, shape, rank), shape


def onnxruntime_values(model: onnx.ModelProto, x: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """ONNX Runtime's values of ``names`` (graph outputs added), one thread, graph optimisations off (as Assay)."""
    import onnxruntime as ort

    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    outputs = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names if n not in outputs)
    session = ort.InferenceSession(exposed.SerializeToString(), sess_options=session_options(),
                                   providers=["CPUExecutionProvider"])
    return session.run(names, {session.get_inputs()[0].name: x})


def _float_model(nodes, weights, input_shape, outputs: int) -> onnx.ModelProto:
    value = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *input_shape])
    graph = helper.make_graph(nodes, "float", [value],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", outputs])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _quantize_both(folder: Path, model: onnx.ModelProto, calibration: list) -> tuple[Path, Path]:
    """``model`` quantized by ``quantize_static`` (per-channel int8 weights, int8 activations) as QOperator and as
    QDQ, both calibrated on the same inputs: (qop, qdq)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter({"x": batch} for batch in calibration)

        def get_next(self):
            return next(self.batches, None)

    float_path = folder / "float.onnx"
    onnx.save(model, float_path)
    paths = []
    for fmt, name in ((QuantFormat.QOperator, "qop"), (QuantFormat.QDQ, "qdq")):
        paths.append(folder / f"{name}.onnx")
        quantize_static(str(float_path), str(paths[-1]), Reader(), quant_format=fmt, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return paths[0], paths[1]


def _init(rng, name: str, shape, scale: float):
    return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), name)


def quantized_cnn(folder: Path) -> tuple[Path, Path]:
    """The CNN of issue 42 (Conv-Relu-MaxPool-Conv-Relu-Flatten-Gemm), quantized: (qop, qdq)."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["f"], name="flat"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc"),
    ]
    weights = [_init(rng, "w1", (4, 1, 3, 3), 0.3), _init(rng, "b1", (4,), 0.1), _init(rng, "w2", (8, 4, 3, 3), 0.2),
               _init(rng, "b2", (8,), 0.1), _init(rng, "w3", (10, 128), 0.1), _init(rng, "b3", (10,), 0.1)]
    calibration = [rng.uniform(-1, 1, (1, 1, 8, 8)).astype(np.float32) for _ in range(32)]
    return _quantize_both(folder, _float_model(nodes, weights, (1, 8, 8), 10), calibration)


def quantized_branches(folder: Path) -> tuple[Path, Path]:
    """Two convolutions added, AveragePool, Relu, GlobalAveragePool, Flatten, quantized: (qop, qdq)."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Conv", ["x", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c1", "c2"], ["a"], name="add"),
        helper.make_node("AveragePool", ["a"], ["p"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                         name="avg"),
        helper.make_node("Relu", ["p"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["y"], name="flat"),
    ]
    weights = [_init(rng, "w1", (4, 2, 3, 3), 0.3), _init(rng, "b1", (4,), 0.1), _init(rng, "w2", (4, 2, 3, 3), 0.3),
               _init(rng, "b2", (4,), 0.1)]
    calibration = [rng.uniform(-1, 1, (1, 2, 8, 8)).astype(np.float32) for _ in range(16)]
    return _quantize_both(folder, _float_model(nodes, weights, (2, 8, 8), 4), calibration)


def one_node(model: onnx.ModelProto, node_name: str, dtype) -> onnx.ModelProto:
    """The node ``node_name`` of ``model`` alone, its data input (first input) made the graph's input of integer
    type ``dtype``, its initializers kept: a layer evaluated from a given integer input."""
    node = next(n for n in model.graph.node if n.name == node_name)
    kept = [t for t in model.graph.initializer if t.name in node.input]
    value = helper.make_tensor_value_info(node.input[0], ONNX_TYPES[np.dtype(dtype)], None)
    graph = helper.make_graph([node], node_name, [value], [helper.make_empty_tensor_value_info(node.output[0])], kept)
    cut = helper.make_model(graph, opset_imports=list(model.opset_import))
    cut.ir_version = model.ir_version
    return cut
