"""int8 quantized ONNX models through assay-v2 (issue 42): integer-only C, checked three ways.

Each float model is quantized by ONNX Runtime (``quantize_static``, per-channel int8 weights, int8 or uint8
activations) into its QDQ and QOperator forms (``quantized_support.quantized_pair``), generated, compiled
warning-free and run on the host:

* bit for bit against ``FixedPoint``, the contract's fixed-point rule re-implemented in numpy int64 in the test
  support (the C and that model are independent codes of the same formulas);
* against ONNX Runtime on the same quantized model, in LSB of the output scale: within 1 LSB for one layer
  (ORT requantizes in float32, the contract in fixed point: they differ only in rounding), printed for the
  deeper models, where a 1-LSB difference propagates;
* refusals by name of what the slice does not support, and a cross-compile for Cortex-M4 without 64-bit
  division helpers.
"""

import shutil
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from codegen_support import draw_inputs, onnx_reference, run_c  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from quantized_support import FixedPoint, lsb, output_quantization, quantized_pair  # noqa: E402

import codegen  # noqa: E402

FORMATS = ("qdq", "qop")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """``models(kind, activations)``: the float, QDQ and QOperator files of a model of
    ``quantized_support.MODELS`` with int8 (default) or uint8 activations."""
    cache = {}

    def get(kind: str, activations: str = "int8") -> dict:
        if (kind, activations) not in cache:
            cache[kind, activations] = quantized_pair(kind, tmp_path_factory.mktemp(f"{kind}_{activations}"),
                                                      activations)
        return cache[kind, activations]
    return get


def inputs_for(manifest: dict) -> np.ndarray:
    return draw_inputs(tuple(manifest["inputs"][0]["shape"]))


def fixed_point(path, x: np.ndarray) -> np.ndarray:
    reference = FixedPoint(path)
    return np.concatenate([reference.run(sample).reshape(1, -1) for sample in x])


@pytest.mark.parametrize("kind", ["cnn", "ds_cnn", "dense"])
def test_integer_code_equals_the_fixed_point_rule_and_reports_its_distance_to_onnxruntime(kind, models, tmp_path):
    paths = models(kind)
    for fmt in FORMATS:
        manifest = codegen.generate(paths[fmt], tmp_path / fmt)
        assert manifest["quantization"] == {"rule": "fixed-point", "activations": "int8",
                                            "format": "qdq" if fmt == "qdq" else "qoperator"}
        x = inputs_for(manifest)
        c = run_c(tmp_path / fmt, x)
        expected = fixed_point(paths["qop"], x)  # QDQ and QOperator share their constants (same calibration)
        scale, zero = output_quantization(manifest)
        q_c, q_expected = (np.rint(v / np.float32(scale)).astype(np.int64) + zero for v in (c, expected))
        assert np.array_equal(q_c, q_expected), f"{fmt}: integer outputs differ at {np.argwhere(q_c != q_expected)}"
        assert np.array_equal(c, expected)  # and so do the dequantized floats
        print(f"{kind} {fmt}: max |C - ORT| = {lsb(c, onnx_reference(paths[fmt], x), scale):g} LSB of the output "
              f"scale {scale:.6g} over {len(x)} inputs")


# The ops each model of the add and average-pooling tests must be generated with, per format.
RESCALING_OPS = {"residual": {"qop": "QLinearAdd", "qdq": "Add"},
                 "average_head": {"qop": "QLinearAveragePool", "qdq": "AveragePool"},
                 "global_average": {"qop": "QLinearGlobalAveragePool", "qdq": "GlobalAveragePool"}}


@pytest.mark.parametrize("kind, activations", [("residual", "int8"), ("residual", "uint8"), ("average_head", "int8"),
                                               ("global_average", "int8")])
