"""Every supported Keras layer and option: generated C matches Keras within 1e-5."""

import numpy as np
import pytest

keras = pytest.importorskip("keras")
layers = keras.layers


def sequential(input_shape, *stack, name="net"):
    return keras.Sequential([keras.Input(input_shape), *stack], name=name)


ACTIVATIONS = ["linear", "relu", "relu6", "tanh", "sigmoid", "softmax", "elu", "selu", "softplus", "softsign",
               "silu", "exponential", "leaky_relu"]


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_dense_with_each_activation(check_keras, activation):
    check_keras(sequential((7,), layers.Dense(5, activation=activation), layers.Dense(3, activation=activation),
                           name=f"dense_{activation}"))


def test_dense_without_bias_on_a_rank_2_input(check_keras):
    check_keras(sequential((4, 6), layers.Dense(5, use_bias=False), layers.Dense(3), layers.Flatten()))


CONV_CASES = {
    "valid_3x3": dict(shape=(9, 9, 3), filters=5, kernel_size=3),
    "same_stride2_odd": dict(shape=(9, 11, 5), filters=7, kernel_size=3, strides=2, padding="same"),
    "same_stride3_kernel2": dict(shape=(10, 10, 3), filters=5, kernel_size=2, strides=3, padding="same"),
    "valid_stride3_kernel2": dict(shape=(11, 10, 3), filters=5, kernel_size=2, strides=3),
    "same_even_kernel": dict(shape=(7, 8, 3), filters=5, kernel_size=4, padding="same"),
    "dilation_same": dict(shape=(9, 9, 13), filters=5, kernel_size=3, dilation_rate=2, padding="same"),
    "dilation_valid": dict(shape=(9, 10, 3), filters=7, kernel_size=(3, 2), dilation_rate=(2, 3)),
    "pointwise": dict(shape=(5, 6, 7), filters=13, kernel_size=1),
    "kernel_1x3_same": dict(shape=(6, 7, 5), filters=3, kernel_size=(1, 3), padding="same"),
    "kernel_3x2_stride_2x1": dict(shape=(8, 7, 3), filters=5, kernel_size=(3, 2), strides=(2, 1)),
    "relu_no_bias": dict(shape=(6, 6, 3), filters=5, kernel_size=3, padding="same", activation="relu",
                         use_bias=False),
    "tanh_fused": dict(shape=(6, 6, 3), filters=5, kernel_size=3, activation="tanh"),
}


@pytest.mark.parametrize("case", CONV_CASES, ids=list(CONV_CASES))
def test_conv2d(check_keras, case):
    options = dict(CONV_CASES[case])
    shape = options.pop("shape")
    check_keras(sequential(shape, layers.Conv2D(**options), name=f"conv_{case}"))


POOL_CASES = {
    "valid_2x2": dict(shape=(8, 8, 3), pool_size=2),
    "same_2x2_odd": dict(shape=(7, 9, 3), pool_size=2, padding="same"),
    "same_3x3_stride2": dict(shape=(8, 9, 5), pool_size=3, strides=2, padding="same"),
    "valid_3x2_stride_1x2": dict(shape=(7, 8, 3), pool_size=(3, 2), strides=(1, 2)),
    "same_3x3_stride1": dict(shape=(5, 6, 2), pool_size=3, strides=1, padding="same"),
    "same_2x2_stride3": dict(shape=(8, 7, 2), pool_size=2, strides=3, padding="same"),
}


@pytest.mark.parametrize("kind", ["max", "average"])
@pytest.mark.parametrize("case", POOL_CASES, ids=list(POOL_CASES))
def test_pooling(check_keras, kind, case):
    options = dict(POOL_CASES[case])
    shape = options.pop("shape")
    pool = layers.MaxPooling2D(**options) if kind == "max" else layers.AveragePooling2D(**options)
    check_keras(sequential(shape, pool, name=f"{kind}_{case}"))


@pytest.mark.parametrize("pool", [layers.GlobalAveragePooling2D, layers.GlobalMaxPooling2D])
def test_global_pooling(check_keras, pool):
    check_keras(sequential((5, 6, 4), layers.Conv2D(3, 2), pool(), layers.Dense(2), name=pool.__name__.lower()))


def test_batch_normalization_after_conv_and_dense(check_keras):
    generated = check_keras(sequential((6, 6, 3), layers.Conv2D(4, 3), layers.BatchNormalization(epsilon=0.01),
                                       layers.Flatten(), layers.Dense(5),
                                       layers.BatchNormalization(center=False, scale=False), name="bn"))
    assert [layer["op"] for layer in generated.manifest["layers"]].count("BatchNormalization") == 2


def test_flatten_after_conv_keeps_the_channels_last_order(check_keras):
    generated = check_keras(sequential((5, 4, 3), layers.Conv2D(6, 2, activation="relu"), layers.Flatten(),
                                       layers.Dense(4, activation="softmax"), name="flatten"))
    assert generated.manifest["inputs"][0]["layout"] == "HWC"
    assert generated.manifest["outputs"][0]["layout"] == "C"


