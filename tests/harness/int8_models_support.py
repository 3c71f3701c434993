"""Quantized ONNX models as a certification team gets them (issue 42): a small float CNN from a fixed seed, then
ONNX Runtime's own post-training quantizer (``quantize_static``, per-channel int8, a seeded calibration set), in
QOperator and QDQ formats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.models.int8 import quiet_quantizer


def float_cnn(path: Path, seed: int = 0) -> Path:
    """Conv 3x3 (pad 1) - Relu - MaxPool 2x2 - Conv 3x3 (pad 1) - Relu - Flatten - Gemm, 1 x 8 x 8 in, 10 out."""
    rng = np.random.default_rng(seed)

    def weights(name: str, shape: tuple, scale: float) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.normal(size=shape) * scale).astype(np.float32), name)

    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
             helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
             helper.make_node("Flatten", ["r2"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc")]
    initialisers = [weights("w1", (4, 1, 3, 3), 0.3), weights("b1", (4,), 0.1), weights("w2", (8, 4, 3, 3), 0.2),
                    weights("b2", (8,), 0.1), weights("w3", (10, 8 * 4 * 4), 0.1), weights("b3", (10,), 0.1)]
    graph = helper.make_graph(nodes, "qcnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], initialisers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def quantized(float_model: Path, path: Path, fmt: str, seed: int = 0) -> Path:
    """``float_model`` quantized by ``quantize_static`` in format ``fmt`` (``"qdq"`` or ``"qoperator"``), int8
    activations and per-channel int8 weights, calibrated on 32 seeded inputs uniform in [-1, 1] (the domain Assay
    draws a model's inputs from by default)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(seed)
    shape = [d.dim_value or 1 for d in onnx.load(str(float_model)).graph.input[0].type.tensor_type.shape.dim]

    class Calibration(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(32)])

        def get_next(self):
            return next(self.batches, None)

    with quiet_quantizer():  # the quantizer's advice on pre-processing, without changing the log level for good
        quantize_static(str(float_model), str(path), Calibration(), per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator)
    return path