def test_add_and_average_pooling_equal_the_fixed_point_rule(kind, activations, models, tmp_path):
    """QLinearAdd (TFLite's ADD) and the average poolings (TFLite's AveragePool, then a requantization when the
    scale changes), in both forms: the C bit for bit equal to ``FixedPoint`` run on the same file (ONNX Runtime's
    quantizer gives the QDQ AveragePool its input's scale, QLinearAveragePool its own: the forms differ there),
    and within a few LSB of ONNX Runtime (a 1-LSB requantization difference propagates through the layers)."""
    paths = models(kind, activations)
    for fmt in FORMATS:
        manifest = codegen.generate(paths[fmt], tmp_path / fmt)
        assert manifest["quantization"]["activations"] == activations
        assert RESCALING_OPS[kind][fmt] in {layer["op"] for layer in manifest["layers"]}
        x = inputs_for(manifest)
        c = run_c(tmp_path / fmt, x)
        expected = fixed_point(paths[fmt], x)
        scale, zero = output_quantization(manifest)
        q_c, q_expected = (np.rint(v / np.float32(scale)).astype(np.int64) + zero for v in (c, expected))
        assert np.array_equal(q_c, q_expected), f"{fmt}: integer outputs differ at {np.argwhere(q_c != q_expected)}"
        assert np.array_equal(c, expected)
        difference = lsb(c, onnx_reference(paths[fmt], x), scale)
        print(f"{kind} {activations} {fmt}: max |C - ORT| = {difference:g} LSB of the output scale {scale:.6g} over "
              f"{len(x)} inputs")
        assert difference <= 4.0 + 1e-4, f"{fmt}: {difference} LSB from onnxruntime"


@pytest.mark.parametrize("kind", ["single_conv", "single_gemm"])
def test_one_layer_is_within_one_lsb_of_onnxruntime(kind, models, tmp_path):
    paths = models(kind)
    for fmt in FORMATS:
        manifest = codegen.generate(paths[fmt], tmp_path / fmt)
        x = draw_inputs(tuple(manifest["inputs"][0]["shape"]), n=64)
        c = run_c(tmp_path / fmt, x)
        scale, _ = output_quantization(manifest)
        assert np.array_equal(c, fixed_point(paths["qop"], x))
        difference = lsb(c, onnx_reference(paths[fmt], x), scale)
        print(f"{kind} {fmt}: max |C - ORT| = {difference:g} LSB")
        assert difference <= 1.0 + 1e-4, f"{fmt}: {difference} LSB from onnxruntime"


def test_manifest_describes_the_integer_tensors(models, tmp_path):
    paths = models("cnn")
    manifest = codegen.generate(paths["qop"], tmp_path / "qop")
    layers = {layer["op"]: layer for layer in manifest["layers"]}  # the last of each op
    conv = layers["QLinearConv"]["output"]
    assert conv["dtype"] == "int8" and conv["symbol"] == "cnn_qop_arena_i8"
    assert conv["zero_point"] == -128 and conv["scale"] > 0  # a ReLU's range: its zero point is the lowest value
    assert layers["Flatten"]["output"]["dtype"] == "int8"  # a view keeps its input's representation
    assert "dtype" not in layers["DequantizeLinear"]["output"]  # the Dequantize writes floats
    assert manifest["integer_arenas"] == [{"symbol": "cnn_qop_arena_i8", "dtype": "int8", "size": 320}]
    assert "arena" not in manifest and manifest["inputs"][0]["dtype"] == "float32"
    source = (tmp_path / "qop" / manifest["entry"]["file"]).read_text()
    body = source[source.index("{", source.index("cnn_qop_inference(")):]
    assert "float" not in body.split("/* layer 1:")[1].split("/* layer 6:")[0]  # integer-only between Q and DQ
    qdq = codegen.generate(paths["qdq"], tmp_path / "qdq")
    assert [layer["op"] for layer in qdq["layers"] if "output" in layer] == [
        "QuantizeLinear", "Conv", "MaxPool", "Conv", "Flatten", "Gemm", "DequantizeLinear"]


