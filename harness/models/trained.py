"""Trained zoo models on data that ships inside a package: what a design-space exploration can measure
quality on (the zoo's other models have random weights, so their accuracy means nothing).

- ``digits-cnn`` and ``digits-mlp``: classifiers of scikit-learn's bundled ``digits`` (1797 8x8 images of
  handwritten digits, grey levels 0..16 scaled to [0, 1]); quality = error rate on the held-out split.
- ``tabular-ae``: the paper's anomaly-detection autoencoder (OpTC section 5.1) on scikit-learn's bundled
  ``breast_cancer`` (569 samples of 30 features). Chosen over ``wine`` because it has a natural "normal"
  class (357 benign) and a natural "anomaly" class (212 malignant) and more features to compress: the
  autoencoder learns to reconstruct benign samples only; the anomaly score of a sample is its
  reconstruction mean squared error, and quality = 1 - ROC AUC of that score on held-out benign plus all
  malignant samples (the MLPerf Tiny / OpTC metric). Features are standardised with the training split's
  mean and deviation before they reach the model (the model's input is the standardised vector).

Every figure here is an *error* (lower is better), so the exploration minimises all its axes.

Training is deterministic: the split is fixed (``SPLIT_SEED``), Keras' global seed is the zoo seed, and
``harness.models.tf_runtime`` makes every op deterministic and single-threaded, so one seed gives the
same weights bit for bit. The content key (``fingerprint``) covers the data's bytes, the architecture,
the training settings, the seed and the TensorFlow/Keras versions, so a cached model is rebuilt exactly
when any of them changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

import numpy as np

from harness.errors import ModelError

TRAINER_VERSION = 1
SPLIT_SEED = 0  # the held-out split never changes with the training seed: qualities stay comparable
TEST_FRACTION = 0.25

# Layer specs as in harness.models.paper: ("dense", units, activation) | ("conv", filters, kernel,
# stride, padding, activation) | ("maxpool", pool, stride, padding) | ("flatten",)


@dataclass(frozen=True)
class Recipe:
    """One trained model: its data, architecture, training and quality metric."""

    dataset: str  # "digits" or "breast_cancer"
    input_shape: tuple[int, ...]
    layers: tuple[tuple, ...]
    loss: str
    metric: str  # "error rate" or "1 - AUC"
    epochs: int
    batch_size: int = 32
    learning_rate: float = 3e-3


RECIPES: dict[str, Recipe] = {
    "digits-cnn": Recipe(
        "digits", (8, 8, 1),
        (("conv", 16, 3, 1, "same", "relu"), ("maxpool", 2, 2, "valid"),
         ("conv", 32, 3, 1, "same", "relu"), ("maxpool", 2, 2, "valid"),
         ("flatten",), ("dense", 64, "relu"), ("dense", 10, "softmax")),
        "sparse_categorical_crossentropy", "error rate", epochs=20),
    "digits-mlp": Recipe(
        "digits", (64,),
        (("dense", 64, "relu"), ("dense", 32, "relu"), ("dense", 10, "softmax")),
        "sparse_categorical_crossentropy", "error rate", epochs=30),
    "tabular-ae": Recipe(
        "breast_cancer", (30,),
        (("dense", 64, "relu"), ("dense", 32, "relu"), ("dense", 8, "relu"),
         ("dense", 32, "relu"), ("dense", 64, "relu"), ("dense", 30, "linear")),
        "mse", "1 - AUC", epochs=60, batch_size=16),
}


@dataclass(frozen=True)
class Data:
    """A training split and a held-out split; ``y`` are class labels (digits) or anomaly flags (AE)."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise ModelError(f"'{name}' is not a trained model (trained: {', '.join(RECIPES)})")
    return RECIPES[name]


