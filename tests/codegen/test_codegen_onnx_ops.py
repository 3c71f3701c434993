"""The operator set of embedded networks (issue 26): each op through V2, V1 and V3, against onnxruntime within 1e-5.

Every ``check_onnx`` model is generated in the three strategies, compiled
warning-free and run on the host; V1 may refuse a model it cannot express (a
non-sequential graph, an op its layer library lacks) with a line naming
assay-v1. Each model chains several ops so the whole file stays a few models.
"""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from codegen_support import Net, conv, draw_inputs, run_c  # noqa: E402
from onnx import helper  # noqa: E402

import codegen  # noqa: E402


def ints(*values):
    return np.array(values, dtype=np.int64)


def scalar(value):
    return np.array(value, dtype=np.float32)


def layer(manifest, op):
    return next(record for record in manifest["layers"] if record["op"] == op)


def literal_bounds(manifest) -> list[int]:
    """Every V2 loop bound (the WCET flow facts read them): each must be a positive int literal."""
    bounds = [loop["bound"] for record in manifest["layers"] for loop in record["loops"]]
    assert bounds and all(isinstance(bound, int) and bound >= 1 for bound in bounds)
    return bounds


def test_grouped_and_depthwise_convolutions_with_hard_activations(check_onnx, tmp_path):
    """MobileNet's block: grouped conv, ReLU6 (Clip), depthwise (group = C, multiplier 1 and 2), hard-swish."""
    net = Net((4, 9, 8))
    x = conv(net, "input", 2, 6, (3, 3), group=2, pads=[1, 1, 1, 1], strides=[2, 1])
    x = net.op("Clip", [x, net.param(None, values=scalar(0.0)), net.param(None, values=scalar(6.0))])
    x = conv(net, x, 1, 6, (3, 3), group=6, dilations=[1, 2], pads=[1, 2, 1, 2])
    x = net.op("HardSwish", [x])
    x = conv(net, x, 1, 12, (2, 2), group=6, bias=False)
    x = net.op("HardSigmoid", [x], alpha=0.3, beta=0.4)
    generated = check_onnx(net.model(x))
    loops = layer(generated.manifest, "Conv")["loops"]
    assert [loop["bound"] for loop in loops if loop["var"] == "ic"] == [2]  # 4 input channels in 2 groups
    # V1's library reads the group from its layer struct: the manifest gives each call's loop bound
    model = tmp_path / "net.onnx"
    v1 = codegen.generate(model, tmp_path / "v1", strategy="v1")
    bounds = [[loop["bound"] for loop in record["loops"] if loop["bound_expr"] == "layer->k_n"]
              for record in v1["layers"] if record["op"] == "Conv"]
    assert bounds == [[2], [1], [1]]


def test_v3_counts_grouped_and_transposed_products_against_its_limit(tmp_path):
    net = Net((4, 5, 5))
    x = conv(net, "input", 1, 4, (3, 3), group=4)  # 4 * 3 * 3 * 9 = 324 products
    x = net.op("ConvTranspose", [x, net.param((4, 2, 2, 2))], strides=[2, 2])  # 2 * 6 * 6 * 2 * 2 * 4 = 1152
    path = tmp_path / "net.onnx"
    onnx.save(net.model(x), path)
    assert codegen.generate(path, tmp_path / "ok", strategy="v3", max_macs=1476)["generator"]["options"]["macs"] == 1476
    with pytest.raises(codegen.UnsupportedModel, match="1,476 multiply-accumulate statements, above its limit of 1,475"):
        codegen.generate(path, tmp_path / "refused", strategy="v3", max_macs=1475)


