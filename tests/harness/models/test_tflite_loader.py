"""TensorFlow Lite models (issue 42): a full-integer conversion of a seeded DS-CNN-like Keras model, turned into an
ONNX QOperator graph by ``harness.models.tflite``, computes what LiteRT's reference kernels compute, bit for bit, under
the integer arbiter's ``litert`` rule; what is not converted is refused by name; a damaged file is one line, exit 2
(docs/quantized.md, "TensorFlow Lite models")."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

import tflite_models_support
from harness.errors import ModelError
from harness.models import tflite
from harness.references import integer
from harness.references.litert_ref import LiteRtReference


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tflite")
    source = tflite_models_support.ds_cnn_tflite(folder / "ds-cnn.tflite")
    (folder / "cache").mkdir()
    return source, tflite.convert(source, folder / "cache")


def test_the_conversion_is_an_ONNX_QOperator_graph_of_the_same_integers(converted):
    _, model = converted
    graph = onnx.load(str(model.files["onnx"])).graph
    assert [node.op_type for node in graph.node] == ["QLinearConv", "QLinearConv", "QLinearConv",
                                                     "QLinearGlobalAveragePool", "Flatten", "QGemm"]
    depthwise = graph.node[1]
    assert next(a.i for a in depthwise.attribute if a.name == "group") == 8  # one group per channel
    assert next(list(a.ints) for a in graph.node[0].attribute if a.name == "pads") == [0, 0, 1, 1]  # TFLite's SAME
    assert (model.input_shape, model.output_shape, model.layout) == ((24, 10, 1), (12,), "HWC")
    assert model.file_layouts == {"tflite": ("HWC", "C"), "onnx": ("CHW", "C")}
    assert model.input_domain == (-128.0, 127.0)  # the int8 input crosses the ABI as its integers
    assert model.files["tflite"].read_bytes() == converted[0].read_bytes()


def test_litert_equals_the_arbiter_under_its_rule_bit_for_bit(converted):
    """The proof of the conversion: LiteRT running the .tflite file and the integer arbiter running its ONNX
    conversion agree on every output of 1 000 seeded inputs under the ``litert`` rule. Under the fixed-point rule
    (Assay's C) they differ by 1 LSB at some outputs, because TFLite's reference FULLY_CONNECTED requantizes in
    double: the rule is measured, not assumed."""
    _, model = converted
    inputs = np.random.default_rng(3).uniform(-128, 127, (1000, *model.input_shape)).astype(np.float32)
    lite = LiteRtReference().run(model, inputs)
    onnx_path = model.files["onnx"]
    batch = inputs.transpose(0, 3, 1, 2)  # the ONNX graph is channels-first
    ours, fixed = (integer.evaluate(onnx_path, batch, rule).outputs[0].astype(np.float32)
                   for rule in (integer.LITERT, integer.FIXED_POINT))
    assert lite.shape == (1000, 12) and np.unique(lite).size > 50
    assert np.array_equal(ours, lite)
    differing = np.abs(fixed - lite)
    assert differing.max() == 1.0 and 0 < np.count_nonzero(differing) < lite.size // 50
    print(f"fixed-point vs LiteRT: {np.count_nonzero(differing)} of {lite.size} outputs 1 LSB apart")


def test_each_converted_layer_equals_litert_under_the_fixed_point_rule_but_the_dense_one(converted):
    """Layer by layer, LiteRT's own intermediate tensors against the arbiter's: CONV_2D (stride 2, SAME padding),
    DEPTHWISE_CONV_2D, the 1x1 CONV_2D and AVERAGE_POOL_2D (the sum over the map divided by its 60 taps, rounded
    half away from zero) follow the fixed-point rule on every output; only FULLY_CONNECTED needs the litert rule."""
    source, model = converted
    from harness.models.tf_runtime import tensorflow

    tf = tensorflow()
    tree, data = tflite.read(source)
    schema = tflite._schema()
    graph = tflite._Graph(source, tree, data, tflite._names(schema.BuiltinOperator), tflite._names(schema.TensorType))
    names = tflite._Builder(graph).names
    operators = tree.subgraphs[0].operators
    layers = {graph.op_name(operators[k]) + f"#{k}": int(operators[k].outputs[0])
              for k in tflite._live(graph, tree.subgraphs[0].outputs[0])}
    inputs = np.rint(np.random.default_rng(4).uniform(-128, 127, (1000, *model.input_shape))).astype(np.int8)
    interpreter = tf.lite.Interpreter(model_path=str(source), num_threads=1, experimental_preserve_all_tensors=True,
                                      experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    lite = {layer: [] for layer in layers}
    for sample in inputs:
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], sample[None])
        interpreter.invoke()
        for layer, index in layers.items():
            lite[layer].append(interpreter.get_tensor(index)[0])
    differing = {}
    for rule in (integer.FIXED_POINT, integer.LITERT):
        ours = integer.evaluate(model.files["onnx"], inputs.transpose(0, 3, 1, 2), rule,
                                [names[index] for index in layers.values()]).tensors
        for layer, index in layers.items():
            theirs = np.stack(lite[layer])
            mine = ours[names[index]]
            mine = mine.transpose(0, 2, 3, 1) if mine.ndim == 4 else mine  # channels-first -> NHWC
            differing[rule, layer] = (int(np.count_nonzero(mine != theirs)), theirs.size)
    print("outputs differing from LiteRT, per rule and layer:", differing)
    assert all(count == 0 for (rule, layer), (count, _) in differing.items() if rule == integer.LITERT)
    assert all(count == 0 for (rule, layer), (count, _) in differing.items() if not layer.startswith("FULLY"))
    assert differing[integer.FIXED_POINT, "FULLY_CONNECTED#8"][0] > 0


def test_a_residual_model_with_max_pooling_and_add_equals_litert_bit_for_bit(tmp_path):
    """MAX_POOL_2D and ADD (with its fused ReLU, no-op on the calibrated output) converted as MaxPool and QLinearAdd:
    the arbiter under the litert rule equals LiteRT on every logit of 1 000 seeded inputs."""
    path = tflite_models_support.convert(tflite_models_support.residual(), tmp_path / "residual.tflite")
    (tmp_path / "cache").mkdir()
    model = tflite.convert(path, tmp_path / "cache")
    graph = onnx.load(str(model.files["onnx"])).graph
    assert [node.op_type for node in graph.node] == ["QLinearConv", "MaxPool", "QLinearConv", "QLinearAdd",
                                                     "QLinearGlobalAveragePool", "Flatten", "QGemm"]
    inputs = np.random.default_rng(5).uniform(-128, 127, (1000, *model.input_shape)).astype(np.float32)
    lite = LiteRtReference().run(model, inputs)
    ours = integer.evaluate(model.files["onnx"], inputs.transpose(0, 3, 1, 2), integer.LITERT).outputs[0]
    assert np.unique(lite).size > 50 and np.array_equal(ours.astype(np.float32), lite)


def test_an_unconverted_op_and_a_float_model_are_refused_by_name(tmp_path):
    for name, made in (("softmax", lambda path: tflite_models_support.ds_cnn_tflite(path, softmax=True)),
                       ("float", lambda path: tflite_models_support.convert(tflite_models_support.ds_cnn(),
                                                                            path, integer=False))):
        path = made(tmp_path / f"{name}.tflite")
        (tmp_path / name).mkdir()
        with pytest.raises(ModelError) as refused:
            tflite.convert(path, tmp_path / name)
        message = str(refused.value)
        assert message.startswith(str(path)) and "\n" not in message
        if name == "softmax":
            assert "(SOFTMAX)" in message and "not converted" in message, message
        else:
            assert "is FLOAT32: a float32 model; only full-integer int8 models" in message, message


def test_a_damaged_tflite_file_is_one_line_and_exit_2(converted, tmp_path):
    source, _ = converted
    text = tmp_path / "text.tflite"
    text.write_bytes(b"not a model\n")
    with pytest.raises(ModelError, match=r"text.tflite: not a TensorFlow Lite file \(no 'TFL3' flatbuffer"):
        tflite.read(text)
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(source.read_bytes()[:300])
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", str(truncated), "--inputs",
                           "10", "--quiet", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "error:" in line]
    assert f"error: {truncated}: truncated or corrupt TensorFlow Lite file (error: unpack_from" in line, line


def test_a_fused_activation_that_clamps_is_refused(converted):
    """A fused RELU is TFLite's clamp of the output's integers to [zero point of 0.0, 127]: a no-op for the
    calibrated ReLU output (zero point -128), a clamp the QLinear ops cannot hold for another zero point: refused."""
    source, _ = converted
    tree, data = tflite.read(source)
    schema = tflite._schema()
    graph = tflite._Graph(source, tree, data, tflite._names(schema.BuiltinOperator), tflite._names(schema.TensorType))
    first = tree.subgraphs[0].operators[0]
    assert first.builtinOptions.fusedActivationFunction == schema.ActivationFunctionType.RELU
    tflite.to_onnx(graph)
    tree.subgraphs[0].tensors[first.outputs[0]].quantization.zeroPoint = np.array([-20])
    with pytest.raises(ModelError, match=r"operator 0 \(CONV_2D\) -> '.*': fused RELU clamps the output to "
                                         r"\[-20, 127\], not a no-op"):
        tflite.to_onnx(graph)


def test_the_shape_arithmetic_before_a_reshape_is_dropped_and_nothing_else(converted):
    source, _ = converted
    tree, data = tflite.read(source)
    schema = tflite._schema()
    graph = tflite._Graph(source, tree, data, tflite._names(schema.BuiltinOperator), tflite._names(schema.TensorType))
    kept = [graph.op_name(tree.subgraphs[0].operators[k]) for k in tflite._live(graph, tree.subgraphs[0].outputs[0])]
    assert kept == ["CONV_2D", "DEPTHWISE_CONV_2D", "CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED"]
    assert len(tree.subgraphs[0].operators) == 9  # SHAPE, STRIDED_SLICE and PACK were there
