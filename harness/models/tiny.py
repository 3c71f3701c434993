"""The MLPerf Tiny inference benchmark's four reference networks (tier ``tiny``), built in Keras 3 with
seeded weights.

The architectures are those of the benchmark's training scripts (mlcommons/tiny,
``benchmark/training``): ResNet-8 for image classification (CIFAR-10, 32x32x3), MobileNetV1 with width
multiplier 0.25 for visual wake words (96x96x3, 2 classes), DS-CNN for keyword spotting (49x10x1 MFCC
features, 12 classes) and the fully connected autoencoder for anomaly detection (640 log-mel features).
They are the networks MLPerf Tiny submitters deploy on microcontrollers; the weights here are not trained
(no data set is bundled) but drawn from a generator seeded by the name and seed alone, like the paper's
benchmarks (``harness.models.paper``): kernels He-uniform, batch-normalisation scales and offsets away
from the identity, so a generator that drops any of them fails. Each batch normalisation's moving mean and
variance are then those of its input over ``CALIBRATION`` seeded inputs (uniform in [0, 1]), layer after
layer, as training would leave them: activations stay of order one through the 13 blocks of MobileNet
instead of growing until the softmax saturates (a saturated softmax hides any error). Dropout is the
identity at inference and is kept, as the scripts have it.
"""

from __future__ import annotations

import hashlib
import json
import zlib

import numpy as np

BUILDER_VERSION = 1
CALIBRATION = 64  # inputs whose statistics become each batch normalisation's moving mean and variance
NAMES = ("resnet8", "mobilenet-vww", "ds-cnn", "fc-autoencoder")


def fingerprint(name: str, seed: int) -> str:
    """A digest of everything that determines the files built for (name, seed): this module's source."""
    from pathlib import Path

    source = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps({"name": name, "seed": seed, "builder": BUILDER_VERSION,
                                      "source": source}).encode()).hexdigest()


def build(name: str, seed: int):
    """The Keras model of MLPerf Tiny network ``name`` with seeded weights."""
    from harness.models.tf_runtime import keras

    k = keras()
    model = {"resnet8": _resnet8, "mobilenet-vww": _mobilenet_vww, "ds-cnn": _ds_cnn,
             "fc-autoencoder": _fc_autoencoder}[name](k, name.replace("-", "_"))
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    _set_weights(model, rng)
    _calibrate(k, model, rng.uniform(0.0, 1.0, (CALIBRATION, *model.inputs[0].shape[1:])).astype(np.float32))
    return model


def _calibrate(k, model, inputs: np.ndarray) -> None:
    """Each batch normalisation's moving statistics := its input's mean and variance over ``inputs`` (per
    channel: over the samples and the spatial axes), in graph order, each with the earlier ones set."""
    for layer in model.layers:
        if isinstance(layer, k.layers.BatchNormalization):
            values = k.Model(model.inputs[0], layer.input)(inputs, training=False).numpy().astype(np.float64)
            axes = tuple(range(values.ndim - 1))
            layer.moving_mean.assign(values.mean(axis=axes).astype(np.float32))
            layer.moving_variance.assign(values.var(axis=axes).astype(np.float32))


def _conv_bn(k, x, filters: int, kernel, strides=1, relu: bool = True, name: str = ""):
    x = k.layers.Conv2D(filters, kernel, strides=strides, padding="same", name=f"{name}_conv")(x)
    x = k.layers.BatchNormalization(name=f"{name}_bn")(x)
    return k.layers.Activation("relu", name=f"{name}_relu")(x) if relu else x


def _resnet8(k, model_name: str):
    """ResNet-8 (``image_classification/keras_model.py``): a 16-filter stem and three residual stacks of
    16, 32, 64 filters (the last two stride 2 with a 1x1 projection), 8x8 average pooling, 10 softmax."""
    inputs = k.Input((32, 32, 3), name="input")
    x = _conv_bn(k, inputs, 16, 3, name="stem")
    for stack, filters in enumerate((16, 32, 64), 1):
        strides = 1 if stack == 1 else 2
        y = _conv_bn(k, x, filters, 3, strides, name=f"s{stack}a")
        y = _conv_bn(k, y, filters, 3, relu=False, name=f"s{stack}b")
        if stack > 1:
            x = k.layers.Conv2D(filters, 1, strides=strides, padding="same", name=f"s{stack}_shortcut")(x)
        x = k.layers.Activation("relu", name=f"s{stack}_relu")(k.layers.Add(name=f"s{stack}_add")([x, y]))
    x = k.layers.AveragePooling2D(8, name="pool")(x)
    outputs = k.layers.Dense(10, activation="softmax", name="dense")(k.layers.Flatten(name="flatten")(x))
    return k.Model(inputs, outputs, name=model_name)