def test_reshape_feeds_a_convolution(check_keras):
    check_keras(sequential((24,), layers.Dense(24), layers.Reshape((2, 3, 4)), layers.Conv2D(3, (1, 2)),
                           layers.Reshape((2, 6)), layers.Dense(2), name="reshape"))


def test_zero_padding_asymmetric_and_cropping(check_keras):
    check_keras(sequential((5, 4, 3), layers.ZeroPadding2D(((1, 2), (0, 3))), layers.Conv2D(4, 3),
                           layers.Cropping2D(((1, 0), (2, 1))), name="padding"))


def test_add_and_concatenate_in_a_branching_model(check_keras):
    inputs = keras.Input((6, 7, 3))
    a = layers.Conv2D(4, 3, padding="same", activation="relu")(inputs)
    b = layers.Conv2D(4, 1)(inputs)
    added = layers.Add()([a, b])
    channels = layers.Concatenate()([added, a, b])
    rows = layers.Concatenate(axis=1)([added, b])
    c = layers.Conv2D(2, 3)(channels)
    d = layers.Conv2D(2, 3, strides=(2, 1))(rows)
    flat = layers.Concatenate()([layers.Flatten()(c), layers.Flatten()(d)])
    outputs = layers.Activation("sigmoid")(layers.Dense(5)(flat))
    generated = check_keras(keras.Model(inputs, outputs, name="branches"))
    assert generated.manifest["inputs"][0]["name"] == inputs._keras_history[0].name


def test_merge_layers_with_standalone_activations(check_keras):
    inputs = keras.Input((10,))
    a = layers.Dense(6)(inputs)
    b = layers.Dense(6)(inputs)
    relu_a = layers.Activation("relu")(a)  # a has two consumers: a standalone loop, not fused
    total = layers.Add()([relu_a, b, a])
    difference = layers.Subtract()([total, b])
    product = layers.Multiply()([difference, relu_a])
    outputs = layers.Activation("tanh")(product)  # fused into Multiply
    generated = check_keras(keras.Model(inputs, outputs, name="merges"))
    notes = generated.source()
    assert "tanh computed by layer 'multiply'" in notes


def test_activation_layers(check_keras):
    check_keras(sequential((12,), layers.Activation("tanh"), layers.Dense(8), layers.LeakyReLU(negative_slope=0.2),
                           layers.Dense(8), layers.ReLU(max_value=6.0), layers.Dense(8),
                           layers.ReLU(negative_slope=0.1, threshold=0.3), layers.Dense(8), layers.ELU(alpha=0.7),
                           layers.Dense(6), layers.ReLU(), layers.Dropout(0.5), layers.Dense(4), layers.Softmax(),
                           name="activations"))


def test_softmax_is_stable_with_large_logits(check_keras):
    model = sequential((6,), layers.Dense(10), layers.Softmax(), name="softmax_large")
    rng = np.random.default_rng(1)
    model.layers[0].set_weights([rng.uniform(-300, 300, (6, 10)).astype(np.float32),
                                 rng.uniform(-100, 100, (10,)).astype(np.float32)])
    generated = check_keras(model, seed_params=False)
    assert np.all(np.isfinite(generated.outputs))


def test_softmax_over_the_last_axis_of_a_feature_map(check_keras):
    check_keras(sequential((4, 5, 3), layers.Conv2D(6, 2, activation="softmax"), name="softmax_map"))


def test_permute(check_keras):
    check_keras(sequential((4, 5, 3), layers.Permute((3, 1, 2)), layers.Flatten(), layers.Dense(3), name="permute"))


def test_output_that_only_reshapes_the_input_is_copied(check_keras):
    generated = check_keras(sequential((2, 3), layers.Reshape((6,)), name="copy"))
    assert "copy of the input" in generated.source()


def test_output_written_through_a_view(check_keras):
    generated = check_keras(sequential((4, 4, 2), layers.Conv2D(3, 2), layers.Flatten(), name="view_out"))
    assert generated.manifest["outputs"][0]["shape"] == [27]
    assert "output[" in generated.source()


def test_shared_layer_called_twice(check_keras):
    dense = layers.Dense(4, activation="tanh")
    inputs = keras.Input((4,))
    outputs = dense(dense(inputs))
    generated = check_keras(keras.Model(inputs, outputs, name="shared"))
    names = [layer["name"] for layer in generated.manifest["layers"]]
    assert len(names) == len(set(names)) == 2


def test_legacy_h5_file(check_keras, tmp_path):
    import codegen
    from codegen_support import run_c

    model = sequential((3, 3, 2), layers.Conv2D(2, 2), layers.Flatten(), layers.Dense(3), name="legacy")
    generated = check_keras(model)
    model.save(tmp_path / "legacy.h5")
    codegen.generate(tmp_path / "legacy.h5", tmp_path / "h5")
    x = np.random.default_rng(0).uniform(-1, 1, (16, 18)).astype(np.float32)
    np.testing.assert_array_equal(run_c(tmp_path / "h5", x), run_c(generated.directory, x))
