"""Rank-4 samples (issue 26): 3-D pooling and ConvTranspose on [C, D, H, W] volumes, numpy-matmul products by
constant stacks and vectors, views of rank-4 tensors without a batch axis (ONNX, and a Keras rank-4 input).

Each model goes through V2 and V3 (and V1, which refuses rank-4 tensors with a line naming assay-v1), compiled
warning-free and run on the host against onnxruntime.
"""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from codegen_support import Net  # noqa: E402

import codegen  # noqa: E402


def ints(*values):
    return np.array(values, dtype=np.int64)


def loops(manifest, op):
    """(var, bound) of the loops of the first layer of ``op``; every bound a positive int literal (flow facts)."""
    record = next(record for record in manifest["layers"] if record["op"] == op)
    found = [(loop["var"], loop["bound"]) for loop in record["loops"]]
    assert found and all(isinstance(bound, int) and bound >= 1 for _, bound in found)
    return found


def test_three_d_pooling_with_dilations_pads_and_ceil_mode(check_onnx):
    """MaxPool (dilations, pads, ceil_mode), AveragePool without and with the padding counted, on [2, 5, 6, 7]."""
    net = Net((2, 5, 6, 7))
    x = net.op("MaxPool", ["input"], kernel_shape=[2, 2, 3], dilations=[2, 1, 1], pads=[1, 0, 1, 0, 1, 1],
               strides=[1, 2, 2], ceil_mode=1)
    x = net.op("AveragePool", [x], kernel_shape=[2, 2, 2], pads=[1, 1, 0, 0, 1, 1], strides=[2, 1, 1])
    x = net.op("AveragePool", [x], kernel_shape=[3, 2, 2], pads=[1, 0, 1, 1, 1, 0], strides=[1, 2, 2], ceil_mode=1,
               count_include_pad=1)  # the last W window overhangs the padding: it divides by 2 * 2 * 3 cells
    generated = check_onnx(net.model(x, opset=19))
    assert generated.manifest["outputs"][0]["layout"] == "CDHW"
    assert [bound for var, bound in loops(generated.manifest, "MaxPool") if var.startswith("k")] == [2, 2, 3]


def test_average_pool_counting_its_padding_with_ceil_mode_overhang(check_onnx, tmp_path):
    """The divisor is the cells inside the padded input (ONNX), not the window; V1's struct cannot say so."""
    net = Net((2, 7, 6))
    x = net.op("AveragePool", ["input"], kernel_shape=[3, 2], pads=[1, 1, 1, 0], strides=[2, 2], ceil_mode=1,
               count_include_pad=1)
    model = net.model(x)
    check_onnx(model)
    onnx.save(model, tmp_path / "pool.onnx")
    with pytest.raises(codegen.UnsupportedModel, match="'averagepool_1' .*count_include_pad.*assay-v1"):
        codegen.generate(tmp_path / "pool.onnx", tmp_path / "v1", strategy="v1")


def test_three_d_pooling_in_v1_is_refused_with_its_reason(tmp_path):
    net = Net((1, 4, 4, 4))
    path = tmp_path / "net.onnx"
    onnx.save(net.model(net.op("MaxPool", ["input"], kernel_shape=[2, 2, 2])), path)
    with pytest.raises(codegen.UnsupportedModel, match="'maxpool_1' \\(MaxPool\\) has a tensor of rank above 3"):
        codegen.generate(path, tmp_path / "v1", strategy="v1")


@pytest.mark.parametrize("attrs", [dict(strides=[2, 1, 2], pads=[1, 0, 0, 0, 1, 1], output_padding=[1, 0, 0]),
                                   dict(group=2, dilations=[1, 2, 1])])
def test_three_d_conv_transpose(check_onnx, attrs):
    net = Net((4, 3, 4, 3))
    weight = net.param((4, 6 // attrs.get("group", 1), 2, 3, 2))
    generated = check_onnx(net.model(net.op("ConvTranspose", ["input", weight, net.param((6,))], **attrs)))
    assert [var for var, _ in loops(generated.manifest, "ConvTranspose")][-3:] == ["kd", "kh", "kw"]


def test_matmul_by_a_stack_and_by_a_vector_as_numpy(check_onnx):
    """[N, 2, 3, 4] @ W [3, 4, 5] (leading axes broadcast), then @ v [5] (promoted to [5, 1], squeezed)."""
    net = Net((2, 3, 4))
    x = net.op("MatMul", [net.op("Unsqueeze", ["input", net.param(None, values=ints(2))]), net.param((3, 4, 5))])
    generated = check_onnx(net.model(net.op("MatMul", [x, net.param((5,))])))
    assert generated.manifest["outputs"][0]["shape"] == [2, 3, 3]


def test_matmul_of_a_vector_by_a_stack(check_onnx):
    """x [4] (no batch axis) @ W [2, 4, 3]: x promoted to [1, 4], the result [2, 1, 3] squeezed to [2, 3]."""
    net = Net((4,), batch=False)
    generated = check_onnx(net.model(net.op("MatMul", ["input", net.param((2, 4, 3))])))
    assert generated.manifest["outputs"][0]["shape"] == [2, 3]


def test_views_of_rank_4_tensors_without_a_batch_axis(check_onnx):
    """Flatten and Reshape of a [2, 3, 4, 5] sample: views, no copies, except the output's own."""
    net = Net((2, 3, 4, 5), batch=False)
    x = net.op("Reshape", [net.op("Relu", ["input"]), net.param(None, values=ints(0, 3, -1, 2))])
    x = net.op("Flatten", [net.op("Sigmoid", [x])], axis=-2)
    generated = check_onnx(net.model(net.op("Reshape", [x, net.param(None, values=ints(3, 1, 20, 2))])))
    assert generated.manifest["outputs"][0]["shape"] == [3, 1, 20, 2]
    assert [record["op"] for record in generated.manifest["layers"]].count("Reshape") == 2


def test_keras_rank_4_input(check_keras):
    """Keras takes rank-4 samples too ([D, H, W, C], layout DHWC): a Flatten view then a Dense."""
    import keras

    inputs = keras.Input((2, 3, 4, 5))
    model = keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Flatten()(keras.layers.ReLU()(inputs))))
    generated = check_keras(model, name="rank4")
    assert generated.manifest["inputs"][0]["layout"] == "DHWC"
