"""The integer arbiter's QuantizeLinear and DequantizeLinear of every quantized type, per tensor, per axis and blocked
(issue 42), bit for bit against ONNX's reference evaluator, which made the node cases' expected outputs; the rules
the generated C is held to (docs/quantized.md, "What is accepted")."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from harness.errors import ModelError
from harness.references import integer

X = np.array([[[0.0, 0.74, 0.75, 1.25, -2.5, 3.5], [100.0, -100.0, 7.0, -7.5, 1e5, -1e5]]], np.float32)  # 1 x 2 x 6


def _quantize(elem_type: int, scale: np.ndarray, zero: np.ndarray | None, **attrs):
    inputs = ["x", "s"] + (["z"] if zero is not None else [])
    constants = [numpy_helper.from_array(scale, "s")] + ([numpy_helper.from_array(zero, "z")] if zero is not None
                                                         else [])
    node = helper.make_node("QuantizeLinear", inputs, ["y"], name="q", **attrs)
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))],
                              [helper.make_tensor_value_info("y", elem_type, list(X.shape))], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])


QUANTIZE = {
    "int16 per axis": (TensorProto.INT16, np.array([0.5, 0.001], np.float32), np.array([3, -30000], np.int16),
                       {"axis": 1}),
    "uint4 blocked": (TensorProto.UINT4, np.array([[[0.5, 1.0], [2.0, 0.25]]], np.float32),
                      np.array([[[1, 2], [3, 4]]], ml_dtypes.uint4), {"axis": 2, "block_size": 4}),
    "int2": (TensorProto.INT2, np.array(1.0, np.float32), np.array(0, ml_dtypes.int2), {}),
    "e4m3fn saturating": (TensorProto.FLOAT8E4M3FN, np.array(0.01, np.float32), np.array(0, ml_dtypes.float8_e4m3fn),
                          {}),
    "e5m2 not saturating": (TensorProto.FLOAT8E5M2, np.array(0.001, np.float32), np.array(0, ml_dtypes.float8_e5m2),
                            {"saturate": 0}),
    "e4m3fnuz per axis": (TensorProto.FLOAT8E4M3FNUZ, np.array([0.5, 0.01], np.float32),
                          np.zeros(2, ml_dtypes.float8_e4m3fnuz), {"axis": 1}),
    "float4": (TensorProto.FLOAT4E2M1, np.array(0.5, np.float32), np.array(0, ml_dtypes.float4_e2m1fn), {}),
}


@pytest.mark.parametrize("kind", list(QUANTIZE))
def test_quantize_equals_onnx(kind):
    elem_type, scale, zero, attrs = QUANTIZE[kind]
    model = _quantize(elem_type, scale, zero, **attrs)
    (want,) = ReferenceEvaluator(model).run(None, {"x": X})
    (got,) = integer.evaluate(model, X, integer.FIXED_POINT).outputs
    assert got.dtype == want.dtype and np.array_equal(got.astype(np.float32), want.astype(np.float32),
                                                      equal_nan=True), kind


@pytest.mark.parametrize("elem_type, values, scale, zero, attrs", [
    (TensorProto.UINT16, np.array([[0, 65535, 3], [40000, 1, 2]], np.uint16), np.array([0.5, 2.0], np.float32),
     np.array([32768, 1], np.uint16), {"axis": 0}),
    (TensorProto.INT4, np.array([[-8, 7, 0], [1, -1, 3]], ml_dtypes.int4), np.array([[0.5, 4.0], [1.0, 2.0]],
                                                                                      np.float32),
     np.array([[1, -2], [0, 3]], ml_dtypes.int4), {"axis": 1, "block_size": 2}),
    (TensorProto.FLOAT8E5M2FNUZ, np.array([[1.5, -3.0, 57344.0], [0.0, 2.0, -1.0]], ml_dtypes.float8_e5m2fnuz),
     np.array(4.0, np.float32), None, {}),
    (TensorProto.FLOAT8E4M3FN, np.array([[448.0, -0.5, 3.0], [1.0, 2.0, 0.0]], ml_dtypes.float8_e4m3fn),
     np.array(1000.0, np.float16), None, {}),  # a float16 scale: a float16 output, the product rounded to it
])
def test_dequantize_equals_onnx(elem_type, values, scale, zero, attrs):
    inputs = ["x", "s"] + (["z"] if zero is not None else [])
    constants = [numpy_helper.from_array(scale, "s")] + ([numpy_helper.from_array(zero, "z")] if zero is not None
                                                         else [])
    out_type = TensorProto.FLOAT16 if scale.dtype == np.float16 else TensorProto.FLOAT
    graph = helper.make_graph([helper.make_node("DequantizeLinear", inputs, ["y"], name="dq", **attrs)], "dq",
                              [helper.make_tensor_value_info("x", elem_type, list(values.shape))],
                              [helper.make_tensor_value_info("y", out_type, list(values.shape))], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    with np.errstate(over="ignore"):  # 448 * 1000 leaves float16: infinity
        (want,) = ReferenceEvaluator(model).run(None, {"x": values})
    (got,) = integer.evaluate(model, values, integer.FIXED_POINT).outputs
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_a_non_zero_float8_zero_point_is_refused_by_name():
    model = _quantize(TensorProto.FLOAT8E4M3FN, np.array(1.0, np.float32), np.array(2.0, ml_dtypes.float8_e4m3fn))
    with pytest.raises(ModelError, match=r"^node 'q' \(QuantizeLinear\): a non-zero float8_e4m3fn zero point"):
        integer.evaluate(model, X, integer.FIXED_POINT)
