"""The QuantizeLinear and DequantizeLinear node cases of every quantized type (issue 42): the float32 ABI carries the
types whose every value is a float32 and still refuses the others, the cases pass bit for bit against their expected
outputs, ONNX Runtime and the integer arbiter, and a case ONNX Runtime has no kernel for (float4e2m1) is compared with
its expected outputs alone and says so."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.core.oracle import PASS
from harness.references import as_graph_input
from harness.stages.conformance import onnx_node
from harness.stages.conformance.run import Settings

# one case per kind of widening: a type, per axis, blocked, a float16 output, ONNX Runtime through a Cast
REPRESENTATIVE = ["test_quantizelinear_e4m3fn", "test_quantizelinear_int4", "test_quantizelinear_axis",
                  "test_quantizelinear_blocked_symmetric", "test_dequantizelinear_uint2",
                  "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_blocked"]


@pytest.fixture(scope="module")
def collected():
    return {case.name: (op, case) for op, case in onnx_node.collect(("QuantizeLinear", "DequantizeLinear"))}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-node-qdq")


def _run(collected, folder, name: str) -> tuple[onnx_node.NodeCase, list[dict]]:
    op, case = collected[name]
    prepared = onnx_node.prepare(op, case, 0, name, folder / name)
    settings = Settings(generators=["assay-v2"], out=folder / "out", suite=onnx_node.SUITE, work_dir=folder)
    return prepared, onnx_node.run_case(prepared, "assay-v2", settings)


def _case(input_type: int, output_type: int, x, y) -> SimpleNamespace:
    graph = helper.make_graph([], "g", [helper.make_tensor_value_info("x", input_type, [2])],
                              [helper.make_tensor_value_info("y", output_type, [2])])
    return SimpleNamespace(model=helper.make_model(graph), data_sets=[([x], [y])])


def test_the_abi_takes_the_types_whose_every_value_is_a_float32():
    floats = np.zeros(2, np.float32)
    e4m3 = numpy_helper.from_array(np.zeros(2, ml_dtypes.float8_e4m3fn), "x")  # as the case generators give it
    assert onnx_node._abi_refusal(_case(TensorProto.FLOAT, TensorProto.INT16, floats, np.zeros(2, np.int16)), 0) \
        is None
    assert onnx_node._abi_refusal(_case(TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT, e4m3, floats), 0) is None
    assert onnx_node._abi_refusal(_case(TensorProto.FLOAT, TensorProto.FLOAT16, floats, np.zeros(2, np.float16)),
                                  0) is None
    for elem_type, dtype in ((TensorProto.INT64, np.int64), (TensorProto.DOUBLE, np.float64)):
        refusal = onnx_node._abi_refusal(_case(TensorProto.FLOAT, elem_type, floats, np.zeros(2, dtype)), 0)
        assert refusal.startswith(f"its output 'y' is {TensorProto.DataType.Name(elem_type)}; the ABI carries")
    # an int32 output crosses only with a range proof, which only ConvInteger's and MatMulInteger's have
    refusal = onnx_node._abi_refusal(_case(TensorProto.FLOAT, TensorProto.INT32, floats, np.zeros(2, np.int32)), 0)
    assert refusal.startswith("its output 'y' is INT32 and not ConvInteger's or MatMulInteger's; no range proof")


def test_the_abi_reads_every_type_as_the_generated_c_does():
    values = np.array([0.5, 1.5, -9.0, 7.4, np.nan, 1000.0, -np.inf], np.float32)
    assert as_graph_input(values, ml_dtypes.int4).astype(np.int8).tolist() == [0, 2, -8, 7, -8, 7, -8]
    assert as_graph_input(values, np.uint16).tolist() == [0, 2, 0, 7, 0, 1000, 0]
    e4m3 = as_graph_input(values, ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert e4m3[[0, 1, 2, 5, 6]].tolist() == [0.5, 1.5, -9.0, 448.0, -448.0] and np.isnan(e4m3[4])
    assert as_graph_input(values, ml_dtypes.float8_e4m3fn).astype(np.float32)[3] == 7.5  # nearest, ties to even


@pytest.mark.parametrize("name", REPRESENTATIVE)
def test_a_case_of_a_widened_quantization_passes_bit_for_bit(collected, folder, name):
    prepared, results = _run(collected, folder, name)
    assert prepared.refused is None and prepared.no_kernel is None
    assert [r["verdict"] for r in results] == [PASS], results[0].get("cause")
    assert results[0]["arbiter"]["errors"] == {"C": 0.0, "expected": 0.0, "onnxruntime": 0.0}


def test_a_case_onnx_runtime_has_no_kernel_for_is_compared_with_its_expected_outputs_and_says_so(collected, folder):
    prepared, (result,) = _run(collected, folder, "test_quantizelinear_float4e2m1")
    assert "has no kernel for it" in prepared.no_kernel and "QuantizeLinear" in prepared.no_kernel
    assert result["verdict"] == PASS and list(result["errors"]) == [onnx_node.EXPECTED]
    assert result["unavailable_references"] == [f"onnxruntime: {prepared.no_kernel}"]
    assert result["arbiter"]["errors"] == {"C": 0.0, "expected": 0.0, "onnxruntime": None}  # None: did not run


@pytest.mark.slow
def test_every_quantize_and_dequantize_case_passes(collected, folder):
    """The whole selection (27 cases): every one passes."""
    verdicts = {name: _run(collected, folder, name)[1][0]["verdict"] for name in collected}
    assert len(verdicts) == 27 and set(verdicts.values()) == {PASS}, verdicts