def test_other_strategies_refuse_a_quantized_model_by_name(models, tmp_path):
    paths = models("single_conv")
    for strategy in ("v1", "v3"):
        with pytest.raises(codegen.UnsupportedModel, match=rf"^single_conv_qop.onnx: assay-{strategy} generates "
                                                            r"float code only: the model is quantized \(int8, "
                                                            r"qoperator\); assay-v2 generates its integer code$"):
            codegen.generate(paths["qop"], tmp_path / strategy, strategy=strategy)


def _model(nodes, inits, opset: int = 21, domains=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *domains])
    model.ir_version = 10
    return model


def _refusal(model, tmp_path) -> str:
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(codegen.UnsupportedModel) as error:
        codegen.generate(path, tmp_path / "out")
    message = str(error.value)
    assert "\n" not in message
    return message


SCALE = numpy_helper.from_array(np.array(0.02, dtype=np.float32), "s")


def test_dynamic_quantization_of_a_batch_or_read_by_another_op_is_refused_by_name(tmp_path):
    """DynamicQuantizeLinear reduces over its whole input: over a symbolic batch the per-sample C would differ; and
    a run-time scale read by another op (a DequantizeLinear) would need run-time requantization."""
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "qs", "qz"], name="dq_input"),
             helper.make_node("DequantizeLinear", ["q", "qs", "qz"], ["y"], name="back")]
    assert _refusal(_model(nodes, []), tmp_path) == (
        "m.onnx: node 'dq_input' (DynamicQuantizeLinear) reduces over a batch of symbolic size; the C runs one sample "
        "at a time, which is this op's meaning for a graph input without a batch axis or a batch of 1")
    model = _model(nodes, [])
    for value in (model.graph.input[0], model.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 3  # [3, 4]: no batch axis
    assert _refusal(model, tmp_path) == (
        "m.onnx: node 'dq_input' (DynamicQuantizeLinear) has its output 'q' read by another node; a run-time scale "
        "and zero point are supported as graph outputs only")


def _dynamic_quantize(n: int) -> onnx.ModelProto:
    """DynamicQuantizeLinear of a float32 [n] input exposing its three outputs (packed: y, then y_scale and
    y_zero_point, one value each)."""
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"], name="dql")
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [n]),
                               helper.make_tensor_value_info("s", TensorProto.FLOAT, []),
                               helper.make_tensor_value_info("z", TensorProto.UINT8, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 10
    return model


def test_dynamic_quantization_equals_onnxruntime_and_the_onnx_reference_bit_for_bit(tmp_path):
    """The C's y, y_scale and y_zero_point on edge inputs (all positive, all negative, ties at .5 of x / scale, a
    range across zero, random) equal ONNX Runtime's and ONNX's reference evaluator's; on an input of zeros all
    agree on y and the zero point (0), and the C's scale is ONNX Runtime's 1 where the reference evaluator's is 1/255
    (the spec's formula divides 0 by 0 there; docs/quantized.md)."""
    from onnx.reference import ReferenceEvaluator

    from harness.references.integer import FIXED_POINT, evaluate

    n = 8
    rows = [[1, 2.5, 3, 255, 7, 0.25, 100, 64], [-1, -2.5, -3, -7, -0.1, -100, -64, -0.5],
            [0.5, 1.5, 2.5, 3.5, 254.5, 253.5, 127.5, 255], [-1.2, 0.3, 2.7, 5.1, -3.3, 0, 1e-3, -1e-3],
            [0.0] * n, *np.random.default_rng(6).normal(0, 30, (11, n))]
    x = np.array(rows, np.float32)
    model = _dynamic_quantize(n)
    path = tmp_path / "dql.onnx"
    onnx.save(model, path)
    codegen.generate(path, tmp_path / "c")
    got = run_c(tmp_path / "c", x)
    session = __import__("onnxruntime").InferenceSession(str(path), providers=["CPUExecutionProvider"])
    evaluator = ReferenceEvaluator(model)
    for row, c in zip(x, got):
        ort = np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in session.run(None, {"x": row})])
        onnx_ref = np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in evaluator.run(None, {"x": row})])
        arbiter = np.concatenate([np.asarray(v, np.float32).reshape(-1) for v in evaluate(model, row, FIXED_POINT)
                                  .outputs])
        assert np.array_equal(c, ort) and np.array_equal(c, arbiter), (row, c, ort)
        if np.any(row):
            assert np.array_equal(c, onnx_ref), (row, c, onnx_ref)
        else:
            assert c[n] == 1.0 and onnx_ref[n] == np.float32(1) / np.float32(255)
            assert np.array_equal(c[:n], onnx_ref[:n]) and c[n + 1] == onnx_ref[n + 1] == 0
    assert any(np.any(np.abs(row / c[n] - np.trunc(row / c[n])) == 0.5) for row, c in zip(x, got))  # a tie occurs