@functools.cache
def data(name: str) -> Data:
    """The splits of model ``name``'s data set, shaped for its input."""
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    spec = recipe(name)
    if spec.dataset == "digits":
        bunch = datasets.load_digits()
        x = (bunch.data / 16.0).astype(np.float32).reshape((-1, *spec.input_shape))
        x_train, x_test, y_train, y_test = train_test_split(
            x, bunch.target, test_size=TEST_FRACTION, random_state=SPLIT_SEED, stratify=bunch.target)
        return Data(x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64))
    bunch = datasets.load_breast_cancer()
    anomaly = (bunch.target == 0).astype(np.int64)  # 0 = malignant in scikit-learn's coding
    normal_x = bunch.data[anomaly == 0]
    x_train, x_normal_test = train_test_split(normal_x, test_size=TEST_FRACTION, random_state=SPLIT_SEED)
    mean, deviation = x_train.mean(axis=0), x_train.std(axis=0)
    x_test = np.concatenate([x_normal_test, bunch.data[anomaly == 1]])
    y_test = np.concatenate([np.zeros(len(x_normal_test)), np.ones(int(anomaly.sum()))]).astype(np.int64)

    def scale(values: np.ndarray) -> np.ndarray:
        return ((values - mean) / deviation).astype(np.float32)

    return Data(scale(x_train), np.zeros(len(x_train), dtype=np.int64), scale(x_test), y_test)


def quality(name: str, keras_model) -> float:
    """The error of ``keras_model`` on model ``name``'s held-out split (lower is better)."""
    split = data(name)
    predicted = keras_model.predict(split.x_test, batch_size=256, verbose=0)
    if recipe(name).metric == "error rate":
        return float(np.mean(np.argmax(predicted, axis=1) != split.y_test))
    from sklearn.metrics import roc_auc_score

    score = np.mean((predicted - split.x_test) ** 2, axis=1)
    return float(1.0 - roc_auc_score(split.y_test, score))


def fingerprint(name: str, seed: int) -> str:
    """A digest of everything that determines the trained weights of (name, seed); imports no TensorFlow."""
    from importlib.metadata import version

    split = data(name)
    content = hashlib.sha256()
    for array in (split.x_train, split.y_train, split.x_test, split.y_test):
        content.update(np.ascontiguousarray(array).tobytes())
    spec = {"name": name, "seed": seed, "trainer": TRAINER_VERSION, "recipe": repr(recipe(name)),
            "data": content.hexdigest(),
            "versions": [version(package) for package in ("tensorflow-cpu", "keras", "scikit-learn")]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def build(name: str, seed: int):
    """The Keras model ``name`` trained from ``seed`` (the zoo caches it)."""
    from harness.models.paper import _layer as spec_layer  # the zoo's one builder of layer specs
    from harness.models.tf_runtime import keras

    k = keras()
    spec = recipe(name)
    k.utils.set_random_seed(seed)
    inputs = k.Input(shape=spec.input_shape, name="input")
    x = inputs
    counts: dict[str, int] = {}
    for layer in spec.layers:
        counts[layer[0]] = counts.get(layer[0], 0) + 1
        x = spec_layer(k, layer, f"{layer[0]}{counts[layer[0]]}")(x)
    model = k.Model(inputs, x, name=name.replace("-", "_"))
    fit(name, model, spec.epochs, seed)
    return model


def fit(name: str, keras_model, epochs: int, seed: int) -> None:
    """Train ``keras_model`` on model ``name``'s training split for ``epochs``, deterministically from ``seed``
    (also the retraining of a pruned model)."""
    from harness.models.tf_runtime import keras

    k = keras()
    spec = recipe(name)
    split = data(name)
    k.utils.set_random_seed(seed)
    keras_model.compile(optimizer=k.optimizers.Adam(spec.learning_rate), loss=spec.loss)
    target = split.x_train if spec.loss == "mse" else split.y_train
    keras_model.fit(split.x_train, target, epochs=epochs, batch_size=spec.batch_size, shuffle=True, verbose=0)
