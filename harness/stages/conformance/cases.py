"""The generator conformance cases: single-layer and small-graph Keras models, one per layer type and option.

A case is plain data (``Case``: a name, an input shape and a chain of Keras layers given as class name and
arguments) or, for the few graphs that are not one chain (``Add``, ``Concatenate``), a chain for each branch
and how they join. ``build(case, work_dir)`` makes the model in Keras 3 with seeded weights and saves it with
the deterministic ``.keras`` writer (``tf_runtime.save_keras``), so one case always gives the same bytes; the
ONNX file is the exporter's the zoo and every user file get (``user_files``) when a stage loads the
``.keras`` file. Files are cached in ``<work>/conformance/<name>-<key>/<name>.keras``, keyed by the case's
content, the seed, this module's ``BUILDER_VERSION`` and the Keras version: a changed case is built again.

The cases cover what generators get wrong in practice (the ONNX backend tests are the model): Keras
``same`` padding is asymmetric (the extra row after) with even kernels or strides > 1, strides larger than
kernels skip inputs, dilation spreads the kernel, average pooling over padding divides by the valid count
only, softmax must subtract the maximum before ``exp``, and a ``Flatten`` after a convolution flattens in
channels-last order (which a channels-first importer has to undo).
"""

from __future__ import annotations

import fnmatch
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.digests import digest
from harness.errors import ConfigError

BUILDER_VERSION = 1
CACHE_DIR = "conformance"
WEIGHT_RANGE = 0.5  # weights uniform in [-0.5, 0.5]: activations stay O(1) for inputs in [-1, 1]

Layer = tuple[str, dict]  # a keras.layers class name and its arguments


@dataclass(frozen=True)
class Case:
    """One conformance model: ``layers`` after the input, or branches joined by ``merge`` then ``layers``.

    ``branches`` (each a chain from the input) joined by ``merge`` (a Keras merge layer) come first when
    given. ``weight_scale`` multiplies every kernel (large logits for softmax). ``checks`` says in words what
    the case is about: it is the row label of the report.
    """

    name: str
    input_shape: tuple[int, ...]
    layers: tuple[Layer, ...]
    checks: str
    branches: tuple[tuple[Layer, ...], ...] = ()
    merge: Layer | None = None
    weight_scale: float = 1.0

    def key(self, seed: int) -> str:
        from harness.models.tf_runtime import keras

        return digest([BUILDER_VERSION, self.name, self.input_shape, self.layers, self.branches, self.merge,
                       self.weight_scale, seed, keras().__version__])[:12]


def _conv(filters: int = 4, kernel=(3, 3), strides=(1, 1), padding: str = "valid", **extra) -> Layer:
    return ("Conv2D", {"filters": filters, "kernel_size": kernel, "strides": strides, "padding": padding, **extra})


def _pool(kind: str, size=(2, 2), strides=None, padding: str = "valid") -> Layer:
    return (kind, {"pool_size": size, "strides": strides or size, "padding": padding})


_IMG = (8, 8, 3)  # even height and width
_ODD = (7, 7, 2)  # odd height and width
_VEC = (16,)
_FLATTEN_DENSE: tuple[Layer, ...] = (("Flatten", {}), ("Dense", {"units": 5}))


def _activation_case(name: str, activation: str | None, checks: str, layer: Layer | None = None,
                     scale: float = 1.0) -> Case:
    """Dense with ``activation`` fused, or a Dense followed by the activation ``layer``."""
    if layer is None:
        return Case(name, _VEC, (("Dense", {"units": 8, "activation": activation}),), checks, weight_scale=scale)
    return Case(name, _VEC, (("Dense", {"units": 8}), layer), checks, weight_scale=scale)