@pytest.mark.parametrize("elem, name", [(TensorProto.INT4, "int4"), (TensorProto.FLOAT8E4M3FN, "float8_e4m3fn"),
                                        (TensorProto.INT16, "int16")])
def test_other_quantized_types_are_refused_by_name_between_integer_ops(elem, name, tmp_path):
    """QuantizeLinear and DequantizeLinear take every quantized type (test_codegen_quantize_types.py); the integer
    ops and the QDQ groups int8 and uint8 only."""
    zero = helper.make_tensor("z", elem, [], [0])
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quantize_input"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequantize_input"),
             helper.make_node("Flatten", ["d"], ["f"], name="flatten"),
             helper.make_node("QuantizeLinear", ["f", "s", "z"], ["q2"], name="requantize"),
             helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"], name="back")]
    assert _refusal(_model(nodes, [SCALE, zero]), tmp_path) == (
        f"m.onnx: node 'dequantize_input' (DequantizeLinear) quantizes x to {name}; int8, uint8 are supported")


def test_a_qdq_pattern_that_does_not_fold_is_refused_by_name(tmp_path):
    """A float op (Softmax) reading dequantized values: the code would not be integer-only."""
    zero = numpy_helper.from_array(np.array(0, dtype=np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quantize_input"),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"], name="dequantize_input"),
             helper.make_node("Softmax", ["d"], ["f"], name="softmax"),
             helper.make_node("QuantizeLinear", ["f", "s", "z"], ["q2"], name="quantize_softmax"),
             helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["y"], name="back")]
    assert _refusal(_model(nodes, [SCALE, zero]), tmp_path) == (
        "m.onnx: node 'dequantize_input' (DequantizeLinear) feeds 'softmax' (Softmax), which does not fold into an "
        "integer layer (DQ -> Conv/Gemm/MatMul [-> Relu] -> Q, DQ -> MaxPool/Flatten/Reshape/Transpose -> Q, DQ, DQ "
        "-> Add -> Q, DQ -> AveragePool/GlobalAveragePool -> Q)")


def test_a_qdq_layer_without_its_quantize_is_refused_by_name(models, tmp_path):
    """A Gemm reading dequantized values whose output stays float."""
    model = onnx.load(models("single_gemm")["qdq"])
    nodes = list(model.graph.node)
    gemm = next(node for node in nodes if node.op_type == "Gemm")
    for node in nodes:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") and node.input[0] in (gemm.output[0], "y") or \
                node.output[0] == "y":
            model.graph.node.remove(node)
    gemm.output[0] = "y"
    message = _refusal(model, tmp_path)
    assert message == (f"m.onnx: node '{gemm.name}' (Gemm) reads dequantized values but its output is not quantized "
                       "by one QuantizeLinear: the DQ -> op -> Q pattern does not fold")


