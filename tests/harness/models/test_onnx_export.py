"""The Keras -> ONNX exporter: the ONNX file must compute what the Keras model computes.

Each case is a small Keras model exercising one layer type or option, with
every weight drawn from a seeded generator (so biases and batch-norm statistics
are not trivially zero/one); Keras and ONNX Runtime must agree to 1e-5 on
seeded random inputs. This is what makes the exported file a faithful second
reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.models import zoo
from harness.errors import ModelError
from harness.references import onnxruntime_ref
from harness.models import onnx_export
from harness.models.tf_runtime import keras

TOLERANCE = 1e-5
N_INPUTS = 64


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "zoo-cache"


def _randomize(model, seed: int = 0):
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        weights = []
        for variable, value in zip(layer.weights, layer.get_weights()):
            if "variance" in variable.name:
                weights.append(rng.uniform(0.5, 1.5, value.shape).astype(np.float32))
            else:
                weights.append(rng.uniform(-0.5, 0.5, value.shape).astype(np.float32))
        layer.set_weights(weights)
    return model


def _keras_vs_onnx(keras_model, path, seed: int = 1) -> float:
    """Max |keras - onnxruntime| on seeded inputs (layouts converted by hand, independent of harness.tensors)."""
    onnx_export.export(keras_model, path)
    shape = tuple(keras_model.inputs[0].shape[1:])
    x = np.random.default_rng(seed).uniform(-1, 1, (N_INPUTS, *shape)).astype(np.float32)
    expected = keras_model(x, training=False).numpy()
    session = onnxruntime_ref.session(path)
    got = session.run(None, {"input": x.transpose(0, 3, 1, 2) if x.ndim == 4 else x})[0]
    if got.ndim == 4:
        got = got.transpose(0, 2, 3, 1)
    assert got.shape == expected.shape
    return float(np.max(np.abs(got - expected)))


def _seq(input_shape, *layers):
    k = keras()
    return _randomize(k.Sequential([k.Input(input_shape), *layers]))


def _cases():
    k = keras()
    L = k.layers
    cases = {
        "maxpool-same-odd": lambda: _seq((7, 9, 3), L.MaxPooling2D(3, strides=2, padding="same"), L.Flatten(),
                                         L.Dense(4)),
        "maxpool-valid-overlap": lambda: _seq((9, 8, 2), L.MaxPooling2D(3, strides=2), L.Flatten(), L.Dense(3)),
        "avgpool-same-odd": lambda: _seq((7, 9, 2), L.AveragePooling2D(2, strides=2, padding="same"), L.Flatten(),
                                         L.Dense(3)),
        "avgpool-same-stride1": lambda: _seq((5, 6, 2), L.AveragePooling2D(3, strides=1, padding="same")),
        "conv-stride2-same": lambda: _seq((8, 11, 3), L.Conv2D(4, 3, strides=2, padding="same"), L.Flatten(),
                                          L.Dense(5)),
        "conv-stride-hw-valid": lambda: _seq((10, 9, 2), L.Conv2D(3, (3, 2), strides=(2, 3), activation="relu")),
        "conv-even-kernel-same": lambda: _seq((7, 6, 2), L.Conv2D(2, 4, padding="same", activation="tanh")),
        "conv-dilation-same": lambda: _seq((9, 10, 2), L.Conv2D(3, 3, dilation_rate=2, padding="same")),
        "conv-dilation-valid": lambda: _seq((9, 10, 2), L.Conv2D(3, 3, dilation_rate=(2, 3))),
        "conv-groups": lambda: _seq((6, 6, 4), L.Conv2D(6, 3, groups=2)),
        "conv-no-bias": lambda: _seq((6, 6, 2), L.Conv2D(3, 3, use_bias=False)),
        "zeropad-asymmetric": lambda: _seq((5, 4, 2), L.ZeroPadding2D(((1, 2), (0, 3))), L.Conv2D(2, 3),
                                           L.Flatten(), L.Dense(3)),
        "batchnorm-conv": lambda: _seq((6, 6, 3), L.Conv2D(4, 3), L.BatchNormalization(), L.ReLU()),
        "batchnorm-after-flatten": lambda: _seq((4, 5, 3), L.Flatten(), L.BatchNormalization(epsilon=1e-2),
                                                L.Dense(4)),
        "batchnorm-no-scale-center": lambda: _seq((6,), L.Dense(5), L.BatchNormalization(center=False, scale=False)),
        "leaky-relu-layer": lambda: _seq((6,), L.Dense(8), L.LeakyReLU(negative_slope=0.1), L.Dense(3)),
        "relu-options": lambda: _seq((6,), L.Dense(8), L.ReLU(max_value=0.3), L.Dense(4), L.ReLU(negative_slope=0.2)),
        "activations": lambda: _seq((6,), L.Dense(8, activation="sigmoid"), L.Dense(8, activation="elu"),
                                    L.Dense(8, activation="leaky_relu"), L.Dense(8, activation="relu6"),
                                    L.Dense(8, activation="softplus"), L.Dense(8, activation="hard_sigmoid"),
                                    L.Dense(8, activation="silu"), L.Dense(4, activation="selu")),
        "activation-layers": lambda: _seq((6, 6, 2), L.Conv2D(3, 3), L.Activation("sigmoid"), L.ELU(alpha=0.5),
                                          L.Softmax()),
        "softmax-after-flatten": lambda: _seq((3, 4, 5), L.Flatten(), L.Softmax()),
        "flatten-output": lambda: _seq((3, 4, 5), L.Conv2D(2, 1), L.Flatten()),
        "dropout": lambda: _seq((6,), L.Dense(8), L.Dropout(0.5), L.Dense(3)),
        "reshape-to-vector": lambda: _seq((3, 4, 2), L.Reshape((24,)), L.Dense(5)),
        "reshape-to-image": lambda: _seq((12,), L.Dense(24), L.Reshape((2, 3, 4)), L.Conv2D(2, 2)),
        "depthwise-separable": lambda: _seq((8, 8, 3), L.DepthwiseConv2D(3, depth_multiplier=2, padding="same"),
                                            L.SeparableConv2D(4, 3, activation="relu")),
        "global-pooling": lambda: _seq((5, 5, 3), L.Conv2D(4, 3), L.GlobalAveragePooling2D(), L.Dense(2)),
        "global-max-keepdims": lambda: _seq((5, 5, 3), L.GlobalMaxPooling2D(keepdims=True)),
        "image-output": lambda: _seq((6, 7, 2), L.Conv2D(3, 3, padding="same", activation="relu")),
        "cropping": lambda: _seq((7, 6, 2), L.Cropping2D(((1, 2), (0, 3))), L.Conv2D(2, 1)),
        "upsampling": lambda: _seq((3, 4, 2), L.UpSampling2D((2, 3)), L.Conv2D(2, 2),
                                   L.UpSampling2D(2, interpolation="bilinear")),
        "rescaling-normalization": lambda: _seq((4, 4, 3), L.Rescaling(1.0 / 127.5, offset=-1.0),
                                                L.Normalization(mean=[0.1, -0.2, 0.3], variance=[0.5, 2.0, 1e-20]),
                                                L.Conv2D(2, 1)),
        "hard-silu": lambda: _seq((6,), L.Dense(6, activation="hard_silu"), L.Dense(3)),
        "conv-transpose": lambda: _seq((4, 5, 3), L.Conv2DTranspose(2, 3, strides=2, padding="same"),
                                       L.Conv2DTranspose(2, (4, 3), strides=(2, 1), activation="relu")),
    }
    cases.update(_functional_cases(k))
    return cases


def _functional_cases(k):
    L = k.layers

    def residual():
        x = k.Input((8, 8, 3))
        a = L.Conv2D(4, 3, padding="same", activation="relu")(x)
        b = L.Conv2D(4, 1)(x)
        y = L.Add()([a, b])
        return _randomize(k.Model(x, L.Dense(3)(L.Flatten()(y))))

    def merges():
        x = k.Input((10,))
        a, b, c = L.Dense(6)(x), L.Dense(6, activation="tanh")(x), L.Dense(6, activation="relu")(x)
        y = L.Concatenate()([L.Add()([a, b, c]), L.Subtract()([a, b]), L.Multiply()([b, c]), L.Average()([a, c]),
                             L.Maximum()([a, b]), L.Minimum()([b, c])])
        return _randomize(k.Model(x, L.Dense(4)(y)))

    def concat_channels():
        x = k.Input((6, 6, 2))
        y = L.Concatenate()([L.Conv2D(3, 3, padding="same")(x), L.Conv2D(2, 1)(x), x])
        return _randomize(k.Model(x, L.Conv2D(2, 3)(y)))

    def concat_height():
        x = k.Input((5, 6, 2))
        y = L.Concatenate(axis=1)([L.Conv2D(3, 3, padding="same")(x), L.Conv2D(3, 1)(x)])
        return _randomize(k.Model(x, L.Flatten()(y)))

    def concat_flattened():
        x = k.Input((4, 4, 3))
        a = L.Flatten()(L.Conv2D(2, 3)(x))
        b = L.Flatten()(x)
        return _randomize(k.Model(x, L.Dense(3)(L.Concatenate()([a, b]))))

    def add_flattened():
        x = k.Input((3, 3, 2))
        a = L.Flatten()(x)
        b = L.Flatten()(L.Conv2D(2, 1)(x))
        return _randomize(k.Model(x, L.Dense(2)(L.Add()([a, b]))))

    def nested():
        inner = k.Sequential([k.Input((6, 6, 2)), L.Conv2D(3, 3, activation="relu"), L.MaxPooling2D(2)], name="inner")
        x = k.Input((6, 6, 2))
        return _randomize(_randomize(k.Model(x, L.Dense(2)(L.Flatten()(inner(x))))), seed=2)

    def hard_sigmoid_ops():  # MobileNetV3's hard-sigmoid as keras.applications writes it: both constants kept
        x = k.Input((5, 5, 2))
        y = L.Conv2D(3, 3, padding="same")(x)
        return _randomize(k.Model(x, L.ReLU(6.0)(y * 4.0 + 3.0) * (1.0 / 6.0)))

    def constants_in_layout():  # a per-channel constant on NCHW, a vector constant after a permuting Flatten
        x = k.Input((3, 4, 2))
        y = L.Flatten()(L.Conv2D(3, 1)(x) - np.array([0.5, -1.0, 2.0], "float32"))
        y = k.ops.maximum(y / np.arange(1, 37, dtype="float32"), -0.05)
        return _randomize(k.Model(x, L.Dense(3)(k.ops.minimum(y, 0.1))))

    def squeeze_excite():  # MobileNetV3's block: a (1, 1, C) gate against the (H, W, C) map, in both operand orders
        x = k.Input((6, 6, 3))
        y = L.Conv2D(4, 3, padding="same", activation="hard_silu")(x)
        gate = L.GlobalAveragePooling2D(keepdims=True)(y)
        gate = L.Conv2D(4, 1)(L.Conv2D(2, 1, activation="relu")(gate))
        gate = L.ReLU(6.0)(gate + 3.0) * (1.0 / 6.0)
        scaled = L.Multiply()([y, gate])
        y = L.Concatenate()([L.Add()([gate, scaled]), L.Subtract()([gate, scaled]), L.Subtract()([scaled, gate]),
                             L.Maximum()([scaled, gate])])
        return _randomize(k.Model(x, L.Flatten()(y)))

    def squeeze_excite_reshape():  # EfficientNet's: pooled to a vector, reshaped to (1, 1, C), silu and sigmoid
        x = k.Input((5, 5, 3))
        y = L.DepthwiseConv2D(3, padding="same", activation="silu")(L.Rescaling(1.0 / 255.0)(x))
        gate = L.Reshape((1, 1, 3))(L.GlobalAveragePooling2D()(y))
        gate = L.Conv2D(3, 1, activation="sigmoid")(L.Conv2D(2, 1, activation="swish")(gate))
        return _randomize(k.Model(x, L.Dense(3)(L.Flatten()(L.Multiply()([gate, y])))))

    def vector_gate():  # a (1,) gate on a vector in permuted (CHW) order: the order stays the map's
        x = k.Input((3, 3, 2))
        flat = L.Flatten()(L.Conv2D(2, 1)(x))
        gate = L.Dense(1, activation="sigmoid")(flat)
        return _randomize(k.Model(x, L.Dense(2)(L.Multiply()([flat, gate]))))

    def functions():
        x = k.Input((6,))
        y = x
        for function in (k.ops.tanh, k.ops.exp, k.ops.abs, k.ops.negative, k.ops.sigmoid, k.ops.hard_silu,
                         lambda v: k.ops.sqrt(k.ops.abs(v) + 0.1), lambda v: k.ops.log(k.ops.abs(v) + 0.1),
                         lambda v: k.ops.reciprocal(k.ops.abs(v) + 1.0), k.ops.relu6, k.ops.silu, k.ops.hard_sigmoid,
                         lambda v: k.ops.leaky_relu(v, 0.3)):
            y = function(L.Dense(6)(y))
        return _randomize(k.Model(x, y))

    return {"hard-sigmoid-ops": hard_sigmoid_ops, "constants-in-layout": constants_in_layout,
            "ops-functions": functions, "residual-add": residual, "merge-layers": merges, "concat-channels": concat_channels,
            "concat-height": concat_height, "concat-flattened": concat_flattened, "add-flattened": add_flattened,
            "nested-sequential": nested, "squeeze-excite": squeeze_excite,
            "squeeze-excite-reshape": squeeze_excite_reshape, "vector-gate": vector_gate}


CASE_NAMES = [
    "maxpool-same-odd", "maxpool-valid-overlap", "avgpool-same-odd", "avgpool-same-stride1", "conv-stride2-same",
    "conv-stride-hw-valid", "conv-even-kernel-same", "conv-dilation-same", "conv-dilation-valid", "conv-groups",
    "conv-no-bias", "zeropad-asymmetric", "batchnorm-conv", "batchnorm-after-flatten", "batchnorm-no-scale-center",
    "leaky-relu-layer", "relu-options", "activations", "activation-layers", "softmax-after-flatten",
    "flatten-output", "dropout", "reshape-to-vector", "reshape-to-image", "depthwise-separable", "global-pooling",
    "global-max-keepdims", "image-output", "residual-add", "merge-layers", "concat-channels", "concat-height",
    "concat-flattened", "add-flattened", "nested-sequential", "cropping", "upsampling", "rescaling-normalization",
    "hard-silu", "conv-transpose", "hard-sigmoid-ops", "constants-in-layout", "ops-functions", "squeeze-excite",
    "squeeze-excite-reshape", "vector-gate",
]


def test_case_list_is_complete():
    assert sorted(CASE_NAMES) == sorted(_cases())


@pytest.mark.parametrize("case", CASE_NAMES)
def test_layer_case_matches_keras(case, tmp_path):
    model = _cases()[case]()
    assert _keras_vs_onnx(model, tmp_path / f"{case}.onnx") <= TOLERANCE


@pytest.mark.parametrize("name", zoo.names("default"))
def test_zoo_model_matches_keras(name, zoo_cache, tmp_path):
    from harness.references import keras_ref

    model = zoo.load(name, cache_dir=zoo_cache)
    keras_model = keras_ref.load(model.file("keras"))
    assert _keras_vs_onnx(keras_model, tmp_path / "model.onnx", seed=7) <= TOLERANCE


def test_exported_file_structure(zoo_cache):
    import onnx

    model = zoo.load("lenet5", cache_dir=zoo_cache)
    proto = onnx.load(str(model.file("onnx")))
    onnx.checker.check_model(proto, full_check=True)
    assert [op.version for op in proto.opset_import if op.domain in ("", "ai.onnx")] == [onnx_export.OPSET]
    (graph_input,) = proto.graph.input
    dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
    assert graph_input.name == "input" and dims == ["N", 1, 28, 28]
    assert [o.name for o in proto.graph.output] == ["output"]
    ops = [node.op_type for node in proto.graph.node]
    # Flatten in CHW order with the Dense rows permuted instead: no Transpose or Gather.
    assert ops == ["Conv", "Tanh", "AveragePool", "Conv", "Tanh", "AveragePool", "Flatten",
                   "Gemm", "Tanh", "Gemm", "Tanh", "Gemm", "Softmax"]
    pools = [node for node in proto.graph.node if node.op_type == "AveragePool"]
    assert all(onnx.helper.get_attribute_value(a) == 0 for node in pools for a in node.attribute
               if a.name == "count_include_pad")


@pytest.mark.parametrize(
    ("size", "kernel", "stride", "dilation", "pads"),
    [(7, 3, 2, 1, (1, 1)), (8, 3, 2, 1, (0, 1)), (6, 4, 1, 1, (1, 2)), (9, 3, 1, 2, (2, 2)), (5, 1, 2, 1, (0, 0)),
     (228, 11, 4, 1, (3, 4))],
)
def test_same_pads_follow_tensorflow(size, kernel, stride, dilation, pads):
    top, left, bottom, right = onnx_export._same_pads(None, (size, size), (kernel,) * 2, (stride,) * 2, (dilation,) * 2)
    assert (top, bottom) == pads and (left, right) == pads


def test_unsupported_layer_names_the_type():
    k = keras()
    model = k.Sequential([k.Input((4, 3)), k.layers.LSTM(2), k.layers.Dense(1)])
    with pytest.raises(ModelError, match=r"unsupported layer type LSTM \(layer 'lstm"):
        onnx_export.to_onnx(model)


def test_unsupported_option_names_the_option():
    k = keras()
    model = k.Sequential([k.Input((4,)), k.layers.Dense(3), k.layers.ReLU(threshold=0.5)])
    with pytest.raises(ModelError, match=r"unsupported option threshold=0.5 of layer type ReLU"):
        onnx_export.to_onnx(model)


def test_broadcasting_between_ranks_is_refused_by_name():
    """A vector against an image: Keras aligns the vector with the channels of HWC, ONNX would align it with the
    width of NCHW; refused, naming the layer, never translated by a guess."""
    k = keras()
    x = k.Input((4, 4, 3))
    model = k.Model(x, k.layers.Multiply(name="gate")([x, k.layers.GlobalAveragePooling2D()(x)]))
    with pytest.raises(ModelError, match=r"unsupported option broadcasting between shapes of different ranks "
                                         r"\[\(3,\), \(4, 4, 3\)\] of layer type Multiply \(layer 'gate'\)"):
        onnx_export.to_onnx(model)


def test_operation_without_translation_is_refused_by_name():
    k = keras()
    x = k.Input((4,))
    model = k.Model(x, k.ops.sin(k.layers.Dense(3)(x)))
    with pytest.raises(ModelError, match=r"unsupported operation Sin \(keras\.ops, operation 'sin"):
        onnx_export.to_onnx(model)


def test_rank_two_input_is_refused():
    k = keras()
    model = k.Sequential([k.Input((4, 3)), k.layers.Dense(2)])
    with pytest.raises(ModelError, match="rank 2"):
        onnx_export.to_onnx(model)
