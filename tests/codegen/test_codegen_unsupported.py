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
    (layers.Conv2D(4, 3, groups=2, name="grouped"), "'grouped' (Conv2D) has groups=2"),
    (layers.DepthwiseConv2D(3, name="depthwise"), "'depthwise' (DepthwiseConv2D)"),
    (layers.Dense(3, activation="gelu", name="fancy"), "'fancy' (Dense) uses activation 'gelu'"),
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
    path = onnx_file(tmp_path, helper.make_node("Gelu", ["x"], ["y"], name="smooth"))
    assert "node 'smooth' (Gelu) is not supported" in refused(path)


def test_onnx_grouped_conv_refused(tmp_path):
    weight = numpy_helper.from_array(np.ones((4, 1, 3, 3), np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="dw", group=4)
    path = onnx_file(tmp_path, node, [weight], shape=(4, 6, 6), out_shape=(4, 4, 4), opset=17)
    assert "node 'dw' (Conv) has group=4" in refused(path)


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
