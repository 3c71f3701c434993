"""The quantized ONNX node cases in ``assay conformance --suite onnx-node`` (issue 42): every case of the quantized
ops collected, a type the float32 ABI cannot carry refused by name at preparation, integer inputs and outputs
crossing the ABI as their integer values, bit for bit against the expected outputs and ONNX Runtime, and the
integer arbiter deciding a 1-LSB difference at a requantization."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import onnx
import pytest

from harness.core.oracle import ERROR, FAIL, PASS
from harness.references import as_graph_input
from harness.stages.conformance import onnx_node
from harness.stages.conformance.run import Settings

PASSING = ["test_qlinearconv", "test_qlinearmatmul_2D_uint8_float32", "test_qlinearmatmul_3D_int8_float16",
           "test_quantizelinear", "test_dequantizelinear", "test_convinteger_without_padding", "test_matmulinteger"]


@pytest.fixture(scope="module")
def collected():
    return {case.name: (op, case) for op, case in onnx_node.collect(onnx_node.QUANTIZED)}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-node-quantized")


def _run(collected, folder, name: str, output: int = 0) -> tuple[onnx_node.NodeCase, list[dict]]:
    op, case = collected[name]
    prepared = onnx_node.prepare(op, case, output, f"{name}.{output}", folder / f"{name}.{output}")
    settings = Settings(generators=["assay-v2"], out=folder / "out", suite=onnx_node.SUITE, work_dir=folder)
    return prepared, onnx_node.run_case(prepared, "assay-v2", settings)


def test_every_case_of_the_quantized_ops_is_collected(collected):
    names = set(collected)
    assert {"test_qlinearconv", "test_qlinearmatmul_3D_int8_float16", "test_quantizelinear_e4m3fn",
            "test_dequantizelinear_int4", "test_convinteger_with_padding", "test_matmulinteger",
            "test_dynamicquantizelinear"} <= names
    # an expanded function body holds ops of neither list (ReduceMin, Round, Cast): left out as for float ops
    assert not any(name.endswith("_expanded") for name in names)


@pytest.mark.parametrize("name", PASSING)
def test_representative_cases_pass_bit_for_bit(collected, folder, name):
    prepared, results = _run(collected, folder, name)
    assert prepared.quantized and (prepared.atol, prepared.rtol) == (0.0, 0.0)
    assert [r["verdict"] for r in results] == [PASS], results[0].get("cause")
    assert results[0]["arbiter"]["errors"] == {"C": 0.0, "expected": 0.0, "onnxruntime": 0.0}


def test_an_integer_input_reaches_the_op_as_its_integers(collected, folder):
    """test_qlinearconv's x is uint8: the prepared model keeps it uint8, the ABI carries its values as floats."""
    prepared, _ = _run(collected, folder, "test_qlinearconv")
    model = onnx.load(prepared.model)
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.UINT8
    x = np.load(prepared.data)["x"]
    assert x.dtype == np.float32 and np.array_equal(x, np.asarray(collected["test_qlinearconv"][1].data_sets[0][0][0]))


def test_a_case_onnx_runtime_cannot_run_at_its_opset_is_declared_lower(collected, folder):
    prepared, _ = _run(collected, folder, "test_quantizelinear")  # QuantizeLinear-28: ONNX Runtime has none
    assert prepared.opset is not None and onnx.load(prepared.model).opset_import[0].version == prepared.opset


def test_the_abi_reads_integers_as_the_generated_c_does():
    values = np.array([0.0, 2.5, 3.5, -1.0, 300.0, np.nan, 127.0], np.float32)
    assert as_graph_input(values, np.uint8).tolist() == [0, 2, 4, 0, 255, 0, 127]
    assert as_graph_input(values, np.int8).tolist() == [0, 2, 4, -1, 127, -128, 127]
    assert as_graph_input(values, np.float32) is values


def _record(c: np.ndarray, reference: np.ndarray, name: str) -> dict:
    return {"reference": name, "verdict": FAIL if not np.array_equal(c, reference) else PASS, "cause": "differs"}


@pytest.mark.parametrize("arbiter_c, expected_delta, verdict", [
    (0, 1, PASS),  # the C equals its arbiter, the expected output 1 LSB away: the rules differ, it passes
    (1, 1, FAIL),  # the C departs from the arbiter under its own rule: it fails
    (0, 2, FAIL),  # 2 LSB is more than any two roundings of one requantization differ: it fails
])
def test_the_integer_arbiter_decides_a_difference_at_a_requantization(arbiter_c, expected_delta, verdict):
    c = np.array([[10.0, 20.0, 30.0]], np.float32)
    expected = c + np.array([[0, expected_delta, 0]], np.float32)
    fixed_point = c + np.array([[0, arbiter_c, 0]], np.float32)
    case = onnx_node.NodeCase("q", "QLinearConv", "", "", False, 0.0, 0.0, quantized=True)
    record = onnx_node._judge_integer(_record(c, expected, onnx_node.EXPECTED), c, {onnx_node.EXPECTED: expected},
                                      "fixed-point", {"fixed-point": fixed_point}.get, case)
    assert record["verdict"] == verdict
    assert ("1 LSB at 1 of 3 outputs" in record.get("rule_difference", "")) == (verdict == PASS)


