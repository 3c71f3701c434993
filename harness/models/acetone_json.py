"""ACETONE's JSON model description: read, validate, convert to a Keras model.

ACETONE (github.com/onera/acetone) writes this format from a Keras model
(``JSON_from_keras_model``): Keras's own ``to_json()`` with the weights and a
few shape fields added, all of it read back by its ``parser_JSON.load_json``.
The keys read here are those that parser reads for a sequential network::

    config.data_format                    "channels_last" or "channels_first"
    config.layers[0]                      the input: class_name InputLayer,
        config.input_shape                [null, C, H, W] or [null, N]
        config.size, config.dtype         element count; "float32" or "float64"
    config.layers[i], i >= 1              class_name, config.name, config.prev_layer_idx
        Dense       config.units, config.activation, weights (in, out) or (1, 1, in, out), biases (out,)
        Conv2D      config.filters, kernel_size, strides, padding, dilation_rate,
                    activation, size, input_shape, output_shape;
                    weights (in_channels, kh, kw, filters), biases (filters,)
        MaxPooling2D, AveragePooling2D
                    config.pool_size, strides, padding, size, input_shape, output_shape
        Flatten     config.size, config.input_shape
        ZeroPadding2D  config.padding (n, [h, w] or [[top, bottom], [left, right]]), size, input_shape
        Dropout     nothing (the identity at inference)

Image shapes in the file (``input_shape``, ``output_shape``) are channels-first,
[batch, C, H, W], whatever ``data_format`` says; ACETONE computes in that
order too. The function a file describes is the Keras model it came from, so
the model built here is channels-last and takes H×W×C inputs. The one place the
data format changes the function is Flatten: with ``channels_last`` ACETONE
flattens in H, W, C order like Keras; with ``channels_first`` in C, H, W order,
which the converted model reproduces by permuting the rows of the Dense layer
that follows. Explicit Conv2D padding ``[top, left, bottom, right]`` (the
order of ACETONE's ``compute_padding``) becomes a ZeroPadding2D before a
``valid`` convolution.

ACETONE reads only the first element of ``strides``, ``pool_size`` and
``dilation_rate``, so unequal pairs are refused rather than silently changed.
Weights are converted to float32 (the precision Assay compares in).

Note: ACETONE's importer since its July 2025 change of the Conv2D IR to
(filters, C, kh, kw) (commit 32858cb) hands the file's (C, kh, kw, filters)
Conv2D weights through unchanged; the layout read here is the one its writer
produces.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.names import identifier

ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "leaky_relu", "softmax")  # as ACETONE's parser names them
DATA_FORMATS = ("channels_last", "channels_first")
DTYPES = ("float32", "float64")
LAYER_TYPES = ("Dense", "Conv2D", "MaxPooling2D", "AveragePooling2D", "Flatten", "ZeroPadding2D", "Dropout")
_INPUT_TYPES = ("InputLayer", "Input")
_MERGE_TYPES = ("Add", "Multiply", "Subtract", "Concatenate", "Maximum", "Minimum", "Average")


@dataclass(frozen=True)
class Step:
    """One Keras layer of the converted model: its class, constructor options and weights (Keras order).

    ``source`` is the layer's name in the file, kept in the Keras layer name so
    a failure in a later stage can be traced back to the file.
    """

    kind: str
    source: str
    output_shape: tuple[int, ...]  # channels-last, batch excluded
    options: dict = field(default_factory=dict)
    weights: tuple[np.ndarray, ...] = ()


@dataclass
class AcetoneNet:
    """A validated ACETONE JSON network as a chain of Keras layers on a channels-last input."""

    input_shape: tuple[int, ...]  # (N,) or (H, W, C)
    steps: list[Step] = field(default_factory=list)

    @property
    def output_shape(self) -> tuple[int, ...]:
        return self.steps[-1].output_shape if self.steps else self.input_shape


def read(path: Path) -> AcetoneNet:
    """Parse and check an ACETONE JSON file; a ModelError names the file, the layer and the cause."""
    path = Path(path)
    try:
        document = json.loads(path.read_text())
    except UnicodeDecodeError:
        raise ModelError(f"{path}: not a JSON text file (binary content)") from None
    except json.JSONDecodeError as error:
        raise ModelError(f"{path}: not valid JSON (line {error.lineno} column {error.colno}: {error.msg})") from None
    return _Reader(path).network(document)


def to_keras(net: AcetoneNet, name: str = "acetone"):
    """The channels-last Keras model computing ``net``, weights set in float32."""
    from harness.models.tf_runtime import keras

    k = keras()
    inputs = k.Input(shape=net.input_shape, name="input")
    x = inputs
    for index, step in enumerate(net.steps):
        layer = getattr(k.layers, step.kind)(name=f"l{index}_{identifier(step.source, 'acetone')}", **step.options)
        x = layer(x)
        if step.weights:
            layer.set_weights([w.astype(np.float32) for w in step.weights])
    return k.Model(inputs, x, name=identifier(name, "acetone"))


class _Reader:
    """Walks the layers once, tracking the current channels-last shape to check every size in the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = ""
        self.shape: tuple[int, ...] = ()
        self.data_format = "channels_last"
        self.source = ""  # the current layer's name in the file
        self.flatten_order: np.ndarray | None = None  # set after a channels_first Flatten of an image

    def fail(self, cause: str) -> ModelError:
        return ModelError(f"{self.path}: {self.where}{cause}")

    # --- structure ---------------------------------------------------------

    def network(self, document) -> AcetoneNet:
        if not isinstance(document, dict) or not isinstance(document.get("config"), dict):
            raise self.fail("not an ACETONE model description (no 'config' object)")
        config = document["config"]
        layers = config.get("layers")
        if not isinstance(layers, list) or not layers:
            raise self.fail("not an ACETONE model description (no 'config.layers' list)")
        self.data_format = self.choice(config, "data_format", DATA_FORMATS)
        net = self.input_layer(layers[0])
        for index, layer in enumerate(layers[1:], 1):
            if not isinstance(layer, dict) or not isinstance(layer.get("config"), dict):
                self.where = f"layer {index}: "
                raise self.fail("expected an object with 'class_name' and 'config'")
            kind = layer.get("class_name")
            self.where = f"layer {index} '{layer['config'].get('name', '?')}' ({kind}): "
            net.steps.extend(self.layer(kind, layer))
        self.where = ""
        if self.flatten_order is not None:
            raise self.fail("a channels_first Flatten must be followed by a Dense layer "
                            "(its output order has no channels-last equivalent)")
        return net

    def input_layer(self, layer) -> AcetoneNet:
        self.where = "layer 0 (the input): "
        if not isinstance(layer, dict) or not isinstance(layer.get("config"), dict):
            raise self.fail("expected an object with 'class_name' and 'config'")
        if layer.get("class_name") not in _INPUT_TYPES:
            raise self.fail(f"expected class_name InputLayer, found {layer.get('class_name')!r}")
        config = layer["config"]
        self.choice(config, "dtype", DTYPES)
        dims = self.shape_field(config, "input_shape")
        if len(dims) not in (1, 3):
            raise self.fail(f"input_shape {[None, *dims]} is neither [null, N] nor [null, C, H, W]")
        self.shape = (dims[1], dims[2], dims[0]) if len(dims) == 3 else dims
        self.check_size(config)
        return AcetoneNet(self.shape)

    def layer(self, kind, layer: dict) -> list[Step]:
        config = layer["config"]
        if kind == "Dropout":
            return []
        if kind in _MERGE_TYPES:
            raise self.fail(f"unsupported layer type {kind}: only sequential networks are supported")
        if kind not in LAYER_TYPES:
            raise self.fail(f"unsupported layer type {kind!r} (supported: {', '.join(LAYER_TYPES)})")
        self.require(config, "name")
        previous = self.require(config, "prev_layer_idx")
        if not isinstance(previous, list) or len(previous) != 1:
            raise self.fail(f"prev_layer_idx {previous!r} is not one layer: only sequential networks are supported")
        if self.flatten_order is not None and kind != "Dense":
            raise self.fail("a channels_first Flatten must be followed by a Dense layer")
        self.source = str(config["name"])
        handlers = {
            "Dense": self.dense,
            "Conv2D": self.conv2d,
            "MaxPooling2D": lambda config, _: self.pool("MaxPooling2D", config),
            "AveragePooling2D": lambda config, _: self.pool("AveragePooling2D", config),
            "Flatten": lambda config, _: self.flatten(config),
            "ZeroPadding2D": lambda config, _: self.zero_padding_layer(config),
        }
        return handlers[kind](config, layer)

    # --- layers ------------------------------------------------------------

    def dense(self, config: dict, layer: dict) -> list[Step]:
        units = self.positive(config, "units")
        activation = self.choice(config, "activation", ACTIVATIONS)
        if len(self.shape) != 1:
            raise self.fail(f"Dense needs a vector input, found shape {list(self.shape)} (add a Flatten)")
        kernel = self.array(layer, "weights")
        if kernel.ndim == 4 and kernel.shape[:2] == (1, 1):  # ACETONE's writer pads Dense weights to rank 4
            kernel = kernel[0, 0]
        if kernel.shape != (self.shape[0], units):
            raise self.fail(f"weight shape mismatch: expected ({self.shape[0]}, {units}) "
                            f"or (1, 1, {self.shape[0]}, {units}), found {kernel.shape}")
        biases = self.biases(layer, units)
        if self.flatten_order is not None:
            kernel, self.flatten_order = kernel[self.flatten_order], None
        self.shape = (units,)
        self.check_size(config, required=False)
        return [Step("Dense", self.source, self.shape, {"units": units, "activation": activation}, (kernel, biases))]

    def conv2d(self, config: dict, layer: dict) -> list[Step]:
        filters = self.positive(config, "filters")
        kh, kw = self.pair(config, "kernel_size")
        stride = self.square(config, "strides")
        dilation = self.square(config, "dilation_rate")
        activation = self.choice(config, "activation", ACTIVATIONS)
        if activation == "softmax":
            raise self.fail("activation softmax is supported on Dense layers only")
        groups = config.get("groups", 1)
        if groups != 1:
            raise self.fail(f"groups={groups} is not supported (ACETONE's JSON parser reads no groups)")
        self.check_image("Conv2D")
        self.check_shape(config, "input_shape", self.shape)
        kernel = self.array(layer, "weights")
        channels = self.shape[2]
        if kernel.shape != (channels, kh, kw, filters):
            raise self.fail(f"weight shape mismatch: expected (in_channels, kh, kw, filters) = "
                            f"({channels}, {kh}, {kw}, {filters}), found {kernel.shape}")
        biases = self.biases(layer, filters)
        steps, padding = self.padding_steps(config)
        h, w = (self.window_out(n, k, stride, dilation, padding) for n, k in zip(self.shape[:2], (kh, kw)))
        self.shape = (h, w, filters)
        self.check_shape(config, "output_shape", self.shape)
        self.check_size(config)
        options = {"filters": filters, "kernel_size": (kh, kw), "strides": stride, "padding": padding,
                   "dilation_rate": dilation, "activation": activation}
        # the file's (in_channels, kh, kw, filters) back to Keras's (kh, kw, in_channels, filters)
        return [*steps, Step("Conv2D", self.source, self.shape, options, (np.moveaxis(kernel, 0, 2), biases))]

    def pool(self, kind: str, config: dict) -> list[Step]:
        size = self.square(config, "pool_size")
        stride = self.square(config, "strides")
        padding = self.require(config, "padding")
        if padding not in ("valid", "same"):
            raise self.fail(f"padding {padding!r} is not supported for pooling (expected 'valid' or 'same')")
        self.check_image(kind)
        self.check_shape(config, "input_shape", self.shape)
        h, w = (self.window_out(n, size, stride, 1, padding) for n in self.shape[:2])
        self.shape = (h, w, self.shape[2])
        self.check_shape(config, "output_shape", self.shape)
        self.check_size(config)
        return [Step(kind, self.source, self.shape, {"pool_size": size, "strides": stride, "padding": padding})]

    def flatten(self, config: dict) -> list[Step]:
        self.check_shape(config, "input_shape", self.shape)
        if len(self.shape) == 3 and self.data_format == "channels_first":
            h, w, c = self.shape
            self.flatten_order = np.arange(h * w * c).reshape(c, h, w).transpose(1, 2, 0).ravel()
        self.shape = (math.prod(self.shape),)
        self.check_size(config)
        return [Step("Flatten", self.source, self.shape)]

    def zero_padding_layer(self, config: dict) -> list[Step]:
        self.require(config, "idx")
        padding = self.require(config, "padding")
        if _is_int(padding):
            pads = (padding, padding, padding, padding)
        elif isinstance(padding, list) and len(padding) == 2 and all(_is_int(p) for p in padding):
            pads = (padding[0], padding[0], padding[1], padding[1])
        elif (isinstance(padding, list) and len(padding) == 2
              and all(isinstance(p, list) and len(p) == 2 and all(_is_int(v) for v in p) for p in padding)):
            pads = (*padding[0], *padding[1])
        else:
            raise self.fail(f"padding {padding!r} is not n, [h, w] or [[top, bottom], [left, right]]")
        if min(pads) < 0:
            raise self.fail(f"padding {padding!r} is negative")
        self.check_image("ZeroPadding2D")
        self.check_shape(config, "input_shape", self.shape)
        step = self.zero_padding(pads, self.source)
        self.check_size(config)
        return [step]

    # --- padding and window arithmetic ---------------------------------------

    def padding_steps(self, config: dict) -> tuple[list[Step], str]:
        """``same``/``valid`` as they are; explicit [top, left, bottom, right] as a ZeroPadding2D step."""
        padding = self.require(config, "padding")
        if padding in ("valid", "same"):
            return [], padding
        if not (isinstance(padding, list) and len(padding) == 4 and all(_is_int(p) and p >= 0 for p in padding)):
            raise self.fail(f"padding {padding!r} is not 'valid', 'same' or [top, left, bottom, right]")
        top, left, bottom, right = padding
        return [self.zero_padding((top, bottom, left, right), f"{self.source}_pad")], "valid"

    def zero_padding(self, pads: tuple[int, int, int, int], source: str) -> Step:
        top, bottom, left, right = pads
        h, w, c = self.shape
        self.shape = (h + top + bottom, w + left + right, c)
        return Step("ZeroPadding2D", source, self.shape, {"padding": ((top, bottom), (left, right))})

    def window_out(self, n: int, kernel: int, stride: int, dilation: int, padding: str) -> int:
        if padding == "same":
            return math.ceil(n / stride)
        span = dilation * (kernel - 1) + 1
        if span > n:
            raise self.fail(f"shape mismatch: window {span} is larger than the input ({list(self.shape)})")
        return (n - span) // stride + 1

    # --- fields --------------------------------------------------------------

    def require(self, config: dict, key: str):
        if key not in config:
            raise self.fail(f"missing key '{key}'")
        return config[key]

    def choice(self, config: dict, key: str, allowed: tuple[str, ...]) -> str:
        value = self.require(config, key)
        if value not in allowed:
            raise self.fail(f"{key} {value!r} is not supported (expected one of {', '.join(allowed)})")
        return value

    def positive(self, config: dict, key: str) -> int:
        value = self.require(config, key)
        if not _is_int(value) or value < 1:
            raise self.fail(f"{key} {value!r} is not a positive integer")
        return value

    def pair(self, config: dict, key: str) -> tuple[int, int]:
        value = self.require(config, key)
        pair = [value, value] if _is_int(value) else value
        if not (isinstance(pair, list) and len(pair) == 2 and all(_is_int(v) and v >= 1 for v in pair)):
            raise self.fail(f"{key} {value!r} is not a positive integer or a pair of them")
        return pair[0], pair[1]

    def square(self, config: dict, key: str) -> int:
        first, second = self.pair(config, key)
        if first != second:
            raise self.fail(f"{key} {[first, second]} differ; ACETONE reads only the first value")
        return first

    def shape_field(self, config: dict, key: str) -> tuple[int, ...]:
        """A file shape [batch, ...dims] (channels-first for images); the dims, which must be positive."""
        value = self.require(config, key)
        if not (isinstance(value, list) and len(value) >= 2 and (value[0] is None or _is_int(value[0]))
                and all(_is_int(d) and d >= 1 for d in value[1:])):
            raise self.fail(f"{key} {value!r} is not [batch, positive dimensions...]")
        return tuple(value[1:])

    def check_shape(self, config: dict, key: str, shape: tuple[int, ...]) -> None:
        """The file's channels-first ``key`` must equal the channels-last ``shape`` computed so far."""
        found = self.shape_field(config, key)
        expected = (shape[2], shape[0], shape[1]) if len(shape) == 3 else shape
        if found != expected:
            raise self.fail(f"shape mismatch: {key} is {[None, *found]}, the layers before give {[None, *expected]}")

    def check_size(self, config: dict, required: bool = True) -> None:
        if not required and "size" not in config:
            return
        size = self.require(config, "size")
        if size != math.prod(self.shape):
            raise self.fail(f"shape mismatch: size is {size!r}, the shape {list(self.shape)} "
                            f"has {math.prod(self.shape)} elements")

    def check_image(self, kind: str) -> None:
        if len(self.shape) != 3:
            raise self.fail(f"{kind} needs an image input, found shape {list(self.shape)}")

    def array(self, layer: dict, key: str) -> np.ndarray:
        value = self.require(layer, key)
        try:
            array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise self.fail(f"{key} is not a rectangular array of numbers") from None
        if not np.all(np.isfinite(array)):
            raise self.fail(f"{key}: non-finite values (NaN or infinity)")
        return array

    def biases(self, layer: dict, count: int) -> np.ndarray:
        biases = self.array(layer, "biases")
        if biases.shape != (count,):
            raise self.fail(f"bias shape mismatch: expected ({count},), found {biases.shape}")
        return biases


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
