"""Structured l1 pruning and OpTC's Algorithms 1 and 2 (harness.stages.explore.pruning), on small Keras models with
seeded random weights: a pruned model computes what the original computes with the removed units zeroed."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ModelError
from harness.stages.explore import pruning
from harness.models.tf_runtime import keras


def _cnn(seed: int = 0):
    """conv -> max pool -> conv (same padding) -> avg pool -> flatten -> dense -> dense, biases not zero."""
    k = keras()
    k.utils.set_random_seed(seed)
    inputs = k.Input(shape=(8, 8, 2), name="input")
    x = k.layers.Conv2D(6, 3, padding="same", activation="relu", name="conv1")(inputs)
    x = k.layers.MaxPooling2D(2, name="pool1")(x)
    x = k.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv2")(x)
    x = k.layers.AveragePooling2D(2, name="pool2")(x)
    x = k.layers.Flatten(name="flatten")(x)
    x = k.layers.Dense(12, activation="relu", name="dense1")(x)
    x = k.layers.Dense(5, activation="softmax", name="out")(x)
    model = k.Model(inputs, x, name="cnn")
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in model.get_weights()])
    return model


def _zeroed(model, keep: dict[str, int]):
    """A copy of ``model`` with the kernel columns and biases of the units pruning would remove set to zero."""
    copy = keras().models.clone_model(model)
    copy.set_weights(model.get_weights())
    for name, count in keep.items():
        layer = copy.get_layer(name)
        kernel, bias = layer.get_weights()
        removed = pruning.l1_order(model.get_layer(name))[count:]
        kernel[..., removed], bias[removed] = 0.0, 0.0
        layer.set_weights([kernel, bias])
    return copy


@pytest.fixture(scope="module")
def cnn():
    return _cnn()


def test_prunable_layers_are_all_weighted_but_the_output(cnn):
    assert pruning.prunable(cnn) == {"conv1": 6, "conv2": 8, "dense1": 12}


@pytest.mark.parametrize("keep", [{"conv1": 4}, {"conv2": 3}, {"dense1": 5},
                                  {"conv1": 1, "conv2": 5, "dense1": 7}])
def test_pruned_model_equals_the_original_with_those_units_zeroed(cnn, keep):
    pruned = pruning.prune(cnn, keep)
    inputs = np.random.default_rng(1).uniform(-1, 1, (32, 8, 8, 2)).astype(np.float32)
    expected = _zeroed(cnn, keep).predict(inputs, verbose=0)
    np.testing.assert_allclose(pruned.predict(inputs, verbose=0), expected, rtol=1e-5, atol=1e-6)
    # and it really shrank: fewer units, and the next layer lost the matching inputs
    for name, count in keep.items():
        assert pruned.get_layer(name).get_weights()[0].shape[-1] == count
    assert pruned.count_params() < cnn.count_params()
    flatten_width = pruned.get_layer("dense1").get_weights()[0].shape[0]
    assert flatten_width == 2 * 2 * keep.get("conv2", 8)


def test_zeroing_other_units_changes_the_outputs(cnn):
    """The equality above can fail: zeroing the units pruning keeps gives other outputs."""
    pruned = pruning.prune(cnn, {"dense1": 5})
    wrong = keras().models.clone_model(cnn)
    wrong.set_weights(cnn.get_weights())
    layer = wrong.get_layer("dense1")
    kernel, bias = layer.get_weights()
    kept = pruning.l1_order(cnn.get_layer("dense1"))[:7]
    kernel[:, kept], bias[kept] = 0.0, 0.0
    layer.set_weights([kernel, bias])
    inputs = np.random.default_rng(2).uniform(-1, 1, (8, 8, 8, 2)).astype(np.float32)
    assert not np.allclose(pruned.predict(inputs, verbose=0), wrong.predict(inputs, verbose=0), atol=1e-4)


def test_kept_units_are_those_of_largest_l1_norm_in_their_order():
    k = keras()
    inputs = k.Input(shape=(3,))
    hidden = k.layers.Dense(4, name="hidden")(inputs)
    model = k.Model(inputs, k.layers.Dense(2, name="out")(hidden))
    # l1 norms of the hidden units' columns: 3, 6, 1, 6 -> keep units 1 and 3 (ties: lower index first)
    kernel = np.array([[1, 2, 1, -2], [1, -2, 0, 2], [-1, 2, 0, 2]], dtype=np.float32)
    out_kernel = np.arange(8, dtype=np.float32).reshape(4, 2)
    model.set_weights([kernel, np.arange(4, dtype=np.float32), out_kernel, np.zeros(2, np.float32)])
    assert list(pruning.l1_order(model.get_layer("hidden"))) == [1, 3, 0, 2]
    pruned = pruning.prune(model, {"hidden": 2})
    new_kernel, new_bias, new_out, _ = pruned.get_weights()
    np.testing.assert_array_equal(new_kernel, kernel[:, [1, 3]])
    np.testing.assert_array_equal(new_bias, [1, 3])
    np.testing.assert_array_equal(new_out, out_kernel[[1, 3]])


def test_equation_5_units_kept():
    assert pruning.kept_units(128, (1 - 0.3) / 10 * 1) == 120  # the paper's fc0 example, j = 1
    assert pruning.kept_units(10, 0.7) == 3  # 10 x (1 - 0.7) is 3.0000000000000004 in floating point: not 4
    assert pruning.kept_units(16, 0.0) == 16
    assert pruning.kept_units(4, 0.99) == 1  # never zero units


def test_algorithm_1_and_2_with_a_hand_made_error():
    """Error rises with each layer's pruning at its own pace: dense1 above 0.5 pruned, conv2 above 0.2,
    conv1 never; Algorithm 1 finds p_max as the first rate above the threshold."""
    model = _cnn()
    widths = pruning.prunable(model)

    def error(candidate) -> float:
        kept = {name: candidate.get_layer(name).get_weights()[0].shape[-1] / width for name, width in widths.items()}
        return (kept["dense1"] < 0.5) * 1.0 + (kept["conv2"] < 0.8) * 1.0

    found = {s.layer: s for s in pruning.sensitivities(model, error, threshold=0.5)}
    assert (found["conv1"].p_max, found["conv1"].dropped) == (0.9, False)
    assert (found["conv2"].p_max, found["conv2"].dropped) == (0.3, True)  # 8 -> ceil(5.6) = 6 = 0.75 < 0.8
    assert (found["dense1"].p_max, found["dense1"].dropped) == (0.6, True)  # 12 -> ceil(4.8) = 5 < 6
    assert found["dense1"].sensitivity == pytest.approx(0.4)
    assert list(found["conv2"].qualities) == [0.1, 0.2, 0.3]
    p_init = pruning.initial_rates(list(found.values()), steps=10)
    assert p_init == pytest.approx({"conv1": 0.09, "conv2": 0.03, "dense1": 0.06})
    assert pruning.step_counts(widths, p_init, 0) == widths
    assert pruning.step_counts(widths, p_init, 10) == {"conv1": 1, "conv2": 6, "dense1": 5}
    with pytest.raises(ModelError, match="at least 1"):
        pruning.initial_rates(list(found.values()), steps=0)


def test_refusals_are_one_line(cnn):
    with pytest.raises(ModelError, match="layer 'out' cannot be pruned"):
        pruning.prune(cnn, {"out": 2})
    with pytest.raises(ModelError, match="has 6 units, cannot keep 7"):
        pruning.prune(cnn, {"conv1": 7})
    k = keras()
    inputs = k.Input(shape=(4,))
    a = k.layers.Dense(4, name="a")(inputs)
    residual = k.Model(inputs, k.layers.Dense(2, name="b")(k.layers.Add()([a, inputs])), name="residual")
    with pytest.raises(ModelError, match="residual: pruning needs a chain of layers"):
        pruning.prunable(residual)