def test_quantize_and_dequantize_get_no_rule_allowance():
    """QuantizeLinear and DequantizeLinear round once in float32 under every rule: any difference fails."""
    c, expected = np.array([[1.0]], np.float32), np.array([[2.0]], np.float32)
    case = onnx_node.NodeCase("q", "QuantizeLinear", "", "", False, 0.0, 0.0, quantized=True)
    record = onnx_node._judge_integer(_record(c, expected, onnx_node.EXPECTED), c, {onnx_node.EXPECTED: expected},
                                      "fixed-point", {"fixed-point": c}.get, case)
    assert record["verdict"] == FAIL


@pytest.mark.parametrize("k, refused", [(514, None), (515, "can reach |y| = 16809600")])
def test_an_int32_output_is_prepared_when_a_range_proof_bounds_it_by_2_24(k, refused):
    """MatMulInteger of a uint8 input by k rows of -128: |y| <= k 128 255, 16776960 <= 2^24 for k = 514."""
    node = onnx.helper.make_node("MatMulInteger", ["a", "b"], ["y"])
    graph = onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info("a", onnx.TensorProto.UINT8,
                                                                                    [1, k]),
                                                 onnx.helper.make_tensor_value_info("b", onnx.TensorProto.INT8,
                                                                                    [k, 1])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT32, [1, 1])])
    inputs = [np.zeros((1, k), np.uint8), np.full((k, 1), -128, np.int8)]
    case = SimpleNamespace(model=onnx.helper.make_model(graph), data_sets=[(inputs, [np.zeros((1, 1), np.int32)])])
    why = onnx_node._abi_refusal(case, 0)
    assert why == refused if refused is None else refused in why


def test_a_case_onnx_runtime_refuses_is_judged_by_the_integer_arbiter(collected, folder):
    """test_convinteger_with_padding has per-channel weight zero points, which ONNX Runtime 1.32's ConvInteger refuses
    ("Non per-tensor quantization is not supported now"): the C, the expected outputs and the integer arbiter agree
    bit for bit, so it passes with the refusal named; a C that departs, or another error, does not."""
    _, results = _run(collected, folder, "test_convinteger_with_padding")
    assert [r["verdict"] for r in results] == [PASS], results[0].get("cause")
    assert "not supported now" in results[0]["reference_unavailables"][0]
    assert results[0]["arbiter"]["errors"] == {"C": 0.0, "expected": 0.0, "onnxruntime": None}
    c = np.array([[1.0, 2.0]], np.float32)
    record = {"reference": "onnxruntime", "verdict": ERROR, "cause": "x", "max_abs_error": None}
    refusal = {onnx_node.EXPECTED: c, "onnxruntime": "reference onnxruntime failed: ... is not supported now."}
    assert onnx_node._unavailable(record, c, refusal, "fixed-point", {"fixed-point": c}.get)["verdict"] == PASS
    assert onnx_node._unavailable(record, c + 1, refusal, "fixed-point", {"fixed-point": c}.get)["verdict"] == ERROR
    crash = {**refusal, "onnxruntime": "reference onnxruntime failed: RuntimeError: bad allocation"}
    assert onnx_node._unavailable(record, c, crash, "fixed-point", {"fixed-point": c}.get)["verdict"] == ERROR


@pytest.mark.parametrize("output", [0, 1, 2])
def test_dynamic_quantization_passes_its_three_outputs_rank_0_included(collected, folder, output):
    """test_dynamicquantizelinear_min_adjusted's y, y_scale and y_zero_point (the last two rank 0, one value in the
    output vector), bit for bit against the expected outputs, ONNX Runtime and the integer arbiter."""
    _, results = _run(collected, folder, "test_dynamicquantizelinear_min_adjusted", output)
    assert [r["verdict"] for r in results] == [PASS], results[0].get("cause")
    assert results[0]["arbiter"]["errors"] == {"C": 0.0, "expected": 0.0, "onnxruntime": 0.0}


@pytest.mark.slow
def test_the_whole_quantized_selection(tmp_path):
    """The 48 quantized node cases through the CLI (about 30 s): none fails or errs; QLinearMatMul, ConvInteger,
    MatMulInteger and DynamicQuantizeLinear pass every case (docs/conformance.md, "Quantized cases")."""
    import json
    import subprocess
    import sys

    out = tmp_path / "out"
    command = [sys.executable, "-m", "harness.cli", "conformance", "--suite", "onnx-node", "--generators", "assay-v2",
               "--cases", "test_quantizelinear*,test_dequantizelinear*,test_qlinear*,test_convinteger*,"
               "test_matmulinteger*,test_dynamicquantizelinear*", "--out", str(out), "--work", str(tmp_path / "work"),
               "--quiet"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads((out / "conformance.json").read_text())
    ops = {case["name"]: case["op"] for case in document["cases"]}
    verdicts = [(ops[r["case"]], r["verdict"]) for r in document["results"]]
    assert len(verdicts) == 48 and not {FAIL, ERROR} & {verdict for _, verdict in verdicts}
    for op, cases in {"QLinearMatMul": 8, "ConvInteger": 2, "MatMulInteger": 1, "DynamicQuantizeLinear": 9}.items():
        assert [verdict for name, verdict in verdicts if name == op] == [PASS] * cases, op
