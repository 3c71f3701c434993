"""The ACAS-Xu ``.nnet`` text format (Julian et al., Stanford 2016): read, write, convert to Keras.

Layout of a file, comma-separated values (a trailing comma is allowed)::

    // any number of header comment lines
    numLayers, inputSize, outputSize, maxLayerSize
    size_0, size_1, ..., size_numLayers            (size_0 = inputSize)
    symmetric flag                                 (unused)
    input minimums    (inputSize values)
    input maximums    (inputSize values)
    means             (inputSize + 1 values: inputs, then one for the outputs)
    ranges            (inputSize + 1 values)
    for each layer: size_{i+1} weight rows of size_i values, then size_{i+1} bias lines

Hidden layers are ReLU, the output layer is linear. The minimums, maximums,
means and ranges describe how a user normalises inputs and de-normalises
outputs; that is *not* part of the network, which Assay runs on normalised
inputs, exactly like the Keras and ONNX files it converts the network to.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.names import identifier


@dataclass
class NNet:
    """A parsed ``.nnet`` network; ``weights[i]`` has shape (out, in) as in the file."""

    weights: list[np.ndarray]
    biases: list[np.ndarray]
    input_min: np.ndarray
    input_max: np.ndarray
    means: np.ndarray
    ranges: np.ndarray

    @property
    def sizes(self) -> list[int]:
        return [int(self.weights[0].shape[1])] + [int(w.shape[0]) for w in self.weights]

    def normalized_domain(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """Each input's own normalised interval: ``(min - mean) / range`` .. ``(max - mean) / range``.

        Returned as (lows, highs), one value per input; a zero range counts as 1
        (the input is only centred), a negative one swaps the ends.
        """
        n = self.sizes[0]
        ranges = np.where(self.ranges[:n] == 0, 1.0, self.ranges[:n])
        a = (self.input_min - self.means[:n]) / ranges
        b = (self.input_max - self.means[:n]) / ranges
        return tuple(float(v) for v in np.minimum(a, b)), tuple(float(v) for v in np.maximum(a, b))


def read(path: Path) -> NNet:
    """Parse a ``.nnet`` file; a ModelError names the file, the line and the cause."""
    path = Path(path)
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not an NNet text file (binary content)") from None
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), 1)]
    lines = [(number, line) for number, line in lines if line and not line.startswith("//")]
    cursor = iter(lines)

    def row(what: str, count: int | None, kind=float) -> np.ndarray:
        try:
            number, line = next(cursor)
        except StopIteration:
            raise ModelError(f"{path}: truncated file: expected {what}, found end of file") from None
        try:
            values = [kind(value) for value in line.split(",") if value.strip()]
        except ValueError:
            raise ModelError(f"{path}: line {number}: expected numbers for {what}, got {line[:40]!r}") from None
        if count is not None and len(values) != count:
            raise ModelError(f"{path}: line {number}: shape mismatch: expected {count} values for {what}, "
                             f"got {len(values)}")
        return np.array(values, dtype=np.float64 if kind is float else np.int64)

    header = row("the header numLayers,inputSize,outputSize,maxLayerSize", 4, int)
    num_layers, input_size, output_size, max_size = (int(v) for v in header)
    if num_layers < 1 or input_size < 1 or output_size < 1:
        raise ModelError(f"{path}: not an NNet file: header {header.tolist()} is not positive")
    sizes = [int(v) for v in row("the layer sizes", num_layers + 1, int)]
    if sizes[0] != input_size or sizes[-1] != output_size or max(sizes) != max_size or min(sizes) < 1:
        raise ModelError(f"{path}: shape mismatch: layer sizes {sizes} disagree with the header {header.tolist()}")
    row("the symmetric flag", None)
    input_min = row("the input minimums", input_size)
    input_max = row("the input maximums", input_size)
    means = row("the means", input_size + 1)
    ranges = row("the ranges", input_size + 1)
    weights, biases = [], []
    for layer, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        weights.append(np.stack([row(f"layer {layer} weight row {r}", n_in) for r in range(n_out)]))
        biases.append(np.concatenate([row(f"layer {layer} bias {r}", 1) for r in range(n_out)]))
    for what, values in (("input minimums", input_min), ("input maximums", input_max), ("means", means),
                         ("ranges", ranges)):
        if not np.all(np.isfinite(values)):
            raise ModelError(f"{path}: the {what} contain NaN or infinity")
    if np.any(input_min > input_max):
        first = int(np.argmax(input_min > input_max))
        raise ModelError(f"{path}: input {first}: minimum {input_min[first]:g} is above maximum {input_max[first]:g}")
    for layer, (w, b) in enumerate(zip(weights, biases)):
        if not (np.all(np.isfinite(w)) and np.all(np.isfinite(b))):
            raise ModelError(f"{path}: layer {layer}: weights or biases contain NaN or infinity")
    leftover = next(cursor, None)
    if leftover is not None:
        raise ModelError(f"{path}: line {leftover[0]}: shape mismatch: data after the last layer")
    return NNet(weights, biases, input_min, input_max, means, ranges)


def write(path: Path, net: NNet, comment: str = "Written by Assay (harness.models.nnet)") -> None:
    """Write ``net`` in the ``.nnet`` format with float32-exact (9 significant digit) values."""
    sizes = net.sizes

    def fmt(values) -> str:
        return ",".join(f"{float(v):.9g}" for v in np.ravel(values)) + ","

    lines = [f"// {comment}", f"{len(net.weights)},{sizes[0]},{sizes[-1]},{max(sizes)},",
             ",".join(str(s) for s in sizes) + ",", "0,",
             fmt(net.input_min), fmt(net.input_max), fmt(net.means), fmt(net.ranges)]
    for w, b in zip(net.weights, net.biases):
        lines += [fmt(r) for r in w]
        lines += [fmt([v]) for v in b]
    Path(path).write_text("\n".join(lines) + "\n")


def from_keras(keras_model, input_domain: tuple[float, float] = (-0.5, 0.5)) -> NNet:
    """An NNet of a Keras stack of Dense layers (ReLU hidden, linear output), identity normalisation."""
    dense = [layer for layer in keras_model.layers if layer.weights]
    for index, layer in enumerate(dense):
        expected = "linear" if index == len(dense) - 1 else "relu"
        if type(layer).__name__ != "Dense" or layer.activation.__name__ != expected:
            raise ModelError(f"{keras_model.name}: layer '{layer.name}' is not a Dense {expected} layer; "
                             "the NNet format holds ReLU Dense stacks with a linear output only")
    weights = [layer.kernel.numpy().T.astype(np.float64) for layer in dense]
    biases = [layer.bias.numpy().astype(np.float64) for layer in dense]
    n = weights[0].shape[1]
    return NNet(weights, biases, np.full(n, input_domain[0]), np.full(n, input_domain[1]),
                np.zeros(n + 1), np.ones(n + 1))


def to_keras(net: NNet, name: str = "nnet"):
    """The Keras Dense stack computing ``net`` on normalised inputs (float32 weights)."""
    from harness.models.tf_runtime import keras

    k = keras()
    inputs = k.Input(shape=(net.sizes[0],), name="input")
    x = inputs
    for index, (w, b) in enumerate(zip(net.weights, net.biases)):
        last = index == len(net.weights) - 1
        layer = k.layers.Dense(w.shape[0], activation="linear" if last else "relu", name=f"dense{index + 1}")
        x = layer(x)
        layer.set_weights([w.T.astype(np.float32), b.astype(np.float32)])
    return k.Model(inputs, x, name=identifier(name, "nnet"))
