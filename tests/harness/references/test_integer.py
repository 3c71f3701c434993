"""The exact integer arbiter (``harness.references.integer``, issue 42).

- Rule "onnxruntime" equals ONNX Runtime (one thread, graph optimisations off) bit for bit, per op, on models made
  from fixed seeds: this shows the evaluator reproduces ONNX Runtime's arithmetic, so that a difference between C and
  ONNX Runtime can be attributed to the rule and not to the arbiter.
- Rule "fixed-point" (TFLite's double rounding): the primitives on hand-computed cases from TFLite's definition, and
  the whole requantization against exact rational arithmetic: it is round(acc M) but where the exact value is within
  the analysis's bound of a .5 boundary, and never more than 1/2 + that bound away (< 1 LSB).
- The two rules on the small CNN, layer by layer from the same integer input: at most 1 LSB apart (the module
  docstring's analysis), and they do differ (so the comparison means something); how often is printed.
- Refusals name the node and the op.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.errors import ModelError
from harness.references import integer
from integer_support import one_node, onnxruntime_values, qlinear_model, quantized_branches, quantized_cnn

INT32_MIN, INT32_MAX = integer.INT32_MIN, integer.INT32_MAX

CONV_CASES = {
    "padded": dict(pads=[1, 1, 1, 1]),
    "stride 2": dict(strides=[2, 2], pads=[0, 1, 0, 1]),
    "groups": dict(group=3, pads=[1, 1, 1, 1], outputs=6),
    "depthwise": dict(group=3, pads=[1, 1, 1, 1], outputs=3),
    "dilated": dict(dilations=[2, 2], pads=[2, 2, 2, 2]),
}
WEIGHTS = {"per-channel": dict(per_channel=True), "per-tensor": dict(per_channel=False),
           "per-tensor, zero point 3": dict(per_channel=False, weight_zero=3)}
DTYPES = {"int8": np.int8, "uint8": np.uint8}


def agree_with_onnxruntime(model: onnx.ModelProto, shape, seed: int) -> None:
    """The integer output of the op and the graph's float output, rule "onnxruntime" against ONNX Runtime."""
    x = np.random.default_rng(seed).uniform(-1.2, 1.2, (64, *shape[1:])).astype(np.float32)
    expected_y, expected_q = onnxruntime_values(model, x, ["y", "yq"])
    result = integer.evaluate(model, x, integer.ONNXRUNTIME, ["yq"])
    assert result.tensors["yq"].dtype == expected_q.dtype
    np.testing.assert_array_equal(result.tensors["yq"], expected_q)
    np.testing.assert_array_equal(result.outputs[0], expected_y)
    assert len(np.unique(expected_q)) > 20 or shape[-1] == 24 or "GlobalAveragePool" in str(model.graph.node)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("weights", WEIGHTS.values(), ids=WEIGHTS)
@pytest.mark.parametrize("attrs", CONV_CASES.values(), ids=CONV_CASES)
def test_qlinearconv_equals_onnxruntime_bit_for_bit(attrs, weights, dtype):
    model, shape = qlinear_model("QLinearConv", np.random.default_rng(1), dtype, **weights, **attrs)
    agree_with_onnxruntime(model, shape, 2)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("weights", WEIGHTS.values(), ids=WEIGHTS)
@pytest.mark.parametrize("op, attrs", [("QGemm", {}), ("QGemm", dict(alpha=0.5)), ("QLinearMatMul", {})],
                         ids=["QGemm", "QGemm alpha 0.5", "QLinearMatMul"])
def test_qgemm_and_qlinearmatmul_equal_onnxruntime_bit_for_bit(op, attrs, weights, dtype):
    model, shape = qlinear_model(op, np.random.default_rng(3), dtype, **weights, **attrs)
    agree_with_onnxruntime(model, shape, 4)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES)
@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    ("QLinearAdd", {}),
    ("QLinearAddScalar", {}),
    ("QLinearGlobalAveragePool", {}),
], ids=["MaxPool", "QLinearAdd", "QLinearAdd one-element operand", "QLinearGlobalAveragePool"])
def test_other_ops_equal_onnxruntime_bit_for_bit(op, attrs, dtype):
    model, shape = qlinear_model(op, np.random.default_rng(5), dtype, **attrs)
    agree_with_onnxruntime(model, shape, 6)


