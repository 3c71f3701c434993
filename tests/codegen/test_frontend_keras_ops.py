"""Keras 3 operation nodes (``x + 3.0``, ``x * c``, ``keras.ops.*``) and the activations Keras computes its
own way (hard_sigmoid, hard_silu): translated with their constants, compared with Keras, or refused by name.

Before issue 26 the front end handed ``x + 3.0`` (a ``keras.ops`` ``Add`` node) to the ``Add`` merge layer's
handler, which saw one tensor and dropped the constant: MobileNetV3's hard-sigmoid
``ReLU(6.0)(x + 3.0) * (1.0 / 6.0)`` became ``ReLU6(x)``.
"""

import numpy as np
import pytest

import codegen

keras = pytest.importorskip("keras")
layers, ops = keras.layers, keras.ops


def functional(shape, body, name):
    inputs = keras.Input(shape)
    return keras.Model(inputs, body(inputs), name=name)


def test_mobilenet_v3_hard_sigmoid_keeps_both_constants(check_keras):
    # Inputs in [-4, 4] reach both knees of relu6(x + 3): dropping either constant changes the outputs.
    check_keras(functional((6,), lambda x: layers.ReLU(6.0)(layers.Dense(6)(x) + 3.0) * (1.0 / 6.0),
                           "hard_sigmoid_ops"), low=-4.0, high=4.0)


def test_arithmetic_with_constants_on_either_side(check_keras):
    vector = np.arange(1, 6, dtype="float32")

    def body(x):
        y = ((0.5 - layers.Dense(5)(x)) / 3.0) * vector + np.full((1, 5), 0.25, "float32")
        return ops.subtract(ops.minimum(ops.maximum(y, -0.2), 0.3), layers.Dense(5)(x))

    check_keras(functional((7,), body, "arithmetic"))


def test_constant_broadcast_over_a_feature_map(check_keras):
    per_channel = np.array([0.5, -1.0, 2.0], dtype="float32")
    check_keras(functional((5, 5, 2), lambda x: layers.Conv2D(3, 3)(x) * per_channel + 1.5, "per_channel"))


# Each function in a chain, a Dense before each (so every one sees spread values); exp and the reciprocal
# read bounded values, so float32 rounding stays within the absolute tolerance.
CHAINS = {
    "bounded": [ops.tanh, ops.exp, ops.abs, ops.negative, ops.sigmoid, lambda x: ops.log(ops.abs(x) + 0.1),
                ops.relu, lambda x: ops.reciprocal(ops.abs(x) + 1.0), lambda x: ops.sqrt(ops.abs(x) + 0.1)],
    "activations": [ops.relu6, ops.silu, ops.hard_sigmoid, ops.hard_silu, ops.softplus,
                    lambda x: ops.leaky_relu(x, 0.3), ops.elu, ops.softsign],
}


@pytest.mark.parametrize("chain", CHAINS)
def test_elementwise_functions(check_keras, chain):
    def body(x):
        for function in CHAINS[chain]:
            x = function(layers.Dense(6)(x))
        return x

    check_keras(functional((6,), body, chain), low=-4.0, high=4.0)


def test_hard_activations_as_keras_computes_them(check_keras):
    check_keras(functional((6,), lambda x: layers.Dense(6, activation="hard_silu")(
        layers.Dense(6, activation="hard_sigmoid")(x)), "hard_activations"), low=-4.0, high=4.0)


def test_an_operation_without_translation_is_refused_by_name(tmp_path):
    model = functional((6,), lambda x: ops.sin(layers.Dense(6)(x)), "sine")
    model.save(tmp_path / "sine.keras")
    with pytest.raises(codegen.UnsupportedModel, match=r"sine\.keras: operation 'sin\w*' \(keras\.ops Sin\) is not "
                                                        "supported"):
        codegen.generate(tmp_path / "sine.keras", tmp_path / "out", frontend="keras")


def test_a_constant_that_varies_along_the_batch_axis_is_refused(tmp_path):
    model = functional((3,), lambda x: layers.Dense(3)(x) + np.ones((2, 3), "float32"), "batchwise")
    model.save(tmp_path / "batchwise.keras")
    with pytest.raises(codegen.UnsupportedModel, match="varies along the batch axis"):
        codegen.generate(tmp_path / "batchwise.keras", tmp_path / "out", frontend="keras")
