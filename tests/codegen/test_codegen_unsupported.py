"""What the generator cannot translate is refused with one line naming the file, the layer and its type."""

import numpy as np
import pytest

import codegen
from codegen import UnsupportedModel

keras = pytest.importorskip("keras")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

layers = keras.layers


def refused(path, **options) -> str:
    with pytest.raises(UnsupportedModel) as error:
        codegen.generate(path, path.parent / "out", **options)
    message = str(error.value)
    assert "\n" not in message and path.name in message
    return message


@pytest.mark.parametrize("layer, needle", [
    (layers.LSTM(3, name="memory"), "'memory' (LSTM)"),
    (layers.Conv2D(4, 3, data_format="channels_first", name="first"), "'first' (Conv2D) uses data_format"),
    (layers.GroupNormalization(groups=2, name="norm"), "'norm' (GroupNormalization)"),
    (layers.Dense(3, activation="mish", name="fancy"), "'fancy' (Dense) uses activation 'mish'"),
    (layers.Softmax(axis=1, name="rows"), "'rows' (Softmax) has axis=1"),
])
def test_keras_layer_refused(tmp_path, layer, needle):
    shape = (6, 6, 4) if not isinstance(layer, layers.LSTM) else (5, 4)
    model = keras.Sequential([keras.Input(shape), layer])
    model.save(tmp_path / "model.keras")
    assert needle in refused(tmp_path / "model.keras")


def onnx_file(tmp_path, node, inits=(), shape=(4,), out_shape=(4,), opset=20):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", *out_shape])],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


def test_onnx_op_refused(tmp_path):
    path = onnx_file(tmp_path, helper.make_node("Hardmax", ["x"], ["y"], name="hard"))
    assert "node 'hard' (Hardmax) is not supported" in refused(path)


def test_onnx_conv_with_channels_not_divisible_by_its_groups_refused(tmp_path):
    """Grouped and depthwise convolutions are supported (issue 26); a group that does not divide C is not."""
    weight = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=3)
    path = onnx_file(tmp_path, node, [weight], shape=(4, 6, 6), out_shape=(4, 4, 4), opset=17)
    assert "node 'dw' (Conv) has group=3" in refused(path)


def test_onnx_reflect_pad_refused(tmp_path):
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")
    node = helper.make_node("Pad", ["x", "p"], ["y"], name="mirror", mode="reflect")
    path = onnx_file(tmp_path, node, [pads], shape=(2, 4, 4), out_shape=(2, 6, 6), opset=17)
    assert "node 'mirror' (Pad) has mode='reflect'" in refused(path)


def test_unknown_suffix_and_bad_option(tmp_path):
    path = tmp_path / "model.pb"
    path.write_bytes(b"")
    assert "frontend" in refused(path)
    with pytest.raises(ValueError):
        codegen.generate(path, tmp_path / "out", frontend="onnx", weights="text")


def onnx_graph_file(tmp_path, nodes, input_shape, inits=(), opset=17, output_shape=None):
    """A model whose input 'x' has exactly ``input_shape`` (names are symbolic) and whose output is 'y'."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape or input_shape)],
                              list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("shape, needle", [
    ([1, 0, 5], "input 'x': dimension 1 is 0 (declared shape [1, 0, 5])"),
    (["N", 0], "input 'x': dimension 1 is 0 (declared shape [N, 0])"),
    (["N", "F"], "input 'x': dimension 1 is symbolic ('F') (declared shape [N, F])"),
    ([2, 3, 4, 5, 6], "input 'x' has declared shape [2, 3, 4, 5, 6]: without a batch axis (docs/zoo.md), its rank "
                      "is 5; ranks 1 to 4 are supported"),
])
def test_onnx_input_shape_refused_with_its_declared_shape(tmp_path, shape, needle):
    path = onnx_graph_file(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], shape)
    assert needle in refused(path)


def test_onnx_loop_beyond_int_max_refused(tmp_path):
    """10.8e9 values would need `for (int i = 0; i < 10800000000; ++i)`: refused, naming layer and count."""
    path = onnx_graph_file(tmp_path, [helper.make_node("Relu", ["x"], ["y"], name="huge")], ["N", 3, 60000, 60000])
    message = refused(path)
    assert "layer 'huge' (Relu) has 10800000000 elements" in message and "INT_MAX (2147483647)" in message


def test_strict_flags_reject_an_int_loop_beyond_int_max(tmp_path):
    """The strict compile every generated test model goes through (conftest) would catch such a loop."""
    import subprocess

    from codegen_support import STRICT_FLAGS

    source = tmp_path / "loop.c"
    source.write_text("void f(float *y);\nvoid f(float *y) {\n    for (int i = 0; i < 10800000000; ++i) {\n"
                      "        y[0] += 1.0f;\n    }\n}\n")
    result = subprocess.run(["gcc", *STRICT_FLAGS, "-c", str(source), "-o", str(tmp_path / "loop.o")],
                            capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "loop.c:3" in result.stderr


@pytest.mark.parametrize("nodes, inits, needle", [
    ([helper.make_node("Gemm", ["x", "x"], ["y"], name="square")], [],
     "node 'square' (Gemm) needs a constant B (input 1)"),
    ([helper.make_node("MatMul", ["x", "w"], ["y"], name="stack")], [np.ones((2, 4, 3), np.float32)],
     "node 'stack' (MatMul) multiplies [1, 5] by [2, 4, 3]"),
    ([helper.make_node("Gemm", ["x", "w"], ["y"], name="skew", transB=1)], [np.ones((5, 3), np.float32)],
     "node 'skew' (Gemm) multiplies A [1, 5] by B [5, 3] (transA=0, transB=1): inner sizes 5 and 3"),
])
def test_onnx_matrix_products_refused(tmp_path, nodes, inits, needle):
    inits = [numpy_helper.from_array(value, "w") for value in inits]
    assert needle in refused(onnx_graph_file(tmp_path, nodes, ["N", 5], inits, output_shape=["N", 3]))


def test_onnx_checker_message_is_whole(tmp_path):
    path = onnx_graph_file(tmp_path, [helper.make_node("Relu", ["q"], ["y"], name="r")], ["N", 5])
    message = refused(path)
    assert "input 'q' of node: name: r OpType: Relu is not output of any previous nodes" in message