TRANSPOSED = {
    "stride2_pads_output_padding": (4, 3, (3, 3), dict(strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])),
    "groups_dilations": (4, 6, (2, 3), dict(group=2, dilations=[2, 1], strides=[1, 2])),
    "output_shape_same_upper": (2, 3, (3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
}


@pytest.mark.parametrize("case", TRANSPOSED)
def test_conv_transpose(check_onnx, case):
    c_in, c_out, kernel, attrs = TRANSPOSED[case]
    net = Net((c_in, 4, 5))
    weight = net.param((c_in, c_out // attrs.get("group", 1), *kernel))
    y = net.op("Relu", [net.op("ConvTranspose", ["input", weight, net.param((c_out,))], **attrs)])
    literal_bounds(check_onnx(net.model(y)).manifest)


def test_one_d_convolutions_and_pooling(check_onnx):
    """Conv, pooling, ConvTranspose and global pooling over [N, C, L]: the 2-D code on a view with H = 1."""
    net = Net((3, 20))
    x = net.op("Relu", [conv(net, "input", 3, 4, (3,), pads=[1, 1])])
    x = net.op("MaxPool", [x], kernel_shape=[2], strides=[2])
    x = net.op("AveragePool", [x], kernel_shape=[3], pads=[1, 1], strides=[2])
    x = net.op("ConvTranspose", [x, net.param((4, 2, 3)), net.param((2,))], strides=[2])
    generated = check_onnx(net.model(net.op("GlobalAveragePool", [x])))
    assert generated.manifest["outputs"][0]["shape"] == [2, 1]


def test_clip_with_the_lower_bound_above_the_upper_gives_the_upper(check_onnx):
    """ONNX Clip is Min(max, Max(x, min)): with min 0.3 > max -0.2 every value is -0.2 (the C gave 0.3 and x)."""
    net = Net((6,))
    y = net.op("Clip", ["input", net.param(None, values=scalar(0.3)), net.param(None, values=scalar(-0.2))])
    generated = check_onnx(net.model(y))
    assert np.all(generated.outputs == np.float32(-0.2))


def test_unary_math_chain(check_onnx):
    """Neg, Abs, Sqrt, Exp, Reciprocal, Log, then PRelu (per-channel slope): V1 refuses only at PRelu."""
    net = Net((3, 4, 5))
    x = "input"
    for op in ("Neg", "Abs", "Sqrt", "Exp", "Reciprocal", "Log"):
        x = net.op(op, [x])
    check_onnx(net.model(net.op("PRelu", [x, net.param((3, 1, 1))])))


def test_softmax_and_log_softmax_on_inner_axes(check_onnx):
    net = Net((3, 4, 5))
    x = net.op("Softmax", ["input"], axis=1)
    generated = check_onnx(net.model(net.op("LogSoftmax", [x], axis=2), opset=13))
    assert layer(generated.manifest, "LogSoftmax")["loops"][0]["bound"] == 3  # the groups before the axis


def test_variadic_elementwise_ops_and_reductions(check_onnx):
    net = Net((3, 4, 5))
    relu = net.op("Relu", ["input"])
    x = net.op("Sum", ["input", relu, net.param((5,))])
    x = net.op("Max", [x, net.param((4, 1)), relu])
    x = net.op("Min", [x, "input"])
    x = net.op("Mean", [x, relu, net.param((3, 1, 1))])
    axes = net.param(None, values=ints(3))
    reduced = [net.op(op, [x, axes], keepdims=1) for op in ("ReduceMean", "ReduceMax", "ReduceSum", "ReduceL2")]
    x = net.op("Concat", reduced, axis=3)
    generated = check_onnx(net.model(net.op("ReduceSum", [x, net.param(None, values=ints(1))], keepdims=0), opset=18))
    literal_bounds(generated.manifest)


def test_a_per_channel_gate_broadcast_against_the_map(check_onnx):
    """Squeeze-and-excite as the Keras export writes it (issue 43): a [N, C, 1, 1] gate (GlobalAveragePool, 1 x 1
    convolutions, HardSigmoid or Sigmoid) times, plus and minus the [N, C, H, W] map, in both operand orders."""
    net = Net((4, 5, 6))
    x = net.op("HardSwish", [conv(net, "input", 4, 4, (3, 3), pads=[1, 1, 1, 1])])
    gate = conv(net, net.op("Relu", [conv(net, net.op("GlobalAveragePool", [x]), 4, 2, (1, 1))]), 2, 4, (1, 1))
    x = net.op("Mul", [x, net.op("HardSigmoid", [gate], alpha=1.0 / 6.0, beta=0.5)])
    gate = net.op("Sigmoid", [conv(net, net.op("GlobalAveragePool", [x]), 4, 4, (1, 1))])
    x = net.op("Concat", [net.op("Mul", [gate, x]), net.op("Add", [gate, x]), net.op("Sub", [gate, x]),
                          net.op("Sub", [x, gate])], axis=1)
    literal_bounds(check_onnx(net.model(x)).manifest)


def test_slice_split_and_concat_on_any_axis(check_onnx):
    net = Net((6, 4, 5))
    x = net.op("Slice", ["input", net.param(None, values=ints(-1, 1)), net.param(None, values=ints(-6, 4)),
                         net.param(None, values=ints(3, 2)), net.param(None, values=ints(-2, 1))])  # [N, 6, 3, 3]
    first = helper.make_node("Split", [x, net.param(None, values=ints(2, 4))], ["a", "b"], axis=1, name="split")
    net.nodes.append(first)
    y = net.op("Concat", ["b", "a"], axis=1)
    y = net.op("Concat", [y, net.op("Neg", [y]), net.param((1, 6, 3, 3))], axis=2)
    check_onnx(net.model(y))


def test_resize_nearest_and_linear_then_lrn(check_onnx):
    net = Net((3, 4, 5))
    x = net.op("Resize", ["input", "", net.param(None, values=np.array([1, 1, 2, 2], dtype=np.float32))],
               mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    x = net.op("Resize", [x, "", "", net.param(None, values=ints(1, 3, 5, 7))], mode="linear")
    generated = check_onnx(net.model(net.op("LRN", [x], size=3, alpha=0.01, beta=0.6, bias=1.5)))
    assert sorted(set(literal_bounds(generated.manifest))) == [3, 5, 7, 8, 10]  # (3, 8, 10), (3, 5, 7), j < 3


def floats(*values):
    return np.array(values, dtype=np.float32)


def test_resize_cubic_and_antialias_filters(check_onnx):
    """Cubic (A = -0.5, exclude_outside) upsampling, then linear and cubic antialiased downsampling: K = 4 taps
    and the widened filters' supports, all as tables; V2 and V3 against ONNX Runtime."""
    net = Net((2, 6, 7))
    x = net.op("Resize", ["input", "", net.param(None, values=floats(1, 1, 1.5, 2))], mode="cubic",
               cubic_coeff_a=-0.5, exclude_outside=1)
    x = net.op("Resize", [x, "", "", net.param(None, values=ints(1, 2, 5, 6))], mode="linear", antialias=1)
    x = net.op("Resize", [x, "", net.param(None, values=floats(1, 1, 0.6, 0.7))], mode="cubic", antialias=1)
    generated = check_onnx(net.model(x, opset=18))
    resizes = [record for record in generated.manifest["layers"] if record["op"] == "Resize"]
    assert len(resizes) == 3 and all(isinstance(loop["bound"], int) for r in resizes for loop in r["loops"])


def test_v3_counts_resize_taps_against_its_limit(tmp_path):
    """Cubic 6x7 -> 9x14 (2 channels): 4 x 4 taps per output, 2 * 9 * 14 * 16 = 4032 weighted terms; a nearest
    copy adds none."""
    net = Net((2, 6, 7))
    x = net.op("Resize", ["input", "", net.param(None, values=floats(1, 1, 1.5, 2))], mode="cubic")
    x = net.op("Resize", [x, "", net.param(None, values=floats(1, 1, 2, 2))], mode="nearest")
    path = tmp_path / "net.onnx"
    onnx.save(net.model(x), path)
    assert codegen.generate(path, tmp_path / "ok", strategy="v3", max_macs=4032)["generator"]["options"]["macs"] == 4032
    with pytest.raises(codegen.UnsupportedModel, match="4,032 multiply-accumulate statements, above its limit of 4,031"):
        codegen.generate(path, tmp_path / "refused", strategy="v3", max_macs=4031)


def test_resize_crop_region_symmetric_pixels_and_aspect_ratio(check_onnx):
    """tf_crop_and_resize with a region partly outside the input (the extrapolation value there),
    half_pixel_symmetric, nearest with keep_aspect_ratio_policy over axes (3, 2), cubic asymmetric."""
    net = Net((2, 5, 6))
    region = floats(0, 0, -0.2, 0.3, 1, 1, 0.8, 1.4)
    x = net.op("Resize", ["input", net.param(None, values=region), "", net.param(None, values=ints(1, 2, 4, 7))],
               mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)
    x = net.op("Resize", [x, "", net.param(None, values=floats(1, 1, 1.6, 0.7))], mode="linear",
               coordinate_transformation_mode="half_pixel_symmetric")
    x = net.op("Resize", [x, "", "", net.param(None, values=ints(9, 5))], mode="nearest", axes=[3, 2],
               keep_aspect_ratio_policy="not_larger")
    x = net.op("Resize", [x, "", net.param(None, values=floats(1, 1, 2, 1.5))], mode="cubic",
               coordinate_transformation_mode="asymmetric")
    generated = check_onnx(net.model(x, opset=18))
    assert (generated.outputs == np.float32(7.5)).any()  # some outputs lie outside the region


@pytest.mark.parametrize("op_type, attrs, message", [
    ("Resize", dict(coordinate_transformation_mode="tf_crop_and_resize"), "has a roi of 0 values for 4 axes"),
    ("Conv", dict(group=3), "has group=3 with weights of 2 input channels per group for 4 input and 4 output"),
])
def test_unsupported_options_are_refused_with_their_name(tmp_path, op_type, attrs, message):
    net = Net((4, 5, 5))
    if op_type == "Conv":
        y = conv(net, "input", 2, 4, (1, 1), **attrs)
    else:
        y = net.op("Resize", ["input", "", net.param(None, values=np.array([1, 1, 2, 2], dtype=np.float32))], **attrs)
    path = tmp_path / "net.onnx"
    onnx.save(net.model(y), path)
    with pytest.raises(codegen.UnsupportedModel, match=message):
        codegen.generate(path, tmp_path / "out")


def test_split_outputs_feed_separate_consumers_without_copies(tmp_path):
    """Split is one Slice node per output; the manifest lists each under the Split's name."""
    net = Net((4, 3), batch=False)
    net.nodes.append(helper.make_node("Split", ["input"], ["a", "b"], axis=0, num_outputs=2, name="split"))
    path = tmp_path / "net.onnx"
    onnx.save(net.model(net.op("Sub", ["a", "b"]), opset=18), path)
    manifest = codegen.generate(path, tmp_path / "out")
    assert [record["name"] for record in manifest["layers"]] == ["split:0", "split:1", "sub_1"]
    x = draw_inputs((4, 3))
    np.testing.assert_array_equal(run_c(tmp_path / "out", x), (x[:, :2] - x[:, 2:]).reshape(len(x), -1))


def test_v1_refuses_tensors_of_rank_above_3_instead_of_computing_them_wrong(tmp_path):
    """Its struct has three axes: a rank-4 Transpose (SpaceToDepth as exported) gave wrong values before."""
    net = Net((2, 2, 3), batch=False)
    x = net.op("Reshape", ["input", net.param(None, values=ints(2, 1, 2, 3))])
    path = tmp_path / "net.onnx"
    x = net.op("Transpose", [x], perm=[3, 1, 0, 2])
    onnx.save(net.model(net.op("Reshape", [x, net.param(None, values=ints(3, 2, 2))])), path)
    with pytest.raises(codegen.UnsupportedModel, match="'transpose_3' .* rank above 3; .* use assay-v2 or assay-v3"):
        codegen.generate(path, tmp_path / "v1", strategy="v1")
    x = draw_inputs((2, 2, 3))
    codegen.generate(path, tmp_path / "v2")
    expected = x.reshape(len(x), 2, 1, 2, 3).transpose(0, 4, 2, 1, 3).reshape(len(x), -1)
    np.testing.assert_array_equal(run_c(tmp_path / "v2", x), expected)


def test_rank_4_input_without_a_batch_axis(check_onnx):
    """[2, 3, 4, 5] (static, not 1 first: no batch axis) is a rank-4 tensor (layout CDHW, as harness.tensors
    names it); the ops that index by position take it (V1, whose struct has three axes, refuses)."""
    net = Net((2, 3, 4, 5), batch=False)
    x = net.op("Transpose", [net.op("Softmax", ["input"], axis=0)], perm=[0, 2, 1, 3])
    mean = net.op("ReduceMean", [x, net.param(None, values=ints(0, 3))], keepdims=1)
    generated = check_onnx(net.model(net.op("Sub", [x, mean]), opset=18))
    assert generated.manifest["inputs"][0]["shape"] == [2, 3, 4, 5]
    assert generated.manifest["outputs"][0]["shape"] == [2, 4, 3, 5] and generated.manifest["inputs"][0]["layout"] == "CDHW"


def test_matmul_by_a_stack_of_matrices_broadcasts_the_leading_axes(check_onnx):
    """x [N, 1, 3, 4, 5] @ W [2, 1, 5, 6] -> [N, 2, 3, 4, 6] (numpy broadcasting); V1 refuses the rank-4 tensors."""
    net = Net((3, 4, 5))
    check_onnx(net.model(net.op("MatMul", [net.op("Unsqueeze", ["input", net.param(None, values=ints(1))]),
                                           net.param((2, 1, 5, 6))])))