def _quantized_add(a_shape: list, b_shape: list) -> onnx.ModelProto:
    """x [N, 4] quantized, a Reshape to ``a_shape``, and a QLinearAdd of it with a Slice of it of ``b_shape``."""
    int8 = numpy_helper.from_array(np.array(0, dtype=np.int8), "z")
    shapes = [numpy_helper.from_array(np.array(shape, dtype=np.int64), name)
              for shape, name in ((a_shape, "a_shape"), (b_shape, "b_ends"), ([4], "back"))]
    starts = numpy_helper.from_array(np.zeros(len(b_shape), dtype=np.int64), "starts")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quantize_input"),
             helper.make_node("Reshape", ["q", "a_shape"], ["a"], name="reshape"),
             helper.make_node("Slice", ["a", "starts", "b_ends"], ["b"], name="slice"),
             helper.make_node("QLinearAdd", ["a", "s", "z", "b", "s", "z", "s", "z"], ["sum"], name="add",
                              domain="com.microsoft"),
             helper.make_node("Reshape", ["sum", "back"], ["r"], name="flatten"),
             helper.make_node("DequantizeLinear", ["r", "s", "z"], ["y"], name="back_to_float")]
    return _model(nodes, [SCALE, int8, starts, *shapes], opset=13, domains=[helper.make_opsetid("com.microsoft", 1)])


def test_qlinear_add_broadcasting_is_refused_by_name(tmp_path):
    assert _refusal(_quantized_add([1, 2, 2], [1, 1, 2]), tmp_path) == (
        "m.onnx: node 'add' (QLinearAdd) adds tensors of shapes [1, 2, 2] and [1, 1, 2]; equal shapes or a "
        "one-element operand are supported")


def test_average_pooling_counting_its_padding_is_refused_by_name(models, tmp_path):
    model = onnx.load(models("global_average")["qop"])
    pool = next(node for node in model.graph.node if node.op_type == "QLinearAveragePool")
    pool.attribute.append(helper.make_attribute("count_include_pad", 1))
    assert _refusal(model, tmp_path) == (
        f"m.onnx: node '{pool.name}' (QLinearAveragePool) has count_include_pad=1; the quantized average counts a "
        "window's valid taps only (TFLite's AveragePool)")


def test_a_qdq_add_with_a_relu_before_its_quantize_is_refused_by_name(models, tmp_path):
    """ONNX Runtime's quantizer folds the Relu after an Add into the Q's range (or keeps it as DQ -> Relu -> Q);
    an ``Add -> Relu -> Q`` (another tool's) is refused, by the generator as by the integer arbiter."""
    model = onnx.load(models("residual")["qdq"])
    add = next(node for node in model.graph.node if node.op_type == "Add")
    relu = helper.make_node("Relu", [add.output[0]], ["relu_out"], name="add_relu")
    quantize = next(node for node in model.graph.node if add.output[0] in node.input)
    quantize.input[0] = "relu_out"
    model.graph.node.insert(list(model.graph.node).index(quantize), relu)
    assert _refusal(model, tmp_path) == (
        f"m.onnx: node '{add.name}' (Add) reads dequantized values but its output is not quantized by one "
        "QuantizeLinear: the DQ -> op -> Q pattern does not fold")


@pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="arm-none-eabi-gcc not installed")
@pytest.mark.parametrize("kind", ["ds_cnn", "residual", "global_average"])
def test_integer_code_cross_compiles_for_cortex_m4_without_library_calls(kind, models, tmp_path):
    """No 64-bit division helper (``__aeabi_ldivmod``) nor a 32-bit one: the average's division by a window's
    count is a hardware ``sdiv`` on the Cortex-M4."""
    manifest = codegen.generate(models(kind)["qop"], tmp_path / "qop")
    undefined, defined = set(), set()
    for source in manifest["sources"]:
        obj = tmp_path / f"{source}.o"
        subprocess.run(["arm-none-eabi-gcc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O2",
                        "-ffp-contract=off", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16",
                        "-c", source, "-o", str(obj)], cwd=tmp_path / "qop", check=True, capture_output=True)
        symbols = subprocess.run(["arm-none-eabi-nm", str(obj)], capture_output=True, text=True, check=True)
        for line in symbols.stdout.splitlines():
            kind, symbol = line.split()[-2:]
            (undefined if kind == "U" else defined).add(symbol)
    assert undefined - defined == {"nearbyintf"}  # no __aeabi_ldivmod & co: the int64 code needs no helper


