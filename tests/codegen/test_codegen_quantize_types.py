"""QuantizeLinear and DequantizeLinear of every quantized type, per tensor, per axis and blocked, through assay-v2's C
(issue 42): a float32 model ``x -> QuantizeLinear -> DequantizeLinear -> y`` generated, compiled and run on inputs
with ties and out-of-range values, bit for bit against ONNX's reference evaluator (one sample at a time: a blocked
scale has the sample's rank) and the integer arbiter (``harness.references.integer``), the contract's two other
readers. Infinities are checked against the arbiter alone: ONNX's reference casts an infinite x / scale to an integer
type by numpy's undefined conversion (the lowest value on x86), where the spec, ONNX Runtime's clamp, the C and the
arbiter saturate."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from codegen_support import run_c
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import codegen
from harness.references import integer

SHAPE = (4, 6)  # a sample; the graph's input is ["N", 4, 6], axis 1 the first of a sample


def _model(elem_type: int, scale: np.ndarray, zero: np.ndarray | None, **attrs):
    inputs = ["x", "s"] + (["z"] if zero is not None else [])
    constants = [numpy_helper.from_array(scale, "s")]
    if zero is not None:
        constants.append(numpy_helper.from_array(zero, "z"))
    nodes = [helper.make_node("QuantizeLinear", inputs, ["q"], name="quantize", **attrs),
             helper.make_node("DequantizeLinear", ["q", *inputs[1:]], ["y"], name="dequantize",
                              **{k: v for k, v in attrs.items() if k in ("axis", "block_size")})]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *SHAPE])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *SHAPE])], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 11
    return model


def _inputs(scale: float) -> np.ndarray:
    """Multiples of half the scale (ties of x / scale), values beyond every type's range, infinities."""
    rng = np.random.default_rng(42)
    x = (rng.integers(-80, 80, size=(6, *SHAPE)) * np.float32(scale / 2)).astype(np.float32)
    x[0, 0, :4] = [np.inf, -np.inf, 1e6, -1e6]
    return x


CASES = {
    "int16 per axis": (TensorProto.INT16, np.array([0.5, 0.25, 2.0, 1.0], np.float32),
                       np.array([0, -3, 7, 100], np.int16), {"axis": 1}),
    "uint4 blocked": (TensorProto.UINT4, np.full((1, 4, 3), 0.75, np.float32) * np.arange(1, 4, dtype=np.float32),
                      np.full((1, 4, 3), 3, ml_dtypes.uint4), {"axis": 2, "block_size": 2}),
    "int2 per tensor": (TensorProto.INT2, np.array(1.5, np.float32), np.array(0, ml_dtypes.int2), {}),
    "uint16 blocked, a short last block": (TensorProto.UINT16, np.array([[[0.5, 2.0]] * 4], np.float32),
                                           np.array([[[1, 60000]] * 4], np.uint16), {"axis": 2, "block_size": 4}),
    "e4m3fn saturating, per axis": (TensorProto.FLOAT8E4M3FN, np.array([0.5, 0.25, 2.0, 1.0], np.float32),
                                    np.zeros(4, ml_dtypes.float8_e4m3fn), {"axis": 1}),
    "e5m2 not saturating": (TensorProto.FLOAT8E5M2, np.array(0.001, np.float32), None,
                            {"saturate": 0, "output_dtype": TensorProto.FLOAT8E5M2}),
    "e4m3fnuz not saturating": (TensorProto.FLOAT8E4M3FNUZ, np.array(0.125, np.float32),
                                np.zeros((), ml_dtypes.float8_e4m3fnuz), {"saturate": 0}),
    "float4 blocked": (TensorProto.FLOAT4E2M1, np.full((1, 4, 2), 1.5, np.float32),
                       np.zeros((1, 4, 2), ml_dtypes.float4_e2m1fn), {"axis": 2, "block_size": 3}),
}


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return got.shape == want.shape and bool(np.all((got == want) | (np.isnan(got) & np.isnan(want))))


@pytest.mark.parametrize("kind", list(CASES))
def test_quantize_dequantize_equals_onnx_and_the_arbiter(kind, tmp_path):
    elem_type, scale, zero, attrs = CASES[kind]
    model = _model(elem_type, scale, zero, **attrs)
    path = tmp_path / "qdq.onnx"
    path.write_bytes(model.SerializeToString())
    manifest = codegen.generate(path, tmp_path / "c")
    x = _inputs(float(scale.reshape(-1)[0]))
    c = run_c(tmp_path / "c", x).reshape(x.shape)
    evaluator = ReferenceEvaluator(model)
    with np.errstate(all="ignore"):
        want = np.concatenate([evaluator.run(None, {"x": sample[None]})[0] for sample in x[1:]])
    assert _same(c[1:], want), f"{kind}: C and ONNX's reference differ at {np.argwhere(c[1:] != want)[:5].tolist()}"
    arbiter = np.concatenate([integer.evaluate(model, sample[None], integer.FIXED_POINT).outputs[0] for sample in x])
    assert _same(c, arbiter), f"{kind}: C and the integer arbiter differ at {np.argwhere(c != arbiter)[:5].tolist()}"
    quantized = [layer["output"] for layer in manifest["layers"] if layer["op"] == "QuantizeLinear"][0]
    assert quantized["dtype"] == str(helper.tensor_dtype_to_np_dtype(elem_type))


def test_a_scale_along_the_batch_axis_is_refused_by_name(tmp_path):
    model = _model(TensorProto.INT16, np.ones(3, np.float32), np.zeros(3, np.int16), axis=0)
    path = tmp_path / "qdq.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(codegen.UnsupportedModel, match=r"node 'quantize' \(QuantizeLinear\) works on the batch axis"):
        codegen.generate(path, tmp_path / "c")