# --- the fixed-point rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("real, expected", [
    (0.5, (2 ** 30, 0)),
    (0.75, (3 * 2 ** 29, 0)),
    (1 / 3, (1431655765, -1)),  # 2/3 * 2^31 = 1431655765.33
    (1.0, (2 ** 30, 1)),
    (1e-10, (0, 0)),  # frexp exponent -33 < -31: zero
    (0.0, (0, 0)),
    ((2 ** 30 + 0.5) / 2 ** 31, (2 ** 30 + 1, 0)),  # q 2^31 = 2^30 + 1/2: llround goes away from zero (not to even)
    (1 - 2.0 ** -40, (2 ** 30, 1)),  # q 2^31 rounds to 2^31: halved, shift + 1
])
def test_quantize_multiplier_follows_tflite(real, expected):
    assert integer.quantize_multiplier(real) == expected


@pytest.mark.parametrize("a, b, expected", [
    (INT32_MIN, INT32_MIN, INT32_MAX),  # the one overflow, saturated
    (2 ** 30, 2 ** 30, 2 ** 29),
    (1, 2 ** 30, 1),  # +0.5: up
    (-1, 2 ** 30, 0),  # -0.5: the nudge 1 - 2^30 rounds it up too (toward +infinity)
    (-3, 2 ** 30, -1),  # -1.5 -> -1
    (INT32_MAX, INT32_MAX, INT32_MAX - 1),
])
def test_saturating_rounding_doubling_high_mul(a, b, expected):
    assert int(integer.saturating_rounding_doubling_high_mul(a, b)) == expected


@pytest.mark.parametrize("x, exponent, expected", [
    (-5, 1, -3), (5, 1, 3),  # -2.5 and 2.5: half away from zero
    (-4, 1, -2), (6, 2, 2), (-6, 2, -2), (7, 0, 7), (-1, 31, 0), (INT32_MIN, 31, -1),
])
def test_rounding_divide_by_pot_rounds_half_away_from_zero(x, exponent, expected):
    assert int(integer.rounding_divide_by_pot(x, exponent)) == expected


def half_away(value: Fraction) -> int:
    """round(value), ties away from zero."""
    magnitude = int(abs(value) + Fraction(1, 2))
    return magnitude if value >= 0 else -magnitude


def test_fixed_point_is_exact_rounding_but_near_half_within_the_bound():
    """MBQM(acc, QM(M)) against exact acc M (Fraction): off by at most 1/2 + bound, the bound of the module
    docstring (2^-(e+1) for SRDHM's rounding seen after the right shift e, plus |acc| 2^(shift-32) for m0's own
    rounding); it differs from round(acc M) only where acc M is within that bound of a .5 boundary."""
    rng = np.random.default_rng(7)
    reals = (rng.uniform(0.00002, 0.05, 400).astype(np.float32).astype(np.float64))
    accs = rng.integers(-2 ** 23, 2 ** 23, (400, 60))
    differences = 0
    for real, row in zip(reals, accs):
        m0, shift = integer.quantize_multiplier(float(real))
        results = integer.multiply_by_quantized_multiplier(row, m0, shift)
        bound = Fraction(1, 2 ** (-shift + 1)) + Fraction(int(np.abs(row).max()), 2 ** (32 - shift))
        for acc, result in zip(row.tolist(), results.tolist()):
            exact = Fraction(acc) * Fraction(float(real))
            assert abs(result - exact) <= Fraction(1, 2) + bound < 1
            if result != half_away(exact):
                differences += 1
                assert abs(abs(exact - int(exact)) - Fraction(1, 2)) <= bound
    assert 0 < differences < accs.size / 10  # double rounding shows (2^-(e+1) of ties: a few percent at e = 5)


# --- the two rules on the small CNN --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    qop, qdq = quantized_cnn(tmp_path_factory.mktemp("cnn"))
    x = np.random.default_rng(8).uniform(-1, 1, (400, 1, 8, 8)).astype(np.float32)
    return onnx.load(str(qop)), onnx.load(str(qdq)), x