def test_a_float16_scale_gives_the_multiplier_of_its_exact_value(tmp_path):
    """QLinearMatMul with float16 scales (ONNX's test_qlinearmatmul_*_float16): every float16 is a float32, so the
    multiplier is made from the scales' exact float16 values (not from the decimals they round), and the C equals
    the integer arbiter's fixed-point rule bit for bit."""
    from harness.references.integer import FIXED_POINT, evaluate

    from codegen.quantize import quantize_multiplier

    halves = [np.float16(v) for v in (0.0066, 0.00705, 0.0107)]
    inits = [numpy_helper.from_array(np.array([s]), n) for s, n in zip(halves, ("sa", "sb", "sy"))]
    inits += [numpy_helper.from_array(np.array([z], np.uint8), n) for z, n in ((113, "za"), (114, "zb"), (118, "zy"))]
    inits.append(numpy_helper.from_array(np.random.default_rng(3).integers(0, 256, (4, 3)).astype(np.uint8), "b"))
    node = helper.make_node("QLinearMatMul", ["x", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"], name="mm")
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, ["N", 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / "f16.onnx"
    onnx.save(model, path)
    codegen.generate(path, tmp_path / "c")
    exact = quantize_multiplier(float(halves[0]) * float(halves[1]) / float(halves[2]))
    decimal = quantize_multiplier(0.0066 * 0.00705 / 0.0107)
    assert exact != decimal
    source = "".join(path.read_text() for path in (tmp_path / "c").glob("*.c"))  # the constants are in the params
    assert str(exact[0]) in source and str(decimal[0]) not in source
    x = np.random.default_rng(4).integers(0, 256, (64, 4)).astype(np.float32)
    (want,) = evaluate(model, x, FIXED_POINT).outputs
    assert np.array_equal(run_c(tmp_path / "c", x), want.astype(np.float32).reshape(len(x), -1))


def _matmul_integer(tmp_path, k: int) -> tuple:
    """MatMulInteger of a uint8 [N, k] input by a constant int8 [k, 2] of -128 (zero points 0): the largest |y| is
    k 128 255, at 2^24 for k = 514."""
    weight = numpy_helper.from_array(np.full((k, 2), -128, np.int8), "b")
    node = helper.make_node("MatMulInteger", ["x", "b"], ["y"], name="mmi")
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", TensorProto.UINT8, ["N", k])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, ["N", 2])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def test_an_int32_output_proved_within_2_24_is_written_exactly(tmp_path):
    """MatMulInteger (and ConvInteger alike): the range proof |y| <= 514 128 255 = 16776960 <= 2^24 holds, the C
    accumulates in int32 and writes (float) y, equal to the integer arbiter (and ONNX Runtime) bit for bit, at the
    extreme inputs too."""
    from harness.references.integer import FIXED_POINT, evaluate

    model = _matmul_integer(tmp_path, 514)
    path = tmp_path / "mmi.onnx"
    onnx.save(model, path)
    codegen.generate(path, tmp_path / "c")
    x = np.concatenate([np.full((1, 514), 255.0), np.zeros((1, 514)),
                        np.random.default_rng(5).integers(0, 256, (30, 514))]).astype(np.float32)
    (want,) = evaluate(model, x, FIXED_POINT).outputs
    got = run_c(tmp_path / "c", x)
    assert got[0, 0] == -16776960.0 and np.array_equal(got, want.astype(np.float32))
    assert np.array_equal(got, onnx_reference(path, x.astype(np.uint8)).astype(np.float32))


def test_an_int32_output_beyond_2_24_is_refused_with_its_bound(tmp_path):
    assert _refusal(_matmul_integer(tmp_path, 515), tmp_path) == (
        "m.onnx: node 'mmi' (MatMulInteger) has an int32 output that can reach |y| = 16809600 (from the input's range "
        "[0, 255], the weights and zero points), above 2^24 = 16777216: not every value is a float32, which the ABI "
        "carries")
