"""Structured l1 pruning of Keras chain models, the sensitivity analysis and global weighted pruning of
OpTC (Algorithms 1 and 2, equations 3 to 5).

Pruning here really shrinks the network: a pruned Dense layer has fewer units, a pruned Conv2D fewer
filters, and the next weighted layer loses the matching inputs (through pooling, padding and a Flatten,
whose channels-last order is followed). The output neurons or filters kept are those with the largest
l1 norm of their weights, in their original order, so a pruned model computes exactly what the original
computes with the removed units' weights and biases set to zero (for activations with f(0) = 0), which
the tests check.

Written here rather than taken from a library: NNI and the TensorFlow Model Optimization toolkit prune by
masking (the zeros stay in the tensors, so the generated C would not shrink), and NNI's speed-up that
removes masked channels is for PyTorch only. The models are plain chains (``keras.Input`` then layers
one after another), which is what the zoo builds; anything else is refused with one line.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import ModelError

WEIGHTED = ("Dense", "Conv2D")
# Layers that keep the channels of their input where they are (the last axis).
CHANNEL_PRESERVING = ("MaxPooling2D", "AveragePooling2D", "ZeroPadding2D", "Activation", "ReLU", "Dropout")
DEFAULT_RATES = tuple(round(0.1 * step, 1) for step in range(1, 10))  # P = [0.1, ..., 0.9], as the paper


@dataclass(frozen=True)
class Sensitivity:
    """Algorithm 1's outcome for one layer: the rate at which quality first fell below the threshold
    (``p_max``, or None if it never did), the sensitivity s = 1 - p_max (eq. 3) and the quality per rate."""

    layer: str
    units: int
    p_max: float
    sensitivity: float
    dropped: bool  # quality fell below the threshold at p_max (else p_max is the largest rate tried)
    qualities: dict[float, float]


def prunable(keras_model) -> dict[str, int]:
    """The layers whose outputs may be pruned and their widths: every Dense and Conv2D but the last (the
    model's outputs are fixed by the task)."""
    layers = _chain(keras_model)
    weighted = [layer for layer in layers if _kind(layer) in WEIGHTED]
    return {layer.name: _width(layer) for layer in weighted[:-1]}


def kept_units(units: int, rate: float) -> int:
    """m = ceil(M (1 - p)) (eq. 5), at least one unit; rounded first so 128 (1 - 0.07 x 10) is 39, not 40."""
    return max(1, math.ceil(round(units * (1.0 - rate), 9)))


def l1_order(layer) -> np.ndarray:
    """The output units of a Dense or Conv2D layer from the largest l1 norm of their weights to the
    smallest (ties: the lower index first)."""
    kernel = np.asarray(layer.get_weights()[0])
    norms = np.abs(kernel).reshape(-1, kernel.shape[-1]).sum(axis=0)
    return np.argsort(-norms, kind="stable")


def prune(keras_model, keep: dict[str, int]):
    """A new model in which each layer named in ``keep`` has only that many output units: those with the
    largest l1 norm; the next weighted layer loses the inputs that fed on the removed ones."""
    from harness.models.tf_runtime import keras

    k = keras()
    layers = _chain(keras_model)
    widths = prunable(keras_model)
    for name, count in keep.items():
        if name not in widths:
            raise ModelError(f"{keras_model.name}: layer '{name}' cannot be pruned (prunable: {', '.join(widths)})")
        if not 1 <= count <= widths[name]:
            raise ModelError(f"{keras_model.name}: layer '{name}' has {widths[name]} units, cannot keep {count}")
    inputs = k.Input(shape=tuple(keras_model.inputs[0].shape[1:]), name=keras_model.inputs[0].name)
    x, weights = inputs, []
    channels: np.ndarray | None = None  # indices of the incoming channels kept (None: all)
    for layer in layers:
        kind, config = _kind(layer), layer.get_config()
        values = [np.asarray(w) for w in layer.get_weights()]
        if kind in WEIGHTED:
            kernel, bias = values
            if channels is not None:
                kernel = kernel[..., channels, :]
            outputs = None
            if layer.name in keep:
                outputs = np.sort(l1_order(layer)[:keep[layer.name]])
                kernel, bias = kernel[..., outputs], bias[outputs]
                config["units" if kind == "Dense" else "filters"] = len(outputs)
            values, channels = [kernel, bias], outputs
        elif kind == "Flatten":
            if channels is not None:
                spatial = int(np.prod(layer.input.shape[1:-1]))
                width = int(layer.input.shape[-1])
                channels = (np.arange(spatial)[:, None] * width + channels[None, :]).reshape(-1)
        elif kind not in CHANNEL_PRESERVING:
            raise ModelError(f"{keras_model.name}: cannot prune through layer '{layer.name}' ({kind})")
        clone = type(layer).from_config(config)
        x = clone(x)
        weights.append((clone, values))
    pruned = k.Model(inputs, x, name=keras_model.name)
    for clone, values in weights:
        if values:
            clone.set_weights(values)
    return pruned


def sensitivities(keras_model, error: Callable[[object], float], threshold: float,
                  rates: Sequence[float] = DEFAULT_RATES) -> list[Sensitivity]:
    """Algorithm 1: prune each layer alone at increasing rates until ``error`` (lower is better: the
    footnote-5 form of the algorithm) rises above ``threshold``; that rate is the layer's p_max.

    A layer whose error never rises above the threshold gets p_max = the largest rate tried.
    """
    widths = prunable(keras_model)
    found = []
    for name, units in widths.items():
        qualities: dict[float, float] = {}
        p_max, dropped = float(rates[-1]), False
        for rate in rates:
            qualities[float(rate)] = error(prune(keras_model, {name: kept_units(units, rate)}))
            if qualities[float(rate)] > threshold:
                p_max, dropped = float(rate), True
                break
        found.append(Sensitivity(name, units, p_max, 1.0 - p_max, dropped, qualities))
    return found


def initial_rates(found: Sequence[Sensitivity], steps: int) -> dict[str, float]:
    """Eq. 4: p_init = (1 - s) / J per layer."""
    if steps < 1:
        raise ModelError(f"the number of steps must be at least 1 (got {steps})")
    return {s.layer: (1.0 - s.sensitivity) / steps for s in found}


def step_counts(widths: dict[str, int], p_init: dict[str, float], j: int) -> dict[str, int]:
    """Algorithm 2 for iteration j: the units each layer keeps at rate p_i = p_init_i * j (eq. 5)."""
    return {name: kept_units(widths[name], p_init[name] * j) for name in widths}


def _chain(keras_model) -> list:
    """The model's layers after its input, checked to form a single chain."""
    layers = [layer for layer in keras_model.layers if _kind(layer) != "InputLayer"]
    if len(keras_model.inputs) != 1 or len(keras_model.outputs) != 1:
        raise ModelError(f"{keras_model.name}: pruning needs one input and one output")
    previous = keras_model.inputs[0]
    for layer in layers:
        if layer.input is not previous and getattr(layer.input, "name", None) != previous.name:
            raise ModelError(f"{keras_model.name}: pruning needs a chain of layers; '{layer.name}' is not "
                             "fed by the layer before it")
        previous = layer.output
    return layers


def _kind(layer) -> str:
    return type(layer).__name__


def _width(layer) -> int:
    return int(layer.get_config()["units" if _kind(layer) == "Dense" else "filters"])