def test_the_two_rules_differ_by_at_most_one_lsb_per_layer_from_the_same_input(cnn):
    """Each layer of the QOperator CNN evaluated from the same integer input (the fixed-point run's) under both
    rules: at most 1 LSB apart everywhere, and some outputs do differ."""
    qop, _, x = cnn
    layers = [node for node in qop.graph.node if node.op_type in ("QLinearConv", "MaxPool", "QGemm")]
    inputs = integer.evaluate(qop, x, integer.FIXED_POINT, [node.input[0] for node in layers]).tensors
    counts = {}
    for node in layers:
        cut = one_node(qop, node.name, inputs[node.input[0]].dtype)
        fixed, ort = (integer.evaluate(cut, inputs[node.input[0]], rule, [node.output[0]]).tensors[node.output[0]]
                      for rule in (integer.FIXED_POINT, integer.ONNXRUNTIME))
        difference = np.abs(fixed.astype(np.int64) - ort)
        assert difference.max() <= 1, node.name
        counts[node.name] = (int(np.count_nonzero(difference)), difference.size)
    print("outputs where the rules differ by 1 LSB, per layer:", counts)
    assert counts["pool1"][0] == 0  # MaxPool is exact under both rules
    assert all(counts[node.name][0] > 0 for node in layers if node.op_type != "MaxPool")


def test_a_qdq_group_has_the_integer_meaning_of_the_qlinear_op(cnn):
    """The QDQ and QOperator files of one calibration, under the fixed-point rule: the same integers throughout."""
    qop, qdq, x = cnn
    np.testing.assert_array_equal(integer.evaluate(qop, x, integer.FIXED_POINT).outputs[0],
                                  integer.evaluate(qdq, x, integer.FIXED_POINT).outputs[0])


def test_qdq_add_and_average_pooling_groups_equal_their_qoperator_ops(tmp_path):
    """QLinearAdd, QLinearAveragePool, QLinearGlobalAveragePool against their QDQ groups, fixed-point rule."""
    qop, qdq = quantized_branches(tmp_path)
    assert {"QLinearAdd", "QLinearAveragePool", "QLinearGlobalAveragePool"} <= {
        node.op_type for node in onnx.load(str(qop)).graph.node}
    x = np.random.default_rng(9).uniform(-1, 1, (200, 2, 8, 8)).astype(np.float32)
    np.testing.assert_array_equal(integer.evaluate(qop, x, integer.FIXED_POINT).outputs[0],
                                  integer.evaluate(qdq, x, integer.FIXED_POINT).outputs[0])


def test_the_onnxruntime_rule_reproduces_onnxruntime_on_the_cnn(cnn):
    qop, _, x = cnn
    names = [node.output[0] for node in qop.graph.node if node.op_type != "DequantizeLinear"]
    expected = onnxruntime_values(qop, x, ["y", *names])
    result = integer.evaluate(qop, x, integer.ONNXRUNTIME, names)
    np.testing.assert_array_equal(result.outputs[0], expected[0])
    for name, values in zip(names, expected[1:]):
        np.testing.assert_array_equal(result.tensors[name], values)


# --- refusals -------------------------------------------------------------------------------------------------------


def graph_of(nodes, initializers=(), opset: int = 21) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("x", [[0.5, 1.5, 2.5, 255.0], [-1.0, -2.5, -3.0, -7.0], [-1.2, 0.3, 2.7, 5.1],
                               [0.0, 0.0, 0.0, 0.0]])
