"""The named benchmarks of ACETONE (ECRTS 2022, section 4.1) as data, and their builder.

Each architecture is a list of layer specs; ``build`` turns one into a Keras
model whose weights come from ``numpy.random.default_rng`` seeded by the zoo
seed and the model's name, set explicitly with ``set_weights`` (nothing is
downloaded or trained). Like the paper's, the weights are random: He-uniform
for layers followed by ReLU and LeCun-uniform for the others keeps every
layer's output of order one, and biases are U(-0.1, 0.1), never zero.
"""

from __future__ import annotations

import hashlib
import json
import zlib

import numpy as np

# Bump when the builder changes in a way that changes the weights or the files.
BUILDER_VERSION = 1
BIAS_RANGE = 0.1

# Layer specs: ("dense", units, activation) | ("conv", filters, kernel, stride, padding, activation)
# | ("maxpool", pool, stride, padding) | ("avgpool", pool, stride, padding) | ("zeropad", pad) | ("flatten",)
# | ("gavgpool",) (global average pooling)
# | ("branches", name, (specs, specs, ...)): every branch reads the same tensor, their outputs are
#   concatenated along the channels; layers inside are named ``<name>_<branch letter><k>_<kind>``
#   (the multi-core paper's Figure 2 split LeNet-5 and Figure 10 inception modules).


def _acas(hidden: tuple[int, ...]) -> dict:
    layers = [("dense", width, "relu") for width in hidden] + [("dense", 5, "linear")]
    return {"input_shape": (5,), "layers": layers}


def _vgg16() -> dict:
    layers: list[tuple] = []
    for filters, repeat in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        layers += [("conv", filters, 3, 1, "same", "relu")] * repeat
        layers.append(("maxpool", 2, 2, "valid"))
    layers += [("flatten",), ("dense", 4096, "relu"), ("dense", 4096, "relu"), ("dense", 1000, "softmax")]
    return {"input_shape": (224, 224, 3), "layers": layers}


def _lenet5_split() -> dict:
    """The multi-core paper's Figure 2: LeNet-5 whose first two layers are split into two branches.

    Each branch is a 5x5 tanh convolution with half of the six filters and its
    average pooling; the concatenation gives back the six channels conv2 reads.
    """
    branch = (("conv", 3, 5, 1, "valid", "tanh"), ("avgpool", 2, 2, "valid"))
    return {"input_shape": (28, 28, 1),
            "layers": [("branches", "split", (branch, branch)),
                       ("conv", 16, 5, 1, "valid", "tanh"), ("avgpool", 2, 2, "valid"), ("flatten",),
                       ("dense", 120, "tanh"), ("dense", 84, "tanh"), ("dense", 10, "softmax")]}


def _inception(a: int, b: tuple[int, int], c: tuple[int, int], d: int) -> tuple:
    """GoogLeNet's inception module (the paper's Figure 10, right): 1x1 | 1x1-3x3 | 1x1-5x5 | maxpool-1x1."""
    return (
        (("conv", a, 1, 1, "same", "relu"),),
        (("conv", b[0], 1, 1, "same", "relu"), ("conv", b[1], 3, 1, "same", "relu")),
        (("conv", c[0], 1, 1, "same", "relu"), ("conv", c[1], 5, 1, "same", "relu")),
        (("maxpool", 3, 1, "same"), ("conv", d, 1, 1, "same", "relu")),
    )


def _inception_mini() -> dict:
    """The multi-core paper's Figure 10 at 32x32x3 and a few channels, so a CI run stays short.

    conv-maxpool-conv-maxpool, two inception modules of four branches, global
    average pooling and a 10-way softmax Dense (the paper's avgpool-reshape-gemm).
    """
    return {"input_shape": (32, 32, 3),
            "layers": [("conv", 8, 3, 1, "same", "relu"), ("maxpool", 2, 2, "valid"),
                       ("conv", 16, 3, 1, "same", "relu"), ("maxpool", 2, 2, "valid"),
                       ("branches", "inception1", _inception(8, (8, 12), (4, 4), 4)),
                       ("branches", "inception2", _inception(12, (8, 16), (4, 8), 8)),
                       ("gavgpool",), ("dense", 10, "softmax")]}


