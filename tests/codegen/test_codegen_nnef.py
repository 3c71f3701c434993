"""The NNEF front end on the ONNX layer cases: ONNX -> NNEF (harness writer) -> C, compared with onnxruntime.

Each case of test_codegen_onnx.py that the NNEF writer can express is written
as an NNEF folder, generated from it by ``codegen`` (the NNEF front end, not
the ONNX one) and checked against onnxruntime on the *original* ONNX graph,
so padding, border and layout choices that the NNEF text makes explicit are
checked numerically. Refusals of implicit or unsupported NNEF are checked too.
"""

from __future__ import annotations

import numpy as np
import pytest
from codegen_support import TOLERANCE, draw_inputs, onnx_reference, run_c
from test_codegen_onnx import CONV_CASES, POOL_CASES, Net, conv

import codegen
from harness.models.nnef import export_onnx


@pytest.fixture
def check_nnef(tmp_path):
    def check(model):
        import onnx

        path = tmp_path / "net.onnx"
        onnx.save(model, path)
        export_onnx(path, tmp_path / "net.nnef", "net")
        manifest = codegen.generate(tmp_path / "net.nnef", tmp_path / "c", weights="c")
        assert manifest["generator"]["options"]["frontend"] == "nnef"
        x = draw_inputs(tuple(manifest["inputs"][0]["shape"]))
        error = float(np.max(np.abs(run_c(tmp_path / "c", x) - onnx_reference(path, x))))
        assert error <= TOLERANCE, f"max abs error {error:.3g} > {TOLERANCE:g} against onnxruntime"
        return manifest
    return check


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_conv(check_nnef, case):
    options = dict(CONV_CASES[case])
    kernel, bias = options.pop("kernel"), options.pop("bias", True)
    net = Net((5, 9, 10))
    check_nnef(net.model(net.op("Relu", [conv(net, "input", 5, 7, kernel, bias=bias, **options)])))


@pytest.mark.parametrize("case", POOL_CASES, ids=list(POOL_CASES))
def test_pooling(check_nnef, case):
    op_type, attrs = POOL_CASES[case]
    if attrs.get("ceil_mode") and attrs.get("count_include_pad"):
        pytest.skip("not expressible in NNEF (the writer refuses it)")
    net = Net((3, 7, 8))
    check_nnef(net.model(net.op(op_type, ["input"], **attrs)))


def test_zoo_style_stack_keeps_layer_names(check_nnef):
    net = Net((3, 12, 12))
    x = net.op("Relu", [conv(net, "input", 3, 6, (5, 5))])
    x = net.op("Flatten", [net.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])])
    x = net.op("Gemm", [x, net.param((10, 96)), net.param((10,))], transB=1)
    manifest = check_nnef(net.model(net.op("Softmax", [net.op("Tanh", [x])])))
    assert [layer["name"] for layer in manifest["layers"]][:3] == ["conv_3", "relu_4", "maxpool_5"]


def test_pad_concat_batch_norm_and_elementwise(check_nnef):
    net = Net((4, 5, 6))
    pads = net.param(None, values=np.array([0, 0, 1, 2, 0, 0, 2, 0], dtype=np.int64))
    padded = net.op("Pad", ["input", pads, net.param(None, values=np.array(0.5, dtype=np.float32))])
    a = conv(net, padded, 4, 4, (3, 3))
    bn = net.op("BatchNormalization", [a, net.param((4,)), net.param((4,)), net.param((4,)),
                                       net.param((4,), 0.5, 2.0)], epsilon=1e-3)
    y = net.op("LeakyRelu", [bn], alpha=0.1)
    y = net.op("Sigmoid", [net.op("Mul", [y, net.param((4, 1, 1))])])
    y = net.op("Elu", [net.op("Sub", [y, net.param((1, 4, 1, 1))])], alpha=0.5)
    check_nnef(net.model(net.op("Concat", [y, a], axis=1)))


@pytest.mark.parametrize("op_type", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling_then_flatten(check_nnef, op_type):
    net = Net((4, 5, 6))
    check_nnef(net.model(net.op("Flatten", [net.op(op_type, ["input"])])))


def _folder(tmp_path, body: str):
    folder = tmp_path / "m.nnef"
    folder.mkdir()
    (folder / "graph.nnef").write_text("version 1.0;\ngraph g(x) -> (y)\n{\n    x = external(shape = [1, 2, 4, 4]);\n"
                                       f"    {body}\n}}\n")
    return folder


@pytest.mark.parametrize("body, message", [
    ("y = max_pool(x, size = [1, 1, 2, 2], padding = []);", r"layer 'y' \(max_pool\) has padding = \[\]"),
    ("y = max_pool(x, size = [1, 1, 3, 3], padding = [(0, 0), (0, 0), (1, 1), (1, 1)], border = 'constant');",
     r"layer 'y' \(max_pool\) has border = 'constant'"),
    ("y = sin(x);", r"layer 'y' \(sin\) is not supported"),
    ("y = softmax(x, axes = [0]);", r"layer 'y' \(softmax\) normalises over axes \[0\]"),
])
def test_implicit_or_unsupported_nnef_is_refused_with_the_layer(tmp_path, body, message):
    with pytest.raises(codegen.UnsupportedModel, match=message):
        codegen.generate(_folder(tmp_path, body), tmp_path / "c")