def test_dynamic_quantize_linear_equals_onnxruntime(x):
    """DynamicQuantizeLinear's three outputs (the same under both rules) equal ONNX Runtime's: all positive, all
    negative, across zero, and zeros (ONNX Runtime's scale 1)."""
    model = graph_of([helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dyn"),
                      helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq")])
    x = np.array([x], np.float32)
    want = onnxruntime_values(model, x, ["q", "s", "z", "y"])
    for rule in integer.RULES:
        evaluation = integer.evaluate(model, x, rule, ["q"])
        assert np.array_equal(evaluation.tensors["q"], want[0]) and np.array_equal(evaluation.outputs[0], want[3])


def test_int16_activations_are_refused_by_name_in_a_qdq_group():
    """QuantizeLinear and DequantizeLinear take int16 (test_integer_qdq_types.py); a QDQ group 8-bit tensors only."""
    model = graph_of([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q16"),
                      helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dq"),
                      helper.make_node("Relu", ["d"], ["r"], name="relu"),
                      helper.make_node("QuantizeLinear", ["r", "s", "z"], ["q2"], name="q2"),
                      helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"], name="dy")],
                     [numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.int16(0), "z")])
    with pytest.raises(ModelError, match=r"^node 'q2' \(QuantizeLinear\): zero point of type int16 \(int8 and uint8 "
                                         r"only\)"):
        integer.evaluate(model, np.zeros((1, 4), np.float32), integer.FIXED_POINT)


def test_int4_weights_are_refused_by_name():
    weight = helper.make_tensor("w", TensorProto.INT4, [4, 4], [1] * 16)
    model = graph_of([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
                      helper.make_node("DequantizeLinear", ["q", "s", "z"], ["xd"], name="dx"),
                      helper.make_node("DequantizeLinear", ["w", "s"], ["wd"], name="dw4"),
                      helper.make_node("MatMul", ["xd", "wd"], ["m"], name="mm"),
                      helper.make_node("QuantizeLinear", ["m", "s", "z"], ["mq"], name="qm"),
                      helper.make_node("DequantizeLinear", ["mq", "s", "z"], ["y"], name="dy")],
                     [weight, numpy_helper.from_array(np.float32(0.1), "s"), numpy_helper.from_array(np.int8(0), "z")])
    with pytest.raises(ModelError, match=r"^node 'mm' \(MatMul\): a weight that is not a DequantizeLinear of an "
                                         r"8-bit tensor"):
        integer.evaluate(model, np.zeros((1, 4), np.float32), integer.FIXED_POINT)


def test_the_onnxruntime_rule_refuses_qdq_graphs_by_name(cnn):
    _, qdq, x = cnn
    with pytest.raises(ModelError, match=r"^node 'conv1' \(Conv\): a QDQ group: ONNX Runtime runs it as a float32"):
        integer.evaluate(qdq, x, integer.ONNXRUNTIME)


def test_an_unknown_rule_is_refused():
    with pytest.raises(ModelError, match="unknown rule 'tflite'"):
        integer.evaluate(graph_of([]), np.zeros((1, 4), np.float32), "tflite")


@pytest.mark.parametrize("op", ["ConvInteger", "MatMulInteger"])
def test_int32_accumulators_equal_the_onnx_node_cases(op):
    """ConvInteger and MatMulInteger (per-channel weight zero points, padding reading the zero point): the int32
    accumulator, the same under both rules, equal to ONNX's expected outputs."""
    from harness.stages.conformance import onnx_node

    for _, case in onnx_node.collect((op,)):
        inputs, (expected,) = case.data_sets[0]
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        for value, array in list(zip(model.graph.input, inputs))[1:]:
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(array), value.name))
        for rule in integer.RULES:
            (got,) = integer.evaluate(model, np.asarray(inputs[0]), rule).outputs
            assert got.dtype == np.int32 and np.array_equal(got.reshape(expected.shape), expected), case.name


def test_a_graph_without_batch_axis_is_evaluated_sample_by_sample(tmp_path):
    """DynamicQuantizeLinear reduces over its whole input: for a graph input without a batch axis ([4]) the integer
    reference evaluates each sample alone (its own scale), as the C and ONNX Runtime run it, not the stacked batch."""
    from harness.models import user_files
    from harness.references.integer_ref import FixedPointReference

    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"], name="dyn")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, [])])
    path = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    model = user_files.load(path, tmp_path / "cache")
    x = np.array([[0, 1, 2, 2.55], [0, 10, 20, 25.5]], np.float32)
    scales = FixedPointReference().run(model, x)
    assert scales.shape == (2, 1) and np.array_equal(scales[:, 0], [np.float32(2.55) / np.float32(255),
                                                                    np.float32(25.5) / np.float32(255)])
