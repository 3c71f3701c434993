"""Trained zoo models (harness.models.trained): bundled data splits, quality metrics, deterministic training."""

from __future__ import annotations

import numpy as np
import pytest

from harness.errors import ModelError
from harness.models import trained, zoo
from harness.models.tf_runtime import keras


def test_digits_split_is_stratified_scaled_and_fixed():
    split = trained.data("digits-mlp")
    assert split.x_train.shape == (1347, 64) and split.x_test.shape == (450, 64)
    assert split.x_train.dtype == np.float32 and 0.0 <= split.x_test.min() and split.x_test.max() == 1.0
    whole = np.bincount(np.concatenate([split.y_train, split.y_test]))
    np.testing.assert_allclose(np.bincount(split.y_test) / whole, 0.25, atol=0.005)  # a quarter of each digit
    assert trained.data("digits-cnn").x_test.shape == (450, 8, 8, 1)
    np.testing.assert_array_equal(trained.data("digits-cnn").x_test.reshape(450, 64), split.x_test)


def test_anomaly_split_trains_on_benign_only():
    split = trained.data("tabular-ae")
    assert split.x_train.shape == (267, 30) and not split.y_train.any()  # 357 benign: 267 train, 90 held out
    assert (len(split.y_test), int(split.y_test.sum())) == (90 + 212, 212)
    np.testing.assert_allclose(split.x_train.mean(axis=0), 0.0, atol=1e-5)  # standardised on the train split


def test_quality_metrics_on_hand_made_models():
    k = keras()
    # a "classifier" that always answers 3: its error rate is the share of other digits
    inputs = k.Input(shape=(64,))
    outputs = k.layers.Dense(10, use_bias=False)(inputs)
    classifier = k.Model(inputs, outputs)
    kernel = np.zeros((64, 10), np.float32)
    kernel[:, 3] = 1.0  # always class 3
    classifier.set_weights([kernel])
    split = trained.data("digits-mlp")
    assert trained.quality("digits-mlp", classifier) == pytest.approx(np.mean(split.y_test != 3))
    # an autoencoder that outputs zeros scores each sample by its mean square: 1 - AUC of that score
    inputs = k.Input(shape=(30,))
    zero = k.Model(inputs, k.layers.Dense(30, kernel_initializer="zeros", bias_initializer="zeros")(inputs))
    from sklearn.metrics import roc_auc_score

    ae = trained.data("tabular-ae")
    expected = 1.0 - roc_auc_score(ae.y_test, np.mean(ae.x_test ** 2, axis=1))
    assert trained.quality("tabular-ae", zero) == pytest.approx(expected)
    assert 0.0 < expected < 0.5  # malignant samples lie further from the benign mean


def test_same_seed_same_weights_through_the_zoo(tmp_path):
    """Two caches, one seed: bit-identical trained weights; and the model really learned."""
    first = zoo.load("digits-mlp", cache_dir=tmp_path / "a", seed=0)
    second = zoo.load("digits-mlp", cache_dir=tmp_path / "b", seed=0)
    assert first.tier == "trained" and first.input_shape == (64,) and first.output_shape == (10,)
    load = keras().saving.load_model
    a, b = load(first.file("keras"), compile=False), load(second.file("keras"), compile=False)
    assert all(np.array_equal(x, y) for x, y in zip(a.get_weights(), b.get_weights()))
    assert trained.quality("digits-mlp", a) < 0.06
    assert zoo.load("digits-mlp", cache_dir=tmp_path / "a", seed=0) == first  # cached, not retrained


def test_other_seed_other_weights():
    k = keras()

    def trained_from(seed: int) -> list[np.ndarray]:
        k.utils.set_random_seed(0)  # same initial weights: only the training seed differs
        inputs = k.Input(shape=(64,))
        model = k.Model(inputs, k.layers.Dense(10, activation="softmax")(inputs))
        trained.fit("digits-mlp", model, epochs=1, seed=seed)
        return model.get_weights()

    same = trained_from(1), trained_from(1)
    assert all(np.array_equal(x, y) for x, y in zip(*same))
    assert not all(np.array_equal(x, y) for x, y in zip(same[0], trained_from(2)))


def test_fingerprint_follows_seed_and_name_and_unknown_names_fail():
    assert trained.fingerprint("digits-cnn", 0) == trained.fingerprint("digits-cnn", 0)
    assert len({trained.fingerprint("digits-cnn", 0), trained.fingerprint("digits-cnn", 1),
                trained.fingerprint("digits-mlp", 0)}) == 3
    with pytest.raises(ModelError, match="'lenet5' is not a trained model"):
        trained.recipe("lenet5")