ARCHITECTURES: dict[str, dict] = {
    "acas-reg50": _acas((50,) * 7),
    "acas-reg100": _acas((100,) * 7),
    "acas-reg200": _acas((200,) * 7),
    "acas-decr128": _acas((128, 128, 64, 32, 16)),
    "acas-decr256": _acas((256, 256, 128, 64, 32, 16)),
    "lenet5": {
        "input_shape": (28, 28, 1),
        "layers": [
            ("conv", 6, 5, 1, "valid", "tanh"),
            ("avgpool", 2, 2, "valid"),
            ("conv", 16, 5, 1, "valid", "tanh"),
            ("avgpool", 2, 2, "valid"),
            ("flatten",),
            ("dense", 120, "tanh"),
            ("dense", 84, "tanh"),
            ("dense", 10, "softmax"),
        ],
    },
    "cifarnet": {
        "input_shape": (32, 32, 3),
        "layers": [
            ("zeropad", 1),
            ("conv", 32, 5, 1, "valid", "relu"),
            ("maxpool", 2, 2, "valid"),
            ("conv", 64, 3, 1, "valid", "relu"),
            ("maxpool", 2, 2, "valid"),
            ("conv", 64, 3, 1, "valid", "relu"),
            ("flatten",),
            ("dense", 64, "relu"),
            ("dense", 10, "linear"),
        ],
    },
    "alexnet": {
        "input_shape": (228, 228, 3),
        "layers": [
            ("conv", 64, 11, 4, "valid", "relu"),
            ("maxpool", 3, 2, "valid"),
            ("conv", 192, 5, 1, "same", "relu"),
            ("maxpool", 3, 2, "valid"),
            ("conv", 384, 3, 1, "same", "relu"),
            ("conv", 256, 3, 1, "same", "relu"),
            ("conv", 256, 3, 1, "same", "relu"),
            ("maxpool", 3, 2, "valid"),
            ("flatten",),
            ("dense", 4096, "relu"),
            ("dense", 4096, "relu"),
            ("dense", 1000, "softmax"),
        ],
    },
    "vgg16": _vgg16(),
    "lenet5-split": _lenet5_split(),
    "inception-mini": _inception_mini(),
}