CASES: tuple[Case, ...] = (
    # Dense
    Case("dense", _VEC, (("Dense", {"units": 8}),), "Dense, bias, linear"),
    Case("dense_nobias", _VEC, (("Dense", {"units": 8, "use_bias": False}),), "Dense without bias"),
    Case("dense_deep", _VEC, (("Dense", {"units": 12, "activation": "relu"}), ("Dense", {"units": 10,
         "activation": "relu"}), ("Dense", {"units": 4})), "three Dense layers, ReLU between"),
    Case("dense_single_in", (1,), (("Dense", {"units": 3}),), "Dense from one input"),
    # Convolution: padding modes, kernels, strides, dilation
    Case("conv_valid_k3_s1", _IMG, (_conv(), *_FLATTEN_DENSE), "Conv2D valid 3x3 stride 1"),
    Case("conv_valid_k1_s1", _IMG, (_conv(kernel=(1, 1)), *_FLATTEN_DENSE), "Conv2D 1x1 kernel"),
    Case("conv_valid_k1x3", _IMG, (_conv(kernel=(1, 3)), *_FLATTEN_DENSE), "Conv2D non-square 1x3 kernel"),
    Case("conv_valid_k3x2_s2x1", _ODD, (_conv(kernel=(3, 2), strides=(2, 1)), *_FLATTEN_DENSE),
         "Conv2D non-square 3x2 kernel, strides 2x1, odd input"),
    Case("conv_valid_k2_s3", _IMG, (_conv(kernel=(2, 2), strides=(3, 3)), *_FLATTEN_DENSE),
         "Conv2D valid, stride 3 larger than kernel 2"),
    Case("conv_valid_k1_s2", _ODD, (_conv(kernel=(1, 1), strides=(2, 2)), *_FLATTEN_DENSE),
         "Conv2D valid 1x1 kernel, stride 2 (stride larger than kernel)"),
    Case("conv_same_k3_s1", _IMG, (_conv(padding="same"), *_FLATTEN_DENSE), "Conv2D same, odd kernel 3, stride 1"),
    Case("conv_same_k5_s1", _ODD, (_conv(kernel=(5, 5), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, odd kernel 5, odd input"),
    Case("conv_same_k2_s1", _IMG, (_conv(kernel=(2, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, even kernel 2 (padding only after)"),
    Case("conv_same_k4_s1", _ODD, (_conv(kernel=(4, 4), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, even kernel 4 (1 before, 2 after)"),
    Case("conv_same_k3_s2", _IMG, (_conv(strides=(2, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, kernel 3 stride 2 on even input (asymmetric padding)"),
    Case("conv_same_k3_s2_odd", _ODD, (_conv(strides=(2, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, kernel 3 stride 2 on odd input (symmetric padding)"),
    Case("conv_same_k2_s2", _ODD, (_conv(kernel=(2, 2), strides=(2, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, even kernel 2, stride 2, odd input"),
    Case("conv_same_k1_s3", _IMG, (_conv(kernel=(1, 1), strides=(3, 3), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, stride 3 larger than kernel 1"),
    Case("conv_same_k2x3_s1x2", _IMG, (_conv(kernel=(2, 3), strides=(1, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, non-square kernel 2x3 and strides 1x2"),
    Case("conv_dilated_valid", _IMG, (_conv(dilation_rate=(2, 2)), *_FLATTEN_DENSE), "Conv2D valid, dilation 2"),
    Case("conv_dilated_same", _ODD, (_conv(dilation_rate=(2, 2), padding="same"), *_FLATTEN_DENSE),
         "Conv2D same, dilation 2 (effective kernel 5)"),
    Case("conv_nobias_relu", _IMG, (_conv(use_bias=False, activation="relu"), *_FLATTEN_DENSE),
         "Conv2D without bias, fused ReLU"),
    Case("conv_zeropad_asym", _ODD, (("ZeroPadding2D", {"padding": ((1, 2), (0, 1))}), _conv(),
                                     *_FLATTEN_DENSE), "explicit asymmetric ZeroPadding2D then Conv2D valid"),
    Case("conv_two_layers", _IMG, (_conv(filters=3, padding="same", activation="relu"),
                                   _conv(filters=2, strides=(2, 2)), *_FLATTEN_DENSE), "two Conv2D in a row"),
    # Pooling
    Case("maxpool_valid_2", _IMG, (_pool("MaxPooling2D"), *_FLATTEN_DENSE), "MaxPooling2D 2x2 stride 2"),
    Case("maxpool_valid_3_s2", _ODD, (_pool("MaxPooling2D", (3, 3), (2, 2)), *_FLATTEN_DENSE),
         "MaxPooling2D 3x3 stride 2, overlapping windows"),
    Case("maxpool_same_3_s2", _IMG, (_pool("MaxPooling2D", (3, 3), (2, 2), "same"), *_FLATTEN_DENSE),
         "MaxPooling2D same (padded), 3x3 stride 2"),
    Case("maxpool_same_2_odd", _ODD, (_pool("MaxPooling2D", padding="same"), *_FLATTEN_DENSE),
         "MaxPooling2D same, 2x2 on odd input (padding after)"),
    Case("avgpool_valid_2", _IMG, (_pool("AveragePooling2D"), *_FLATTEN_DENSE), "AveragePooling2D 2x2 stride 2"),
    Case("avgpool_valid_3_s1", _ODD, (_pool("AveragePooling2D", (3, 3), (1, 1)), *_FLATTEN_DENSE),
         "AveragePooling2D 3x3 stride 1"),
    Case("avgpool_same_3_s1", _ODD, (_pool("AveragePooling2D", (3, 3), (1, 1), "same"), *_FLATTEN_DENSE),
         "AveragePooling2D same (padding not counted in the mean)"),
    Case("avgpool_same_2_odd", _ODD, (_pool("AveragePooling2D", padding="same"), *_FLATTEN_DENSE),
         "AveragePooling2D same, 2x2 on odd input"),
    Case("globalavgpool", _IMG, (_conv(), ("GlobalAveragePooling2D", {}), ("Dense", {"units": 5})),
         "GlobalAveragePooling2D"),
    Case("globalmaxpool", _IMG, (_conv(), ("GlobalMaxPooling2D", {}), ("Dense", {"units": 5})),
         "GlobalMaxPooling2D"),
    # Batch normalisation
    Case("batchnorm_dense", _VEC, (("Dense", {"units": 8}), ("BatchNormalization", {})),
         "BatchNormalization on a vector"),
    Case("batchnorm_conv", _IMG, (_conv(), ("BatchNormalization", {}), *_FLATTEN_DENSE),
         "BatchNormalization on channels after Conv2D"),
    # Flatten between channels-last and channels-first
    Case("flatten_conv_dense", _IMG, (_conv(filters=3, strides=(2, 2)), ("Flatten", {}), ("Dense", {"units": 6})),
         "Flatten after Conv2D (channels-last order) into Dense"),
    Case("flatten_input_dense", _ODD, _FLATTEN_DENSE, "Flatten of the input image into Dense"),
    Case("flatten_reshape_dense", _IMG, (_conv(), ("Reshape", {"target_shape": (-1,)}), ("Dense", {"units": 5})),
         "Reshape to a vector (a Flatten by another layer) after Conv2D, into Dense"),
    Case("flatten_output", _IMG, (_conv(filters=2, strides=(2, 2)), ("Flatten", {})),
         "Flatten as the last layer (output order HWC)"),
    # Merges
    Case("add_dense", _VEC, (("Dense", {"units": 4}),), "Add of two Dense branches",
         branches=((("Dense", {"units": 6}),), (("Dense", {"units": 6, "activation": "relu"}),)),
         merge=("Add", {})),
    Case("add_residual_conv", _IMG, _FLATTEN_DENSE, "Add of a same Conv2D and its input (residual)",
         branches=((_conv(filters=3, padding="same"),), ()), merge=("Add", {})),
    Case("concat_dense", _VEC, (("Dense", {"units": 4}),), "Concatenate of two Dense branches",
         branches=((("Dense", {"units": 3}),), (("Dense", {"units": 5}),)), merge=("Concatenate", {})),
    Case("concat_channels", _IMG, _FLATTEN_DENSE, "Concatenate of two Conv2D on the channel axis",
         branches=((_conv(filters=2, padding="same"),), (_conv(filters=3, kernel=(1, 1)),)),
         merge=("Concatenate", {"axis": -1})),
    Case("concat_width", _IMG, _FLATTEN_DENSE, "Concatenate on the width axis (axis 2 of NHWC)",
         branches=((_conv(filters=2),), (_conv(filters=2, kernel=(3, 2), dilation_rate=(1, 2)),)),
         merge=("Concatenate", {"axis": 2})),
    # Activations (every one codegen knows), fused into Dense or as a layer
    _activation_case("act_relu", "relu", "ReLU"),
    _activation_case("act_relu6", "relu6", "ReLU6"),
    _activation_case("act_relu_max", None, "ReLU layer with max_value 0.6", ("ReLU", {"max_value": 0.6})),
    _activation_case("act_relu_slope", None, "ReLU layer with negative_slope 0.1", ("ReLU", {"negative_slope": 0.1})),
    _activation_case("act_leaky_relu", None, "LeakyReLU layer (slope 0.1)", ("LeakyReLU", {"negative_slope": 0.1})),
    _activation_case("act_tanh", "tanh", "tanh"),
    _activation_case("act_sigmoid", "sigmoid", "sigmoid"),
    _activation_case("act_elu", None, "ELU layer (alpha 0.7)", ("ELU", {"alpha": 0.7})),
    _activation_case("act_selu", "selu", "SELU"),
    _activation_case("act_softplus", "softplus", "softplus"),
    _activation_case("act_softsign", "softsign", "softsign"),
    _activation_case("act_silu", "silu", "SiLU (swish)"),
    _activation_case("act_exponential", "exponential", "exponential"),
    _activation_case("act_softmax", "softmax", "softmax"),
    _activation_case("act_softmax_large", "softmax", "softmax with large logits (|x| up to ~100)", scale=60.0),
    _activation_case("act_softmax_layer", None, "Softmax layer", ("Softmax", {})),
    Case("act_softmax_channels", _IMG, (_conv(filters=4), ("Softmax", {"axis": -1})),
         "softmax over the channels of a Conv2D output"),
    Case("act_tanh_conv", _IMG, (_conv(), ("Activation", {"activation": "tanh"}), *_FLATTEN_DENSE),
         "tanh Activation layer after Conv2D"),
    _activation_case("act_hard_sigmoid", "hard_sigmoid", "hard_sigmoid (Keras: relu6(x + 3) / 6)", scale=6.0),
    _activation_case("act_hard_silu", "hard_silu", "hard_silu / hard_swish (MobileNetV3)", scale=6.0),
    # MobileNet-class and keyword-spotting layers (issue 26)
    Case("conv_groups", (6, 6, 4), (_conv(filters=6, groups=2), *_FLATTEN_DENSE), "Conv2D with groups=2"),
    Case("depthwise_same_s2", _ODD, (("DepthwiseConv2D", {"kernel_size": 3, "strides": 2, "padding": "same",
                                                          "depth_multiplier": 2}), *_FLATTEN_DENSE),
         "DepthwiseConv2D same, stride 2, depth multiplier 2"),
    Case("separable_valid", _IMG, (("SeparableConv2D", {"filters": 4, "kernel_size": 3, "activation": "relu"}),
                                   *_FLATTEN_DENSE), "SeparableConv2D (depthwise then 1x1), fused ReLU"),
    Case("conv_transpose_same_s2", (4, 5, 3), (("Conv2DTranspose", {"filters": 2, "kernel_size": 3, "strides": 2,
                                                                    "padding": "same"}), *_FLATTEN_DENSE),
         "Conv2DTranspose same, stride 2 (odd kernel: asymmetric output cropping)"),
    Case("upsampling_nearest", (3, 4, 2), (("UpSampling2D", {"size": (2, 3)}), *_FLATTEN_DENSE),
         "UpSampling2D nearest 2x3"),
    Case("upsampling_bilinear", (3, 4, 2), (("UpSampling2D", {"size": 2, "interpolation": "bilinear"}),
                                            *_FLATTEN_DENSE), "UpSampling2D bilinear (half-pixel centres)"),
    Case("cropping_asym", _ODD, (("Cropping2D", {"cropping": ((1, 2), (0, 3))}), *_FLATTEN_DENSE),
         "Cropping2D, asymmetric"),
    Case("rescaling", _IMG, (("Rescaling", {"scale": 0.5, "offset": -0.25}), _conv(), *_FLATTEN_DENSE),
         "Rescaling x * scale + offset before Conv2D"),
)
_BY_NAME = {case.name: case for case in CASES}


def names() -> list[str]:
    return [case.name for case in CASES]


def select(patterns: list[str] | None) -> list[Case]:
    """The cases whose name matches any of the shell ``patterns`` (all when none); a pattern matching
    nothing is a ConfigError naming it."""
    if not patterns:
        return list(CASES)
    unmatched = [p for p in patterns if not fnmatch.filter(_BY_NAME, p)]
    if unmatched:
        raise ConfigError(f"no conformance case matches {', '.join(repr(p) for p in unmatched)} "
                          f"(cases: {', '.join(names())})")
    return [case for case in CASES if any(fnmatch.fnmatchcase(case.name, p) for p in patterns)]


def path(case: Case, work_dir: Path, seed: int = 0) -> Path:
    """Where the case's ``.keras`` file is cached (its name is the case's: the model's name in reports)."""
    return Path(work_dir) / CACHE_DIR / f"{case.name}-{case.key(seed)}" / f"{case.name}.keras"


def build(case: Case, work_dir: Path, seed: int = 0) -> Path:
    """The case's ``.keras`` file, built (seeded weights, deterministic save) unless already cached."""
    from harness.models.tf_runtime import save_keras

    target = path(case, work_dir, seed)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.stem}.tmp.keras")
    save_keras(keras_model(case, seed), temporary)
    temporary.replace(target)
    return target


def keras_model(case: Case, seed: int = 0):
    """The Keras 3 model of ``case``: layers named by position (Keras's own names count per process and
    would change the bytes), every weight drawn from a generator seeded by the case's name and ``seed``."""
    from harness.models.tf_runtime import keras

    k = keras()
    counter = iter(range(1000))

    def chain(x, layers: tuple[Layer, ...], prefix: str):
        for cls, arguments in layers:
            x = getattr(k.layers, cls)(**arguments, name=f"{prefix}{next(counter)}_{cls.lower()}")(x)
        return x

    inputs = k.Input(shape=case.input_shape, name="input")
    x = inputs
    if case.branches:
        joined = [chain(inputs, branch, f"b{i}_") for i, branch in enumerate(case.branches)]
        cls, arguments = case.merge
        x = getattr(k.layers, cls)(**arguments, name=f"{next(counter)}_{cls.lower()}")(joined)
    x = chain(x, case.layers, "")
    model = k.Model(inputs, x, name=case.name)
    _set_weights(model, case, seed)
    return model


def _set_weights(model, case: Case, seed: int) -> None:
    """Seeded weights; batch-norm variances positive and means/scales away from the identity, so a generator
    that ignores one of them fails."""
    rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])
    for variable in model.weights:
        shape = tuple(variable.shape)
        name = variable.path.rsplit("/", 1)[-1]
        if name == "moving_variance":
            value = rng.uniform(0.5, 2.0, shape)
        elif name == "gamma":
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.uniform(-WEIGHT_RANGE, WEIGHT_RANGE, shape)
            if name == "kernel":
                value = value * case.weight_scale
        variable.assign(value.astype(np.float32))


def build_all(cases: list[Case], work_dir: Path, seed: int = 0) -> dict[str, Path]:
    """Every case's file (built once, then read from the cache)."""
    return {case.name: build(case, work_dir, seed) for case in cases}
