"""The float64 reference: Keras itself in float64 for a Keras model; for an ONNX model its graph converted to
double, run by ONNX Runtime or the numpy evaluator.

The expected numbers are computed here in numpy float64 from the Keras weights,
in Keras's own (HWC) layout with explicit loops, independent of the module's
layout handling and of its windowed-view convolution.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness import references
from harness.models import zoo
from harness.errors import ModelError
from harness.references import float64
from harness.models.tf_runtime import keras, save_keras

RELATIVE = 1e-12


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "zoo-cache"


def _inputs(model, n=16, seed=0):
    return np.random.default_rng(seed).uniform(*model.input_domain, (n, *model.input_shape)).astype(np.float32)


def _randomize(keras_model, seed):
    rng = np.random.default_rng(seed)
    for layer in keras_model.layers:
        layer.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in layer.get_weights()])
    return keras_model


def _user_model(keras_model, tmp_path, name):
    save_keras(keras_model, tmp_path / f"{name}.keras")
    return zoo.load(tmp_path / f"{name}.keras", cache_dir=tmp_path / "cache")


def _weights(keras_model):
    return [[np.asarray(w, np.float64) for w in layer.get_weights()] for layer in keras_model.layers]


def _assert_close(got, expected):
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=RELATIVE, atol=RELATIVE * np.max(np.abs(expected)))


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


# --- registry -------------------------------------------------------------------------------


def test_registered_as_float64(zoo_cache):
    model = zoo.load("acas-reg50", cache_dir=zoo_cache)
    reference = references.get("float64")
    assert reference.name == "float64" and isinstance(reference, references.Reference)
    assert reference.supports(model)
    assert reference.supports(dataclasses.replace(model, files={"keras": model.files["keras"]}))
    assert reference.supports(dataclasses.replace(model, files={"onnx": model.files["onnx"]}))
    assert not reference.supports(dataclasses.replace(model, files={}))


# --- float64 against numpy float64 ----------------------------------------------------------


@pytest.fixture(scope="module")
def dense(tmp_path_factory):
    k = keras()
    keras_model = _randomize(k.Sequential([k.Input((6,)), k.layers.Dense(12, activation="tanh"),
                                           k.layers.Dense(9, activation="relu"), k.layers.Dense(4, activation="softmax")]),
                             seed=3)
    return keras_model, _user_model(keras_model, tmp_path_factory.mktemp("dense"), "dense")


def test_small_dense_net_matches_numpy_float64(dense):
    keras_model, model = dense
    x = _inputs(model, 32)
    (w1, b1), (w2, b2), (w3, b3) = _weights(keras_model)
    h = np.tanh(x.astype(np.float64) @ w1 + b1)
    h = np.maximum(h @ w2 + b2, 0)
    expected = _softmax(h @ w3 + b3)
    assert float64.engine(model) == float64.KERAS  # the Keras model itself, not Assay's export
    onnx_only = dataclasses.replace(model, files={"onnx": model.files["onnx"]})
    _assert_close(references.get("float64").run(onnx_only, x), expected)
    assert float64.engine(onnx_only) == float64.ONNXRUNTIME
    _assert_close(references.get("float64").run(model, x), expected)


def _conv_hwc(x, kernel, bias, pad):
    """'same'-style conv on (N, H, W, C) with explicit loops over the kernel taps."""
    kh, kw, _, cout = kernel.shape
    padded = np.pad(x, [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    h, w = padded.shape[1] - kh + 1, padded.shape[2] - kw + 1
    out = np.zeros((len(x), h, w, cout))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,cm->nhwm", padded[:, i : i + h, j : j + w, :], kernel[i, j])
    return out + bias


def _pool_hwc(x, size, reduce):
    n, h, w, c = x.shape
    blocks = x[:, : h // size * size, : w // size * size].reshape(n, h // size, size, w // size, size, c)
    return reduce(blocks, axis=(2, 4))


@pytest.fixture(scope="module")
def conv(tmp_path_factory):
    k = keras()
    L = k.layers
    keras_model = _randomize(k.Sequential([
        k.Input((9, 8, 2)), L.Conv2D(4, 3, padding="same", activation="tanh"), L.AveragePooling2D(2),
        L.Conv2D(3, 3, activation="relu"), L.MaxPooling2D(2), L.Flatten(), L.Dense(5, activation="softmax")]), seed=5)
    return keras_model, _user_model(keras_model, tmp_path_factory.mktemp("conv"), "conv")


def test_small_conv_net_matches_numpy_float64(conv):
    keras_model, model = conv
    x = _inputs(model, 24)
    (k1, b1), _, (k2, b2), _, _, (w3, b3) = _weights(keras_model)
    h = np.tanh(_conv_hwc(x.astype(np.float64), k1, b1, pad=1))
    h = _pool_hwc(h, 2, np.mean)
    h = np.maximum(_conv_hwc(h, k2, b2, pad=0), 0)
    h = _pool_hwc(h, 2, np.max)
    expected = _softmax(h.reshape(len(x), -1) @ w3 + b3)  # Keras flattens HWC
    assert float64.engine(model) == float64.KERAS
    _assert_close(references.get("float64").run(model, x), expected)
    onnx_only = dataclasses.replace(model, files={"onnx": model.files["onnx"]})
    assert float64.engine(onnx_only) == float64.NUMPY  # onnxruntime has no double Conv
    _assert_close(references.get("float64").run(onnx_only, x), expected)


def test_image_outputs_in_canonical_layout(tmp_path):
    k = keras()
    keras_model = _randomize(k.Sequential([k.Input((5, 4, 2)), k.layers.Conv2D(3, 3, padding="same")]), seed=7)
    model = _user_model(keras_model, tmp_path, "image")
    assert model.output_layout == "HWC" and model.layouts_of("onnx") == ("CHW", "CHW")
    x = _inputs(model, 4)
    (kernel, bias), = _weights(keras_model)
    _assert_close(references.get("float64").run(model, x), _conv_hwc(x.astype(np.float64), kernel, bias, pad=1))


def test_numpy_evaluator_agrees_with_onnxruntime_double(dense):
    _, model = dense
    proto = float64.to_float64(onnx.load(str(model.file("onnx"))))
    x = _inputs(model, 8).astype(np.float64)
    by_numpy = float64.Evaluator(proto).run({"input": x})[0]
    _assert_close(by_numpy, references.get("float64").run(model, x.astype(np.float32)))


# --- the default zoo ------------------------------------------------------------------------


@pytest.mark.parametrize("name", zoo.names("default"))
def test_zoo_model_agrees_with_onnxruntime_float32(name, zoo_cache):
    model = zoo.load(name, cache_dir=zoo_cache)
    x = _inputs(model, 64)
    got = references.get("float64").run(model, x)
    assert got.dtype == np.float64 and got.shape == (len(x), *model.output_shape)
    assert np.max(np.abs(got - references.get("onnxruntime").run(model, x))) <= model.tolerance
    assert float64.engine(model) == float64.KERAS
    # the export's graph in float64 is the same function, to float64 rounding
    assert np.max(np.abs(got - float64.graph_outputs(model, x))) <= 1e-12
    convolutional = ("lenet5", "cifarnet", "lenet5-split", "inception-mini")
    onnx_only = dataclasses.replace(model, files={"onnx": model.files["onnx"]})
    assert float64.engine(onnx_only) == (float64.NUMPY if name in convolutional else float64.ONNXRUNTIME)


def test_batches_and_edge_cases(zoo_cache, tmp_path):
    lenet5 = zoo.load("lenet5", cache_dir=zoo_cache)
    reference = references.get("float64")
    x = _inputs(lenet5, 300)  # more than two batches
    whole = reference.run(lenet5, x)
    assert whole.tobytes() == reference.run(lenet5, x.copy()).tobytes()
    assert np.max(np.abs(whole[:5] - reference.run(lenet5, x[:5]))) <= 1e-15
    assert reference.run(lenet5, np.zeros((0, 28, 28, 1), np.float32)).shape == (0, 10)
    with pytest.raises(ValueError, match=r"inputs have shape \(1, 28, 28\)"):
        reference.run(lenet5, np.zeros((2, 1, 28, 28), np.float32))
    proto = onnx.load(str(lenet5.file("onnx")))
    for value in (proto.graph.input[0], proto.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 4
    onnx.save(proto, str(tmp_path / "fixed.onnx"))
    fixed = dataclasses.replace(lenet5, files={"onnx": tmp_path / "fixed.onnx"})
    assert np.max(np.abs(reference.run(fixed, x[:10]) - whole[:10])) <= 1e-15


# --- the conversion --------------------------------------------------------------------------


def _mixed_graph():
    """Float tensors in every place the conversion must reach, and an int64 one it must leave alone."""
    nodes = [
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Constant", [], ["row"], value=numpy_helper.from_array(np.array([1, 2, 3], np.float32))),
        helper.make_node("ConstantOfShape", ["shape"], ["ones"],
                         value=numpy_helper.from_array(np.array([1.0], np.float32))),
        helper.make_node("Cast", ["count"], ["count_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x", "half"], ["a"]),
        helper.make_node("Add", ["a", "row"], ["b"]),
        helper.make_node("Add", ["b", "ones"], ["c"]),
        helper.make_node("Add", ["c", "count_f"], ["d"]),
        helper.make_node("Gemm", ["d", "w"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(np.array([1, 3], np.int64), "shape"),
         numpy_helper.from_array(np.array([7], np.int64), "count"),
         numpy_helper.from_array(np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], np.float32), "w")],
        value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_conversion_reaches_every_float():
    proto = _mixed_graph()
    converted = float64.to_float64(proto)
    onnx.checker.check_model(converted, full_check=True)
    assert proto.graph.initializer[2].data_type == TensorProto.FLOAT  # the original is untouched
    graph = converted.graph
    assert [t.data_type for t in graph.initializer] == [TensorProto.INT64, TensorProto.INT64, TensorProto.DOUBLE]
    assert {v.type.tensor_type.elem_type for v in (*graph.input, *graph.output, *graph.value_info)} \
        == {TensorProto.DOUBLE}
    constant, row, fill, cast = graph.node[:4]
    assert [a.name for a in constant.attribute] == ["value"] and constant.attribute[0].t.data_type == TensorProto.DOUBLE
    assert row.attribute[0].t.data_type == fill.attribute[0].t.data_type == TensorProto.DOUBLE
    assert cast.attribute[0].i == TensorProto.DOUBLE
    # The float32 weight 0.1 is widened exactly, not re-read as the double 0.1.
    assert numpy_helper.to_array(graph.initializer[2])[0, 0] == float(np.float32(0.1))

    x = np.array([[1.0, -2.0, 0.25]])
    w = numpy_helper.to_array(graph.initializer[2])
    expected = (x * 0.5 + [1, 2, 3] + 1 + 7) @ w
    session = float64._ort_session(converted, "mixed")
    np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, rtol=RELATIVE)
    np.testing.assert_allclose(float64.Evaluator(converted).run({"x": x})[0], expected, rtol=RELATIVE)


def test_unknown_op_is_a_model_error():
    graph = helper.make_graph([helper.make_node("Erf", ["x"], ["y"])], "erf",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1])])
    with pytest.raises(ModelError, match="runs Erf"):
        float64.Evaluator(helper.make_model(graph))


# --- the numpy evaluator, op by op ------------------------------------------------------------
# Against ONNX Runtime in double where it has the kernel, against onnx.reference otherwise.

_R = np.random.default_rng(11)
_X4 = _R.standard_normal((2, 4, 7, 6))
_X2 = _R.standard_normal((3, 5))
_CASES = {
    "Conv-groups-stride-dilation-pads": ("Conv", _X4, dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2],
                                                           pads=[1, 0, 2, 1], group=2),
                                         [_R.standard_normal((6, 2, 3, 2)), _R.standard_normal(6)]),
    "Conv-1x1-no-bias": ("Conv", _X4, dict(kernel_shape=[1, 1]), [_R.standard_normal((3, 4, 1, 1))]),
    "AveragePool-exclude-pad": ("AveragePool", _X4, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                         count_include_pad=0), []),
    "AveragePool-include-pad": ("AveragePool", _X4, dict(kernel_shape=[2, 3], pads=[0, 1, 1, 1],
                                                         count_include_pad=1), []),
    "MaxPool-pads": ("MaxPool", _X4 - 5, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), []),
    "AveragePool-ceil-mode": ("AveragePool", _X4, dict(kernel_shape=[3, 2], strides=[2, 2], ceil_mode=1), []),
    "AveragePool-ceil-mode-pads": ("AveragePool", _X4, dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1],
                                                            ceil_mode=1), []),
    "AveragePool-ceil-mode-include-pad": ("AveragePool", _X4, dict(kernel_shape=[3, 3], strides=[2, 2],
                                                                   pads=[1, 1, 1, 1], ceil_mode=1,
                                                                   count_include_pad=1), []),
    "AveragePool-same-upper": ("AveragePool", _X4, dict(kernel_shape=[2, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
                               []),
    "AveragePool-same-lower": ("AveragePool", _X4, dict(kernel_shape=[2, 3], strides=[1, 2], auto_pad="SAME_LOWER"),
                               []),
    "MaxPool-ceil-mode": ("MaxPool", _X4, dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1), []),
    "MaxPool-same-upper": ("MaxPool", _X4, dict(kernel_shape=[3, 2], strides=[2, 2], auto_pad="SAME_UPPER"), []),
    "GlobalAveragePool": ("GlobalAveragePool", _X4, {}, []),
    "GlobalMaxPool": ("GlobalMaxPool", _X4, {}, []),
    "Pad": ("Pad", _X4, dict(mode="constant"), [np.array([0, 0, 1, 2, 0, 0, 2, 0]), np.array(0.5)]),
    "BatchNormalization": ("BatchNormalization", _X4, dict(epsilon=1e-3),
                           [_R.standard_normal(4), _R.standard_normal(4), _R.standard_normal(4),
                            _R.uniform(0.5, 1.5, 4)]),
    "Gemm": ("Gemm", _X2, dict(transB=1, alpha=0.5, beta=2.0), [_R.standard_normal((4, 5)), _R.standard_normal(4)]),
    "MatMul": ("MatMul", _X2, {}, [_R.standard_normal((5, 2))]),
    "Softmax": ("Softmax", _X4, dict(axis=1), []),
    "Flatten": ("Flatten", _X4, dict(axis=2), []),
    "Reshape": ("Reshape", _X4, {}, [np.array([0, -1, 6])]),
    "Transpose": ("Transpose", _X4, dict(perm=[0, 2, 3, 1]), []),
    "Gather": ("Gather", _X2, dict(axis=1), [np.array([4, 0, 2])]),
    "Concat": ("Concat", _X2, dict(axis=0), [_X2 * 2]),
    "Clip": ("Clip", _X2, {}, [np.array(-0.3), np.array(0.6)]),
    "Sigmoid": ("Sigmoid", _X2 * 50, {}, []),
    "Tanh": ("Tanh", _X2, {}, []),
    "Relu": ("Relu", _X2, {}, []),
    "LeakyRelu": ("LeakyRelu", _X2, dict(alpha=0.2), []),
    "Elu": ("Elu", _X2, dict(alpha=1.5), []),
    "Selu": ("Selu", _X2, {}, []),
    "HardSigmoid": ("HardSigmoid", _X2 * 4, dict(alpha=1 / 6, beta=0.5), []),
    "Softplus": ("Softplus", _X2 * 30, {}, []),
    "Softsign": ("Softsign", _X2, {}, []),
    "Exp": ("Exp", _X2, {}, []),
    "Sub": ("Sub", _X2, {}, [_X2[::-1].copy()]),
    "Mul": ("Mul", _X2, {}, [_X2[::-1].copy()]),
    "Sum": ("Sum", _X2, {}, [_X2[::-1].copy(), _X2 * 3]),
    "Mean": ("Mean", _X2, {}, [_X2[::-1].copy(), _X2 * 3]),
    "Max": ("Max", _X2, {}, [_X2[::-1].copy()]),
    "Min": ("Min", _X2, {}, [_X2[::-1].copy()]),
}


@pytest.mark.parametrize("case", sorted(_CASES))
def test_numpy_evaluator_op(case):
    from onnx.reference import ReferenceEvaluator

    op, x, attrs, constants = _CASES[case]
    names = [f"c{i}" for i in range(len(constants))]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", *names], ["y"], **attrs)], case,
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(c.astype(np.int64 if c.dtype.kind == "i" else np.float64), n)
         for c, n in zip(constants, names)])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    got = float64.Evaluator(proto).run({"x": x})[0]
    session = float64._ort_session(proto, case)
    expected = (session.run(None, {"x": x}) if session is not None else ReferenceEvaluator(proto).run(None, {"x": x}))[0]
    assert got.dtype == expected.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=RELATIVE, atol=RELATIVE * np.max(np.abs(expected)))


# --- models without a batch axis, and Keras in float64 -----------------------------------------------


def _unbatched_file(tmp_path, op: str, name: str):
    """A [5] -> [3] graph without a batch axis: MatMul, Add, then ``op`` (Relu: onnxruntime has a double kernel;
    Softsign: it has none, so the numpy evaluator runs it)."""
    rng = np.random.default_rng(3)
    w, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]),
         helper.make_node(op, ["z"], ["y"])], name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    z = lambda x: x.astype(np.float64) @ w.astype(np.float64) + b  # noqa: E731
    return path, (lambda x: np.maximum(z(x), 0)) if op == "Relu" else (lambda x: z(x) / (1 + np.abs(z(x))))


@pytest.mark.parametrize("op, engine", [("Relu", float64.ONNXRUNTIME), ("Softsign", float64.NUMPY)])
def test_a_graph_without_batch_axis_runs_one_input_at_a_time(tmp_path, op, engine):
    path, exact = _unbatched_file(tmp_path, op, f"unbatched_{op.lower()}")
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert model.input_shape == (5,)
    x = _inputs(model, 7)
    got = references.get("float64").run(model, x)  # was: "Invalid rank for input: x Got: 2 Expected: 1"
    assert float64.engine(model) == engine and got.shape == (7, 3)
    _assert_close(got, exact(x))


def test_keras_operation_nodes_are_evaluated_in_float64(tmp_path):
    """MobileNetV3's hard-sigmoid as keras.applications writes it: ``x + 3.0`` and ``* (1/6)`` are Keras 3
    operation nodes, which the arbiter evaluates from the Keras model itself (never from an export)."""
    k = keras()
    inp = k.Input((4,))
    dense = k.layers.Dense(8)
    out = k.layers.Dense(3)(k.layers.ReLU(6.0)(dense(inp) + 3.0) * (1.0 / 6.0))
    keras_model = _randomize(k.Model(inp, out), seed=9)
    model = _user_model(keras_model, tmp_path, "hard_sigmoid")
    x = _inputs(model, 20) * 8
    (w1, b1), (w2, b2) = [w for w in _weights(keras_model) if w]
    expected = np.clip(x.astype(np.float64) @ w1 + b1 + 3.0, 0, 6) * (1.0 / 6.0) @ w2 + b2
    got = references.get("float64").run(model, x)
    assert got.dtype == np.float64 and float64.engine(model) == float64.KERAS
    _assert_close(got, expected)


def test_a_squeeze_and_excite_gate_is_broadcast_in_float64_by_both_engines(tmp_path):
    """Issue 43: a (1, 1, C) gate against the (H, W, C) map (Multiply, then Subtract with the gate first), after
    silu and sigmoid; the arbiter of the Keras file (Keras in float64) and of its export (the ONNX graph in
    float64) both equal numpy's float64 formula."""
    k = keras()
    inp = k.Input((4, 5, 2))
    features = k.layers.Conv2D(3, 1, activation="silu")(inp)
    gate = k.layers.Conv2D(3, 1, activation="sigmoid")(k.layers.GlobalAveragePooling2D(keepdims=True)(features))
    out = k.layers.Subtract()([gate, k.layers.Multiply()([features, gate])])
    keras_model = _randomize(k.Model(inp, k.layers.Flatten()(out)), seed=43)
    model = _user_model(keras_model, tmp_path, "squeeze_excite")
    x = _inputs(model, 12) * 3
    (w1, b1), (w2, b2) = [w for w in _weights(keras_model) if w]
    h = x.astype(np.float64) @ w1[0, 0] + b1
    f = h / (1 + np.exp(-h))
    g = 1 / (1 + np.exp(-(f.mean(axis=(1, 2), keepdims=True) @ w2[0, 0] + b2)))
    expected = (g - f * g).reshape(len(x), -1)
    _assert_close(references.get("float64").run(model, x), expected)
    assert float64.engine(model) == float64.KERAS
    _assert_close(float64.graph_outputs(model, x), expected)