def _mobilenet_vww(k, model_name: str):
    """MobileNetV1, alpha 0.25 (``visual_wake_words/vww_model.py``): an 8-filter stride-2 stem, 13
    depthwise-separable blocks (3x3 depthwise, batch norm, ReLU, 1x1 convolution, batch norm, ReLU),
    3x3 average pooling, 2 softmax."""
    inputs = k.Input((96, 96, 3), name="input")
    x = _conv_bn(k, inputs, 8, 3, strides=2, name="stem")
    blocks = ((16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2), *((128, 1),) * 5, (256, 2), (256, 1))
    for number, (filters, strides) in enumerate(blocks, 1):
        x = k.layers.DepthwiseConv2D(3, strides=strides, padding="same", name=f"b{number}_dw")(x)
        x = k.layers.BatchNormalization(name=f"b{number}_dw_bn")(x)
        x = k.layers.Activation("relu", name=f"b{number}_dw_relu")(x)
        x = _conv_bn(k, x, filters, 1, name=f"b{number}_pw")
    x = k.layers.AveragePooling2D(3, name="pool")(x)
    outputs = k.layers.Dense(2, activation="softmax", name="dense")(k.layers.Flatten(name="flatten")(x))
    return k.Model(inputs, outputs, name=model_name)


def _ds_cnn(k, model_name: str):
    """DS-CNN (``keyword_spotting/keras_model.py``, ``ds_cnn``): a 10x4 stride-2 convolution of 64 filters,
    four depthwise-separable blocks of 64, 25x5 average pooling, 12 softmax."""
    inputs = k.Input((49, 10, 1), name="input")
    x = _conv_bn(k, inputs, 64, (10, 4), strides=2, name="stem")
    x = k.layers.Dropout(0.2, name="stem_dropout")(x)
    for number in range(1, 5):
        x = k.layers.DepthwiseConv2D(3, padding="same", name=f"b{number}_dw")(x)
        x = k.layers.BatchNormalization(name=f"b{number}_dw_bn")(x)
        x = k.layers.Activation("relu", name=f"b{number}_dw_relu")(x)
        x = _conv_bn(k, x, 64, 1, name=f"b{number}_pw")
    x = k.layers.Dropout(0.4, name="dropout")(x)
    x = k.layers.AveragePooling2D((25, 5), name="pool")(x)
    outputs = k.layers.Dense(12, activation="softmax", name="dense")(k.layers.Flatten(name="flatten")(x))
    return k.Model(inputs, outputs, name=model_name)


def _fc_autoencoder(k, model_name: str):
    """The anomaly-detection autoencoder (``anomaly_detection/keras_model.py``): Dense 128 x4, an 8-unit
    bottleneck, Dense 128 x4, each with batch norm and ReLU, then 640 linear outputs."""
    inputs = k.Input((640,), name="input")
    x = inputs
    for number, units in enumerate((128, 128, 128, 128, 8, 128, 128, 128, 128), 1):
        x = k.layers.Dense(units, name=f"dense{number}")(x)
        x = k.layers.BatchNormalization(name=f"bn{number}")(x)
        x = k.layers.Activation("relu", name=f"relu{number}")(x)
    outputs = k.layers.Dense(640, name="output")(x)
    return k.Model(inputs, outputs, name=model_name)


def _set_weights(model, rng: np.random.Generator) -> None:
    """Seeded weights in ``model.weights`` order: kernels U(-l, l) with l = sqrt(6 / fan_in) (He), biases
    U(-0.1, 0.1), batch-norm gamma U(0.5, 1.5) and beta U(-0.1, 0.1) (the moving statistics drawn too, then
    calibrated)."""
    for variable in model.weights:
        shape = tuple(variable.shape)
        kind = variable.path.rsplit("/", 1)[-1]
        if kind in ("kernel", "depthwise_kernel"):
            fan_in = int(np.prod(shape[:-1])) if kind == "kernel" else int(np.prod(shape[:2]))
            low, high = -np.sqrt(6.0 / fan_in), np.sqrt(6.0 / fan_in)
        elif kind == "gamma":
            low, high = 0.5, 1.5
        elif kind == "moving_variance":
            low, high = 0.5, 1.5
        else:  # bias, beta, moving_mean
            low, high = -0.1, 0.1
        variable.assign(rng.uniform(low, high, shape).astype(np.float32))
