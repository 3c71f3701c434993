"""Every supported ONNX op and option: generated C (channels-first) matches onnxruntime within 1e-5."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from codegen_support import Net, conv  # noqa: E402

CONV_CASES = {
    "explicit_asymmetric_pads": dict(kernel=(3, 3), pads=[1, 0, 2, 1], strides=[2, 2]),
    "same_upper_stride2": dict(kernel=(3, 3), auto_pad="SAME_UPPER", strides=[2, 2]),
    "same_lower_even_kernel": dict(kernel=(4, 2), auto_pad="SAME_LOWER"),
    "valid_stride_larger_than_kernel": dict(kernel=(2, 2), auto_pad="VALID", strides=[3, 3]),
    "dilations": dict(kernel=(3, 2), dilations=[2, 3], pads=[2, 1, 1, 2]),
    "pointwise_no_bias": dict(kernel=(1, 1), bias=False),
    "kernel_1x3": dict(kernel=(1, 3), pads=[0, 1, 0, 1]),
}


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_conv(check_onnx, case):
    options = dict(CONV_CASES[case])
    kernel, bias = options.pop("kernel"), options.pop("bias", True)
    net = Net((5, 9, 10))
    y = conv(net, "input", 5, 7, kernel, bias=bias, **options)
    check_onnx(net.model(net.op("Relu", [y])))


POOL_CASES = {
    "max_valid": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2])),
    "max_pads": ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2])),
    "max_same_upper": ("MaxPool", dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER")),
    "max_ceil_dilated": ("MaxPool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, dilations=[1, 2])),
    "avg_exclude_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 0])),
    "avg_include_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 0],
                                            count_include_pad=1)),
    "avg_same_lower_include_pad": ("AveragePool", dict(kernel_shape=[2, 3], auto_pad="SAME_LOWER",
                                                       count_include_pad=1)),
    "avg_ceil_exclude_pad": ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
}


@pytest.mark.parametrize("case", POOL_CASES, ids=list(POOL_CASES))
def test_pooling(check_onnx, case):
    op_type, attrs = POOL_CASES[case]
    net = Net((3, 7, 8))
    check_onnx(net.model(net.op(op_type, ["input"], **attrs)))


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling_then_flatten(check_onnx, op_type):
    net = Net((4, 5, 6))
    check_onnx(net.model(net.op("Flatten", [net.op(op_type, ["input"])])))


def test_zoo_style_conv_pool_flatten_gemm(check_onnx):
    """Conv/Pool in NCHW, Flatten in CHW order, Gemm with transB=1 — the layout of exported zoo models."""
    net = Net((3, 12, 12))
    x = net.op("Relu", [conv(net, "input", 3, 6, (5, 5))])
    x = net.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = net.op("Relu", [conv(net, x, 6, 4, (3, 3), pads=[1, 1, 1, 1])])
    x = net.op("Flatten", [x])
    x = net.op("Relu", [net.op("Gemm", [x, net.param((10, 64)), net.param((10,))], transB=1)])
    x = net.op("Gemm", [x, net.param((3, 10)), net.param((3,))], transB=1)
    generated = check_onnx(net.model(net.op("Softmax", [x])))
    manifest = generated.manifest
    assert manifest["inputs"][0] == {"name": "input", "shape": [3, 12, 12], "layout": "CHW", "size": 432,
                                     "dtype": "float32"}
    assert manifest["outputs"][0]["layout"] == "C"


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_alpha_beta(check_onnx, trans_b):
    net = Net((6,))
    weight = net.param((4, 6) if trans_b else (6, 4))
    y = net.op("Gemm", ["input", weight, net.param((1, 4))], transB=trans_b, alpha=0.7, beta=1.3)
    check_onnx(net.model(y))


def test_matmul_add_becomes_a_biased_dense_layer(check_onnx):
    net = Net((6,))
    y = net.op("Add", [net.op("MatMul", ["input", net.param((6, 5))]), net.param((5,))])
    y = net.op("Add", [net.param((3,)), net.op("MatMul", [net.op("Tanh", [y]), net.param((5, 3))])])
    generated = check_onnx(net.model(y))
    ops = [(layer["op"], len(layer["loops"])) for layer in generated.manifest["layers"]]
    assert ops == [("MatMul", 2), ("Add", 0), ("Tanh", 0), ("MatMul", 2), ("Add", 0)]


def test_flatten_after_conv_reads_chw_order(check_onnx):
    net = Net((2, 4, 5))
    x = net.op("Flatten", [conv(net, "input", 2, 3, (2, 2))])
    check_onnx(net.model(net.op("Gemm", [x, net.param((3 * 3 * 4, 4))], transB=0)))


def test_pad_node_and_concat_on_channels(check_onnx):
    net = Net((3, 5, 6))
    pads = net.param(None, values=np.array([0, 0, 1, 2, 0, 0, 2, 0], dtype=np.int64))
    padded = net.op("Pad", ["input", pads])
    valued = net.op("Pad", ["input", pads, net.param(None, values=np.array(0.5, dtype=np.float32))])
    a = conv(net, padded, 3, 4, (3, 3))
    b = conv(net, valued, 3, 2, (3, 3))
    check_onnx(net.model(net.op("Concat", [a, b, a], axis=1)))


def test_batch_norm_activations_and_residual_add(check_onnx):
    net = Net((4, 5, 5))
    x = conv(net, "input", 4, 4, (3, 3), pads=[1, 1, 1, 1])
    bn = net.op("BatchNormalization", [x, net.param((4,)), net.param((4,)), net.param((4,)),
                                       net.param((4,), 0.5, 2.0)], epsilon=1e-3)
    y = net.op("LeakyRelu", [bn], alpha=0.1)
    y = net.op("Add", [y, "input"])
    y = net.op("Sigmoid", [net.op("Mul", [y, net.param((4, 1, 1))])])
    y = net.op("Clip", [y, net.param(None, values=np.array(0.2, dtype=np.float32)),
                        net.param(None, values=np.array(0.7, dtype=np.float32))])
    y = net.op("Elu", [net.op("Sub", [y, net.param((1, 4, 1, 1))])], alpha=0.5)
    check_onnx(net.model(net.op("Identity", [net.op("Dropout", [y])])))


def test_clip_bounds_as_one_element_tensors(check_onnx):
    """ONNX Runtime accepts Clip bounds of shape [1] (Assay's exporter wrote them so); codegen crashed on them."""
    net = Net((6,))
    y = net.op("Clip", ["input", net.param(None, values=np.array([-0.3], dtype=np.float32)),
                        net.param(None, values=np.array([0.4], dtype=np.float32))])
    check_onnx(net.model(y))


def test_reshape_from_a_shape_chain_and_transpose(check_onnx):
    net = Net((3, 4, 2))
    shape = net.op("Shape", ["input"])
    batch = net.op("Gather", [shape, net.param(None, values=np.array([0], dtype=np.int64))], axis=0)
    target = net.op("Concat", [batch, net.param(None, values=np.array([-1], dtype=np.int64))], axis=0)
    flat = net.op("Reshape", ["input", target])
    again = net.op("Reshape", [flat, net.param(None, values=np.array([0, 4, -1], dtype=np.int64))])
    moved = net.op("Transpose", [again], perm=[0, 2, 1])
    axes = net.param(None, values=np.array([1, 3], dtype=np.int64))
    squeezed = net.op("Squeeze", [net.op("Unsqueeze", [moved, axes]), axes])
    scaled = net.op("Div", [squeezed, net.param((4,), 0.5, 2.0)])
    check_onnx(net.model(net.op("Softmax", [scaled])))


def test_softmax_before_opset_13_covers_all_trailing_axes(check_onnx):
    net = Net((2, 3, 4))
    check_onnx(net.model(net.op("Softmax", ["input"], axis=2), opset=11))


@pytest.mark.parametrize("weights", ["c", "incbin"])
def test_gather_with_an_index_table_and_a_scalar_index(check_onnx, weights):
    """Exporters restore Keras (HWC) order after a CHW Flatten with a Gather of constant indices."""
    net = Net((3, 2, 4))
    flat = net.op("Flatten", [conv(net, "input", 3, 2, (1, 2))])
    order = np.arange(12).reshape(2, 3, 2).transpose(1, 2, 0).ravel().astype(np.int64)
    hwc = net.op("Gather", [flat, net.param(None, values=order)], axis=1)
    row = net.op("Gather", ["input", net.param(None, values=np.array(-1, dtype=np.int64))], axis=2)
    both = net.op("Concat", [hwc, net.op("Flatten", [row])], axis=1)
    generated = check_onnx(net.model(both), weights=weights)
    assert generated.manifest["sources"][1] == "net_params.c"  # index tables stay C text in both modes


# --- inputs without a batch axis, and the matrix-product forms exporters write -------------------


def test_unbatched_vector_through_matmul_with_the_matrix_on_the_left(check_onnx):
    """Input [5] (no batch axis): W @ x + b, then x @ W, as PyTorch exports nn.Linear on a 1-D tensor."""
    net = Net((5,), batch=False)
    y = net.op("Tanh", [net.op("Add", [net.op("MatMul", [net.param((4, 5)), "input"]), net.param((4,))])])
    generated = check_onnx(net.model(net.op("MatMul", [y, net.param((4, 3))])))
    assert generated.manifest["inputs"][0]["shape"] == [5]
    assert generated.manifest["outputs"][0]["shape"] == [3]
    assert [layer["op"] for layer in generated.manifest["layers"]] == ["MatMul", "Add", "Tanh", "MatMul"]


def test_unbatched_matrix_input_through_gemm(check_onnx):
    """Input [4, 6]: its first axis (static, not 1) is data, so Gemm multiplies 4 rows."""
    net = Net((4, 6), batch=False)
    generated = check_onnx(net.model(net.op("Gemm", ["input", net.param((6, 3)), net.param((3,))])))
    assert generated.manifest["inputs"][0]["shape"] == [4, 6]
    assert generated.manifest["outputs"][0]["shape"] == [4, 3]


def test_unbatched_image_unsqueezed_for_conv(check_onnx):
    """Input [1, 6, 6] is a CHW image without batch; Unsqueeze adds the axis Conv needs, Squeeze removes it."""
    net = Net((1, 6, 6), batch=False)
    x = net.op("Unsqueeze", ["input", net.param(None, values=np.array([0], dtype=np.int64))])
    x = conv(net, x, 1, 2, (2, 2))
    x = net.op("Squeeze", [x, net.param(None, values=np.array([0], dtype=np.int64))])
    x = net.op("Reshape", [x, net.param(None, values=np.array([-1], dtype=np.int64))])
    generated = check_onnx(net.model(net.op("MatMul", [x, net.param((50, 3))])))
    assert generated.manifest["inputs"][0]["shape"] == [1, 6, 6]
    assert generated.manifest["inputs"][0]["layout"] == "CHW"


def test_matmul_with_the_matrix_on_the_left_of_a_batched_input(check_onnx):
    net = Net((5, 3))
    check_onnx(net.model(net.op("MatMul", [net.param((4, 5)), "input"])))


GEMM_CASES = {
    # name: (input shape, batched, input side, transA, transB, constant shape, C shape or None)
    "transA_transB_bias_1d": ((6, 3), False, 0, 1, 1, (4, 6), (4,)),
    "transA_bias_2d": ((6, 3), False, 0, 1, 0, (6, 4), (3, 4)),
    "transB_scalar_bias": ((6,), True, 0, 0, 1, (4, 6), ()),
    "row_bias_1x4": ((6,), True, 0, 0, 0, (6, 4), (1, 4)),
    "no_bias": ((6,), True, 0, 0, 1, (4, 6), None),
    "constant_A_transA": ((6, 3), False, 1, 1, 0, (6, 4), (4, 1)),
    "constant_A_transB": ((3, 6), False, 1, 0, 1, (4, 6), (3,)),
}


@pytest.mark.parametrize("case", GEMM_CASES, ids=list(GEMM_CASES))
def test_gemm_transposes_alpha_beta_and_bias_shapes(check_onnx, case):
    shape, batch, side, trans_a, trans_b, const_shape, bias = GEMM_CASES[case]
    net = Net(shape, batch=batch)
    operands = ["input", net.param(const_shape)]
    inputs = operands if side == 0 else operands[::-1]
    if bias is not None:
        inputs.append(net.param(bias))
    check_onnx(net.model(net.op("Gemm", inputs, transA=trans_a, transB=trans_b, alpha=0.5, beta=2.0)))


def test_gemm_beta_without_c_does_not_scale_a_later_bias(check_onnx):
    """beta applies to C only: an Add folded into a Gemm without C is added as it is."""
    net = Net((6,))
    y = net.op("Gemm", ["input", net.param((6, 4))], alpha=0.5, beta=2.0)
    check_onnx(net.model(net.op("Add", [y, net.param((4,))])))
