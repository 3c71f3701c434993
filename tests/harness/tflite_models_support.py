"""A TensorFlow Lite model as a certification team gets it (issue 42): a small DS-CNN-like Keras model from a fixed
seed (Conv2D - BatchNorm - ReLU - DepthwiseConv2D - BatchNorm - ReLU - Conv2D 1x1 - BatchNorm - ReLU -
AveragePooling2D over the whole map - Flatten - Dense logits), with non-trivial BatchNorm statistics, converted by
``tf.lite.TFLiteConverter`` with full-integer quantization (int8 input and output, a seeded representative set)."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import numpy as np

from harness.models.tf_runtime import keras, tensorflow

INPUT_SHAPE = (24, 10, 1)  # a small spectrogram, height x width x channels (DS-CNN's 49 x 10 x 1, cut down)
CLASSES = 12
RESIDUAL_SHAPE = (12, 12, 1)


def ds_cnn(seed: int = 0, softmax: bool = False):
    """The seeded float Keras model; ``softmax`` ends it with a Softmax (an op the conversion refuses)."""
    k = keras()
    k.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    x = inputs = k.Input(INPUT_SHAPE)
    x = k.layers.Conv2D(8, 3, strides=2, padding="same", name="conv1")(x)
    x = k.layers.BatchNormalization(name="bn1")(x)
    x = k.layers.ReLU(name="relu1")(x)
    x = k.layers.DepthwiseConv2D(3, padding="same", name="dw2")(x)
    x = k.layers.BatchNormalization(name="bn2")(x)
    x = k.layers.ReLU(name="relu2")(x)
    x = k.layers.Conv2D(16, 1, name="pw2")(x)
    x = k.layers.BatchNormalization(name="bn3")(x)
    x = k.layers.ReLU(name="relu3")(x)
    x = k.layers.AveragePooling2D(pool_size=x.shape[1:3], name="pool")(x)
    x = k.layers.Flatten(name="flatten")(x)
    x = k.layers.Dense(CLASSES, name="logits", activation="softmax" if softmax else None)(x)
    model = k.Model(inputs, x, name="ds_cnn_small")
    for layer in model.layers:  # inference statistics far from (0, 1): the folded BatchNorm must matter
        if isinstance(layer, k.layers.BatchNormalization):
            n = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 1.5, n).astype(np.float32), rng.normal(0, 0.2, n).astype(np.float32),
                               rng.normal(0, 0.3, n).astype(np.float32), rng.uniform(0.3, 2.0, n).astype(np.float32)])
    return model


def residual(seed: int = 0):
    """A seeded residual CNN of the ops DS-CNN lacks: Conv2D - ReLU - MaxPooling2D - Conv2D - Add (the pooled map) -
    ReLU - AveragePooling2D over the map - Flatten - Dense, 12x12x1 in (``RESIDUAL_SHAPE``), 10 logits."""
    k = keras()
    k.utils.set_random_seed(seed)
    x = inputs = k.Input(RESIDUAL_SHAPE)
    x = k.layers.Conv2D(8, 3, padding="same", activation="relu", name="conv1")(x)
    pooled = k.layers.MaxPooling2D(2, name="pool1")(x)
    x = k.layers.Conv2D(8, 3, padding="same", name="conv2")(pooled)
    x = k.layers.ReLU(name="relu2")(k.layers.Add(name="add")([x, pooled]))
    x = k.layers.AveragePooling2D(pool_size=x.shape[1:3], name="pool2")(x)
    x = k.layers.Dense(10, name="logits")(k.layers.Flatten(name="flatten")(x))
    return k.Model(inputs, x, name="residual_small")


def representative(seed: int = 0, count: int = 32, shape: tuple[int, ...] = INPUT_SHAPE):
    """The seeded calibration set: ``count`` inputs of ``shape`` uniform in [-1, 1]."""
    rng = np.random.default_rng(seed)
    samples = [rng.uniform(-1, 1, (1, *shape)).astype(np.float32) for _ in range(count)]

    def generate():
        for sample in samples:
            yield [sample]
    return generate


def convert(model, path: Path, integer: bool = True, seed: int = 0) -> Path:
    """``model`` converted to ``path``: full-integer int8 (int8 input and output, TFLITE_BUILTINS_INT8 only) when
    ``integer``, else a float32 ``.tflite``."""
    tf = tensorflow()
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if integer:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative(seed, shape=tuple(model.inputs[0].shape[1:]))
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    path.write_bytes(converter.convert())
    return path


def ds_cnn_tflite(path: Path, seed: int = 0, softmax: bool = False) -> Path:
    """The seeded DS-CNN-like model, converted full-integer to ``path`` (converted once per process: the tests of
    the loader and of the semantic stage share it)."""
    path.write_bytes(_ds_cnn_bytes(seed, softmax))
    return path


@functools.cache
def _ds_cnn_bytes(seed: int, softmax: bool) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return convert(ds_cnn(seed, softmax), Path(folder) / "model.tflite", seed=seed).read_bytes()