def fingerprint(name: str, seed: int) -> str:
    """A digest of everything that determines the files built for (name, seed)."""
    spec = {"name": name, "seed": seed, "builder": BUILDER_VERSION, **ARCHITECTURES[name]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def rng_for(name: str, seed: int) -> np.random.Generator:
    """The generator of one model's weights: depends on the seed and the name only."""
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def build(name: str, seed: int):
    """The Keras model of benchmark ``name`` with seeded random weights."""
    from harness.models.tf_runtime import keras

    k = keras()
    arch = ARCHITECTURES[name]
    inputs = k.Input(shape=arch["input_shape"], name="input")
    activations: dict[str, str] = {}  # weighted layer name -> its activation (for the initialiser)
    x = _apply(k, arch["layers"], inputs, {}, "", activations)
    model = k.Model(inputs, x, name=name.replace("-", "_"))
    _set_weights(model, activations, rng_for(name, seed))
    return model


def _apply(k, specs, x, counts: dict[str, int], prefix: str, activations: dict[str, str]):
    """``specs`` applied in turn to ``x``; branches read the same tensor and are concatenated."""
    for spec in specs:
        kind = spec[0]
        if kind == "branches":
            _, name, branches = spec
            outs = [_apply(k, branch, x, {}, f"{name}_{chr(ord('a') + i)}", activations)
                    for i, branch in enumerate(branches)]
            x = k.layers.Concatenate(name=f"{name}_concat")(outs)
            continue
        counts[kind] = counts.get(kind, 0) + 1
        layer_name = f"{prefix}{counts[kind]}_{kind}" if prefix else f"{kind}{counts[kind]}"
        if kind in ("dense", "conv"):
            activations[layer_name] = spec[-1]
        x = _layer(k, spec, layer_name)(x)
    return x


def _layer(k, spec: tuple, name: str):
    kind = spec[0]
    if kind == "dense":
        _, units, activation = spec
        return k.layers.Dense(units, activation=activation, name=name)
    if kind == "conv":
        _, filters, kernel, stride, padding, activation = spec
        return k.layers.Conv2D(filters, kernel, strides=stride, padding=padding, activation=activation, name=name)
    if kind == "maxpool":
        _, pool, stride, padding = spec
        return k.layers.MaxPooling2D(pool, strides=stride, padding=padding, name=name)
    if kind == "avgpool":
        _, pool, stride, padding = spec
        return k.layers.AveragePooling2D(pool, strides=stride, padding=padding, name=name)
    if kind == "zeropad":
        return k.layers.ZeroPadding2D(spec[1], name=name)
    if kind == "flatten":
        return k.layers.Flatten(name=name)
    if kind == "gavgpool":
        return k.layers.GlobalAveragePooling2D(name=name)
    raise ValueError(f"unknown layer spec {spec!r}")


def _set_weights(model, activations: dict[str, str], rng: np.random.Generator) -> None:
    """Kernel ~ U(-l, l), l = sqrt(6/fan_in) before ReLU (He), sqrt(3/fan_in) otherwise (LeCun).

    Layers draw in ``model.layers`` order, the order of the builds before branches existed.
    """
    weighted = [layer for layer in model.layers if layer.weights]
    assert sorted(layer.name for layer in weighted) == sorted(activations)
    for layer in weighted:
        activation = activations[layer.name]
        kernel, bias = layer.get_weights()
        fan_in = int(np.prod(kernel.shape[:-1]))
        limit = np.sqrt((6.0 if activation == "relu" else 3.0) / fan_in)
        layer.set_weights([_uniform(rng, kernel.shape, limit), _uniform(rng, bias.shape, BIAS_RANGE)])


def _uniform(rng: np.random.Generator, shape: tuple[int, ...], limit: float) -> np.ndarray:
    values = rng.random(shape, dtype=np.float32)
    return ((values * 2.0 - 1.0) * np.float32(limit)).astype(np.float32)


def parameter_count(name: str) -> int:
    """Trainable parameters of benchmark ``name``, from its architecture alone (no TF)."""
    return _count(ARCHITECTURES[name]["layers"], tuple(ARCHITECTURES[name]["input_shape"]))[0]


def _count(specs, shape: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """(parameters, output shape) of ``specs`` applied to a tensor of ``shape``."""
    total = 0
    for spec in specs:
        kind = spec[0]
        if kind == "branches":
            counted = [_count(branch, shape) for branch in spec[2]]
            total += sum(params for params, _ in counted)
            shape = (*counted[0][1][:2], sum(out[2] for _, out in counted))
        elif kind == "gavgpool":
            shape = (shape[2],)
        elif kind == "dense":
            total += shape[0] * spec[1] + spec[1]
            shape = (spec[1],)
        elif kind == "conv":
            _, filters, kernel, stride, padding, _ = spec
            total += kernel * kernel * shape[2] * filters + filters
            shape = (*_pooled(shape[:2], kernel, stride, padding), filters)
        elif kind in ("maxpool", "avgpool"):
            _, pool, stride, padding = spec
            shape = (*_pooled(shape[:2], pool, stride, padding), shape[2])
        elif kind == "zeropad":
            shape = (shape[0] + 2 * spec[1], shape[1] + 2 * spec[1], shape[2])
        elif kind == "flatten":
            shape = (int(np.prod(shape)),)
    return total, shape


def output_shape(name: str) -> tuple[int, ...]:
    arch = ARCHITECTURES[name]
    return (next(spec[1] for spec in reversed(arch["layers"]) if spec[0] == "dense"),)


def _pooled(hw: tuple[int, ...], kernel: int, stride: int, padding: str) -> tuple[int, int]:
    if padding == "same":
        return tuple(-(-n // stride) for n in hw)
    return tuple((n - kernel) // stride + 1 for n in hw)
