"""Keras front end: a ``.keras`` / ``.h5`` file to the IR, channels-last (``HWC``).

Keras is imported lazily, only here. The functional graph (a Sequential
model's inner functional graph) is walked from its output back to its input,
so branching models (Add, Concatenate) are handled. Each layer class maps to a
handler in ``HANDLERS``; any other class is reported as unsupported.

Keras 3 also records operations that are not layers (``x + 3.0``, ``x * c``,
``keras.ops.maximum(x, 0.5)``, ``keras.ops.exp(x)``: ``keras.ops`` classes such
as ``Add`` or ``Exp``) as graph nodes whose constant operands live in the
node's arguments, not in a layer's weights. They map to ``OP_HANDLERS``
(element-wise arithmetic with their constants, element-wise functions); an
operation without a translation is refused by name, never approximated.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from codegen.errors import UnsupportedModel
from codegen.ir import (MAX_RANK, Activation, Graph, Node, default_layout, dense_axes, pack_outputs, resize_params,
                        resize_taps, unpack_inputs)

SELU = (1.6732632423543772, 1.0507009873554805)

# Keras activation names -> IR activation (None: identity; "softmax": an epilogue of its own).
ACTIVATIONS = {
    "linear": None,
    "relu": Activation("relu"),
    "relu6": Activation("relu6"),
    "tanh": Activation("tanh"),
    "sigmoid": Activation("sigmoid"),
    "elu": Activation("elu", (1.0,)),
    "selu": Activation("selu", SELU),
    "softplus": Activation("softplus"),
    "softsign": Activation("softsign"),
    "silu": Activation("silu"),
    "swish": Activation("silu"),
    "exponential": Activation("exponential"),
    "leaky_relu": Activation("leaky_relu", (0.2,)),
    "softmax": Activation("softmax"),
    # Keras 3 (TensorFlow) computes these as relu6(x + 3) / 6: the keras_* kinds repeat its float32 steps.
    "hard_sigmoid": Activation("keras_hard_sigmoid"),
    "hard_silu": Activation("keras_hard_silu"),
    "hard_swish": Activation("keras_hard_silu"),
    "gelu": Activation("gelu"),  # keras.activations.gelu: approximate=False, the erf form
}

IDENTITY_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
                   "GaussianDropout", "AlphaDropout", "ActivityRegularization")


def _import_keras():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    import keras

    return keras


class _Builder:
    """Adds IR nodes for one Keras layer call; ``reject`` raises the one-line error."""

    def __init__(self, keras, source: str) -> None:
        self.keras = keras
        self.graph = Graph(source=source, fmt="keras")

    def reject(self, layer, why: str = "is not supported") -> UnsupportedModel:
        return UnsupportedModel(f"{self.graph.source}: layer '{layer.name}' ({type(layer).__name__}) {why}")

    @staticmethod
    def array(variable) -> np.ndarray:
        return np.asarray(variable.numpy(), dtype=np.float32)

    def activation(self, layer, name) -> Activation | None:
        if not isinstance(name, str) or name not in ACTIVATIONS:
            raise self.reject(layer, f"uses activation {name!r}, which is not supported")
        return ACTIVATIONS[name]

    def add(self, layer, op: str, inputs: list[str], output: str, attrs=None, params=None, act=None) -> Node:
        return self.graph.add_node(Node(name=layer.name, kind=type(layer).__name__, op=op, inputs=list(inputs),
                                        output=output, attrs=attrs or {}, params=params or {}, act=act))

    def tensor(self, name: str):
        return self.graph.tensors[name]


HANDLERS = {}


def handles(*classes):
    def register(function):
        for cls in classes:
            HANDLERS[cls] = function
        return function
    return register


def _channels_last(b: _Builder, layer, cfg) -> None:
    if cfg.get("data_format", "channels_last") != "channels_last":
        raise b.reject(layer, f"uses data_format={cfg['data_format']!r}; only channels_last is supported")


def _same_pads(size: int, out: int, kernel: int, stride: int, dilation: int) -> tuple[int, int]:
    """TensorFlow SAME padding: the smaller half before, the rest after."""
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def _window_pads(b, layer, cfg, x, y, kernel, strides, dilations) -> tuple[int, int, int, int]:
    padding = cfg.get("padding", "valid")
    if padding == "valid":
        return (0, 0, 0, 0)
    if padding != "same":
        raise b.reject(layer, f"uses padding={padding!r}; only 'valid' and 'same' are supported")
    top, bottom = _same_pads(x.shape[0], y.shape[0], kernel[0], strides[0], dilations[0])
    left, right = _same_pads(x.shape[1], y.shape[1], kernel[1], strides[1], dilations[1])
    return (top, left, bottom, right)


@handles("Dense")
def _dense(b, layer, cfg, ins, out):
    params = {"kernel": b.array(layer.kernel)}
    if cfg.get("use_bias", True):
        params["bias"] = b.array(layer.bias)
    attrs = dense_axes(len(b.tensor(ins[0]).shape), "IO")
    b.add(layer, "Dense", ins, out, attrs, params, b.activation(layer, cfg.get("activation")))


def _conv_node(b, layer, cfg, ins, out, kernel: np.ndarray, group: int, bias: bool, act, name=None) -> Node:
    """A ``Conv2D`` node (HWIO kernel whose I axis holds ``C_in / group`` channels) with Keras's padding."""
    x, y = b.tensor(ins[0]), b.tensor(out)
    size, strides, dilations = tuple(kernel.shape[:2]), tuple(cfg["strides"]), tuple(cfg["dilation_rate"])
    attrs = {"kernel": size, "strides": strides, "dilations": dilations, "kernel_layout": "HWIO", "group": group,
             "pads": _window_pads(b, layer, cfg, x, y, size, strides, dilations)}
    params = {"kernel": kernel}
    if bias:
        params["bias"] = b.array(layer.bias)
    node = b.add(layer, "Conv2D", ins, out, attrs, params, act)
    node.name = name or node.name
    return node


@handles("Conv2D")
def _conv2d(b, layer, cfg, ins, out):
    _channels_last(b, layer, cfg)
    _conv_node(b, layer, cfg, ins, out, b.array(layer.kernel), int(cfg.get("groups", 1)), cfg.get("use_bias", True),
               b.activation(layer, cfg.get("activation")))


def _depthwise_kernel(b, variable) -> np.ndarray:
    """Keras's depthwise kernel ``(kh, kw, C, M)`` as a grouped HWIO kernel ``(kh, kw, 1, C * M)``: output
    channel ``c * M + m`` reads input channel ``c``, Keras's order."""
    kernel = b.array(variable)
    return kernel.reshape(kernel.shape[0], kernel.shape[1], 1, -1)


@handles("DepthwiseConv2D")
def _depthwise(b, layer, cfg, ins, out):
    _channels_last(b, layer, cfg)
    _conv_node(b, layer, cfg, ins, out, _depthwise_kernel(b, layer.kernel), b.tensor(ins[0]).shape[-1],
               cfg.get("use_bias", True), b.activation(layer, cfg.get("activation")))


@handles("SeparableConv2D")
def _separable(b, layer, cfg, ins, out):
    """The depthwise convolution (Keras's strides, padding and dilation), then the 1x1 pointwise one with the
    layer's bias and activation."""
    _channels_last(b, layer, cfg)
    x, y = b.tensor(ins[0]), b.tensor(out)
    middle = f"{out}/depthwise"
    b.graph.add_tensor(middle, (*y.shape[:2], x.shape[-1] * int(cfg["depth_multiplier"])), "HWC")
    _conv_node(b, layer, cfg, ins, middle, _depthwise_kernel(b, layer.depthwise_kernel), x.shape[-1], False, None,
               name=f"{layer.name}_depthwise")
    pointwise = {**cfg, "strides": (1, 1), "dilation_rate": (1, 1), "padding": "valid"}
    _conv_node(b, layer, pointwise, [middle], out, b.array(layer.pointwise_kernel), 1, cfg.get("use_bias", True),
               b.activation(layer, cfg.get("activation")))


@handles("Conv2DTranspose")
def _conv2d_transpose(b, layer, cfg, ins, out):
    """Keras's kernel ``(kh, kw, C_out, C_in)`` (``HWOI``); the pads are what the output size leaves over,
    the smaller half before (TensorFlow's ``conv2d_transpose``)."""
    _channels_last(b, layer, cfg)
    if cfg.get("output_padding") is not None:
        raise b.reject(layer, f"has output_padding={cfg['output_padding']}, which is not supported")
    x, y = b.tensor(ins[0]), b.tensor(out)
    kernel = b.array(layer.kernel)
    size, strides, dilations = tuple(kernel.shape[:2]), tuple(cfg["strides"]), tuple(cfg["dilation_rate"])
    totals = [(n - 1) * s + (k - 1) * d + 1 - o
              for n, s, k, d, o in zip(x.shape[:2], strides, size, dilations, y.shape[:2])]
    if min(totals) < 0:
        raise b.reject(layer, f"has an output {list(y.shape[:2])} larger than its kernel covers (stride above the "
                              "kernel size), which is not supported")
    attrs = {"kernel": size, "strides": strides, "dilations": dilations, "kernel_layout": "HWOI", "group": 1,
             "pads": (totals[0] // 2, totals[1] // 2, totals[0] - totals[0] // 2, totals[1] - totals[1] // 2)}
    params = {"kernel": kernel}
    if cfg.get("use_bias", True):
        params["bias"] = b.array(layer.bias)
    b.add(layer, "ConvTranspose2D", ins, out, attrs, params, b.activation(layer, cfg.get("activation")))


@handles("UpSampling2D")
def _upsampling(b, layer, cfg, ins, out):
    """``nearest`` repeats each pixel (asymmetric coordinates, floor); ``bilinear`` is ``tf.image.resize``
    (half-pixel centres, no antialiasing)."""
    _channels_last(b, layer, cfg)
    modes = {"nearest": ("nearest", "asymmetric", "floor"), "bilinear": ("linear", "half_pixel", "floor")}
    if cfg.get("interpolation", "nearest") not in modes:
        raise b.reject(layer, f"uses interpolation={cfg['interpolation']!r}; nearest and bilinear are supported")
    mode, coordinate, nearest = modes[cfg.get("interpolation", "nearest")]
    x, y = b.tensor(ins[0]), b.tensor(out)
    taps = [resize_taps(x.shape[k], y.shape[k], mode, coordinate, nearest, float(cfg["size"][k])) for k in (0, 1)]
    attrs, params = resize_params([*taps, None])
    b.add(layer, "Resize", ins, out, attrs, params)


def _constant_steps(b, layer, ins, out, steps: list[tuple[str, np.ndarray]]) -> None:
    """``x (op) c1 (op) c2 ...``: one Elementwise node per constant (float32, broadcast to the tensor), the
    last writing ``out``; the others are named ``<layer>_<k>``."""
    shape = b.tensor(out).shape
    source = ins[0]
    for k, (operator, value) in enumerate(steps):
        value = np.asarray(value, dtype=np.float32)
        if value.ndim == len(shape) + 1 and value.shape[0] == 1:
            value = value[0]
        if value.ndim > len(shape) or np.broadcast_shapes(value.shape, shape) != shape:
            raise b.reject(layer, f"has a constant of shape {list(value.shape)} that does not broadcast to "
                                  f"{list(shape)}")
        last = k == len(steps) - 1
        target = out if last else f"{out}/{k}"
        if not last:
            b.graph.add_tensor(target, shape, b.tensor(out).layout)
        node = b.add(layer, "Elementwise", [source], target, {"operator": operator, "operands": [
            {"tensor": source}, {"param": "operand", "shape": value.shape}]}, {"operand": np.ascontiguousarray(value)})
        node.name = layer.name if last else f"{layer.name}_{k}"
        source = target


@handles("Rescaling")
def _rescaling(b, layer, cfg, ins, out):
    """``x * scale + offset``, both rounded to float32 first, as Keras computes it."""
    _constant_steps(b, layer, ins, out, [("*", np.asarray(layer.scale)), ("+", np.asarray(layer.offset))])


@handles("Normalization")
def _normalization(b, layer, cfg, ins, out):
    """``(x - mean) / max(sqrt(variance), epsilon)``, the divisor computed in float32 as Keras computes it."""
    if cfg.get("invert"):
        raise b.reject(layer, "has invert=True, which is not supported")
    divisor = np.maximum(np.sqrt(np.asarray(layer.variance, np.float32)), np.float32(b.keras.backend.epsilon()))
    _constant_steps(b, layer, ins, out, [("-", np.asarray(layer.mean)), ("/", divisor)])


@handles("MaxPooling2D", "AveragePooling2D")
def _pool2d(b, layer, cfg, ins, out):
    _channels_last(b, layer, cfg)
    x, y = b.tensor(ins[0]), b.tensor(out)
    kernel = tuple(cfg["pool_size"])
    strides = tuple(cfg.get("strides") or kernel)
    attrs = {"kind": "max" if type(layer).__name__.startswith("Max") else "avg", "kernel": kernel,
             "strides": strides, "dilations": (1, 1), "count_include_pad": False,
             "pads": _window_pads(b, layer, cfg, x, y, kernel, strides, (1, 1))}
    b.add(layer, "Pool2D", ins, out, attrs)


@handles("GlobalAveragePooling2D", "GlobalMaxPooling2D")
def _global_pool2d(b, layer, cfg, ins, out):
    _channels_last(b, layer, cfg)
    b.add(layer, "GlobalPool2D", ins, out, {"kind": "max" if "Max" in type(layer).__name__ else "avg"})


@handles("BatchNormalization")
def _batch_norm(b, layer, cfg, ins, out):
    x = b.tensor(ins[0])
    axis = cfg.get("axis", -1)
    axis = axis[0] if isinstance(axis, (list, tuple)) and len(axis) == 1 else axis
    if x.layout is None:
        raise b.reject(layer, f"normalises a rank-{len(x.shape) + 1} tensor; ranks 2 to 4 are supported")
    if not isinstance(axis, int) or axis % (len(x.shape) + 1) != len(x.shape):
        raise b.reject(layer, f"normalises axis {axis}; only the last (channel) axis is supported")
    if cfg.get("renorm"):
        raise b.reject(layer, "uses batch renormalisation, which is not supported")
    mean = b.array(layer.moving_mean).astype(np.float64)
    variance = b.array(layer.moving_variance).astype(np.float64)
    gamma = b.array(layer.gamma).astype(np.float64) if cfg.get("scale", True) else np.ones_like(mean)
    beta = b.array(layer.beta).astype(np.float64) if cfg.get("center", True) else np.zeros_like(mean)
    scale = gamma / np.sqrt(variance + float(cfg.get("epsilon", 1e-3)))
    b.add(layer, "BatchNorm", ins, out, {}, {"scale": scale, "shift": beta - mean * scale})


@handles("Flatten", "Reshape", *IDENTITY_LAYERS)
def _view(b, layer, cfg, ins, out):
    if type(layer).__name__ == "Flatten":
        _channels_last(b, layer, cfg)
    b.add(layer, "View", ins, out)


@handles("ZeroPadding2D", "Cropping2D")
def _pad2d(b, layer, cfg, ins, out):
    _channels_last(b, layer, cfg)
    if type(layer).__name__ == "ZeroPadding2D":
        (top, bottom), (left, right) = cfg["padding"]
    else:
        (top, bottom), (left, right) = ((-v for v in pair) for pair in cfg["cropping"])
    b.add(layer, "Pad", ins, out, {"pads": [(top, bottom), (left, right), (0, 0)], "value": 0.0})


@handles("Add", "Subtract", "Multiply")
def _merge(b, layer, cfg, ins, out):
    operator = {"Add": "+", "Subtract": "-", "Multiply": "*"}[type(layer).__name__]
    b.add(layer, "Elementwise", ins, out, {"operator": operator, "operands": [{"tensor": name} for name in ins]})


@handles("Concatenate")
def _concat(b, layer, cfg, ins, out):
    rank = len(b.tensor(out).shape) + 1
    axis = cfg.get("axis", -1) % rank
    if axis == 0:
        raise b.reject(layer, "concatenates along the batch axis")
    b.add(layer, "Concat", ins, out, {"axis": axis - 1})


def _activation_node(b, layer, ins, out, act):
    if act is None:
        b.add(layer, "View", ins, out)
    elif act.kind == "softmax":
        b.add(layer, "Softmax", ins, out, {"inner": b.tensor(out).shape[-1]})
    else:
        b.add(layer, "Activation", ins, out, {"act": act})


@handles("Activation")
def _activation(b, layer, cfg, ins, out):
    _activation_node(b, layer, ins, out, b.activation(layer, cfg.get("activation")))


@handles("ReLU")
def _relu(b, layer, cfg, ins, out):
    high = cfg.get("max_value")
    slope, threshold = float(cfg.get("negative_slope") or 0.0), float(cfg.get("threshold") or 0.0)
    if high is None and slope == 0.0 and threshold == 0.0:
        act = Activation("relu")
    else:
        act = Activation("keras_relu", (slope, None if high is None else float(high), threshold))
    _activation_node(b, layer, ins, out, act)


@handles("LeakyReLU")
def _leaky_relu(b, layer, cfg, ins, out):
    slope = cfg.get("negative_slope", cfg.get("alpha", 0.3))
    _activation_node(b, layer, ins, out, Activation("leaky_relu", (float(slope),)))


@handles("ELU")
def _elu(b, layer, cfg, ins, out):
    _activation_node(b, layer, ins, out, Activation("elu", (float(cfg.get("alpha", 1.0)),)))


@handles("Softmax")
def _softmax(b, layer, cfg, ins, out):
    axis = cfg.get("axis", -1)
    axis = axis[0] if isinstance(axis, (list, tuple)) and len(axis) == 1 else axis
    rank = len(b.tensor(out).shape) + 1
    if not isinstance(axis, int) or axis % rank != rank - 1:
        raise b.reject(layer, f"has axis={axis}; only the last axis is supported")
    _activation_node(b, layer, ins, out, Activation("softmax"))


@handles("Permute")
def _permute(b, layer, cfg, ins, out):
    b.add(layer, "Transpose", ins, out, {"perm": [d - 1 for d in cfg["dims"]]})


# --- Keras 3 operation nodes (keras.ops; ``x + 3.0`` is an ``Add`` operation, not a layer) ------------

OP_HANDLERS = {}

# Element-wise arithmetic between tensors and constants: keras.ops class -> Elementwise operator.
ARITHMETIC = {"Add": "+", "Subtract": "-", "Multiply": "*", "Divide": "/", "TrueDivide": "/",
              "Maximum": "max", "Minimum": "min"}
# Element-wise functions of one tensor: keras.ops class -> (IR activation kind, attributes read as params).
FUNCTIONS = {"Relu": ("relu", ()), "Relu6": ("relu6", ()), "Sigmoid": ("sigmoid", ()), "Tanh": ("tanh", ()),
             "Softplus": ("softplus", ()), "Softsign": ("softsign", ()), "Silu": ("silu", ()),
             "HardSigmoid": ("keras_hard_sigmoid", ()), "HardSilu": ("keras_hard_silu", ()),
             "Elu": ("elu", ("alpha",)), "Selu": ("selu", ()), "LeakyRelu": ("leaky_relu", ("negative_slope",)),
             "Exp": ("exponential", ()), "Log": ("log", ()), "Sqrt": ("sqrt", ()), "Negative": ("neg", ()),
             "Absolute": ("abs", ()), "Abs": ("abs", ()), "Reciprocal": ("reciprocal", ())}


def handles_op(*classes):
    def register(function):
        for cls in classes:
            OP_HANDLERS[cls] = function
        return function
    return register


def _operation_name(op) -> str:
    return f"operation '{op.name}' (keras.ops {type(op).__name__})"


def _reject_op(b: _Builder, op, why: str = "is not supported") -> UnsupportedModel:
    return UnsupportedModel(f"{b.graph.source}: {_operation_name(op)} {why}")


def _arguments(b: _Builder, op, node) -> list:
    """The operation's positional arguments: a tensor's IR name, or a float32 constant (no keyword ones)."""
    if node.arguments.kwargs:
        raise _reject_op(b, op, f"has keyword arguments {sorted(node.arguments.kwargs)}, which are not supported")
    values = []
    for argument in node.arguments.args:
        history = getattr(argument, "_keras_history", None)
        if history is not None:
            values.append(f"{history[0].name}:{history[1]}")
            continue
        try:
            values.append(np.asarray(argument, dtype=np.float32))
        except (TypeError, ValueError):
            raise _reject_op(b, op, f"has an argument of type {type(argument).__name__}, neither a tensor "
                                    "nor a number") from None
    return values


def _constant_operand(b: _Builder, op, value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A constant as it broadcasts against an IR tensor of ``shape`` (no batch axis); a leading batch axis of
    1 is dropped, any other shape that does not broadcast is refused."""
    if value.ndim == len(shape) + 1:
        if value.shape[0] != 1:
            raise _reject_op(b, op, f"has a constant of shape {list(value.shape)} that varies along the batch axis")
        value = value[0]
    if value.ndim > len(shape) or np.broadcast_shapes(value.shape, shape) != shape:
        raise _reject_op(b, op, f"has a constant of shape {list(value.shape)} that does not broadcast to "
                                f"{list(shape)}")
    return np.ascontiguousarray(value)


@handles_op(*ARITHMETIC)
def _arithmetic_op(b, op, node, out):
    values = _arguments(b, op, node)
    shape = b.tensor(out).shape
    operands, params, tensors = [], {}, []
    for k, value in enumerate(values):
        if isinstance(value, str):
            operands.append({"tensor": value})
            tensors.append(value)
        else:
            key = f"operand{k}"
            params[key] = _constant_operand(b, op, value, shape)
            operands.append({"param": key, "shape": params[key].shape})
    if not tensors:
        raise _reject_op(b, op, "has no tensor operand")
    b.add(op, "Elementwise", tensors, out, {"operator": ARITHMETIC[type(op).__name__], "operands": operands}, params)


@handles_op(*FUNCTIONS)
def _function_op(b, op, node, out):
    values = _arguments(b, op, node)
    if len(values) != 1 or not isinstance(values[0], str):
        raise _reject_op(b, op, f"has {len(values)} arguments; one tensor is supported")
    kind, attributes = FUNCTIONS[type(op).__name__]
    _activation_node(b, op, values, out, Activation(kind, tuple(float(getattr(op, a)) for a in attributes)))


@handles_op("Gelu")
def _gelu_op(b, op, node, out):
    """keras.ops.gelu / keras.activations.gelu in a functional graph: the erf form, or the tanh one when
    ``approximate`` (keras.ops.gelu's default)."""
    values = _arguments(b, op, node)
    if len(values) != 1 or not isinstance(values[0], str):
        raise _reject_op(b, op, f"has {len(values)} arguments; one tensor is supported")
    _activation_node(b, op, values, out, Activation("gelu_tanh" if op.approximate else "gelu"))


@handles_op("Softmax")
def _softmax_op(b, op, node, out):
    values = _arguments(b, op, node)
    axis = getattr(op, "axis", -1)
    rank = len(b.tensor(out).shape) + 1
    if len(values) != 1 or not isinstance(values[0], str):
        raise _reject_op(b, op, f"has {len(values)} arguments; one tensor is supported")
    if not isinstance(axis, int) or axis % rank != rank - 1:
        raise _reject_op(b, op, f"has axis={axis}; only the last axis is supported")
    _activation_node(b, op, values, out, Activation("softmax"))


def _shape(b: _Builder, layer, tensor) -> tuple[int, ...]:
    shape = tuple(tensor.shape)[1:]
    if any(not isinstance(d, int) for d in shape):
        raise b.reject(layer, f"has a tensor of unknown shape {tuple(tensor.shape)}")
    return shape


def _calls_in_order(b: _Builder, output) -> list[tuple[object, int]]:
    """(layer, node index) of every call the output depends on, inputs first (iterative DFS)."""
    order, done, stack = [], set(), [(output, False)]
    while stack:
        tensor, expanded = stack.pop()
        layer, node_index, _ = tensor._keras_history
        key = (id(layer), node_index)
        if key in done:
            continue
        node = layer._inbound_nodes[node_index]
        if expanded:
            done.add(key)
            order.append((layer, node_index))
            continue
        stack.append((tensor, True))
        for parent in reversed(node.input_tensors):
            stack.append((parent, False))
    return order


def load(path: Path) -> Graph:
    keras = _import_keras()
    source = Path(path).name
    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as exc:  # noqa: BLE001 - any loader failure is a user-facing error
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnsupportedModel(f"{source}: keras cannot load it: {reason}") from None
    functional = getattr(model, "_functional", None) or model
    if not hasattr(functional, "inputs") or functional.inputs is None:
        raise UnsupportedModel(f"{source}: the model is not built (no input shape)")
    b = _Builder(keras, source)
    graph = b.graph
    packed = len(functional.inputs) > 1 or len(functional.outputs) > 1  # one packed vector each (ir.unpack_inputs)
    if packed:
        inputs = [(f"{t._keras_history[0].name}:{t._keras_history[1]}", t._keras_history[0].name)
                  for t in functional.inputs]
        for (tensor, _), value in zip(inputs, functional.inputs):
            shape = _shape(b, value._keras_history[0], value)
            graph.add_tensor(tensor, shape, default_layout(len(shape), channels_last=True))
        unpack_inputs(graph, inputs)
    calls = []
    for output in functional.outputs:  # every call any output depends on, once, inputs first
        calls += [call for call in _calls_in_order(b, output) if call not in calls]
    uses: dict[int, int] = {}
    for layer, _ in calls:
        uses[id(layer)] = uses.get(id(layer), 0) + 1
    seen: dict[int, int] = {}
    for layer, node_index in calls:
        node = layer._inbound_nodes[node_index]
        cls = type(layer).__name__
        if len(node.output_tensors) != 1:
            raise b.reject(layer, f"has {len(node.output_tensors)} outputs; one is supported")
        out = f"{layer.name}:{node_index}"
        shape = _shape(b, layer, node.output_tensors[0])
        graph.add_tensor(out, shape, default_layout(len(shape), channels_last=True))
        if cls == "InputLayer":
            if len(shape) > MAX_RANK:
                raise b.reject(layer, f"has rank-{len(shape)} input {list(shape)}; ranks 1 to {MAX_RANK} are supported")
            if not packed:
                graph.input, graph.input_name = out, layer.name
            continue
        if isinstance(layer, keras.Model):
            raise b.reject(layer, "is a nested model; flatten it into one functional model")
        count = seen[id(layer)] = seen.get(id(layer), 0) + 1
        before = len(graph.nodes)
        if not isinstance(layer, keras.layers.Layer):  # a keras.ops operation: its constants are arguments
            if cls not in OP_HANDLERS:
                raise _reject_op(b, layer)
            OP_HANDLERS[cls](b, layer, node, out)
        else:
            handler = HANDLERS.get(cls)
            if handler is None:
                raise b.reject(layer)
            if getattr(layer, "compute_dtype", "float32") != "float32":
                raise b.reject(layer, f"computes in {layer.compute_dtype}; only float32 is supported")
            ins = [f"{t._keras_history[0].name}:{t._keras_history[1]}" for t in node.input_tensors]
            handler(b, layer, layer.get_config(), ins, out)
        if uses[id(layer)] > 1:  # a shared layer: one IR node per call
            for added in graph.nodes[before:]:
                added.name = f"{layer.name}_call{count}"
    outputs = [(f"{t._keras_history[0].name}:{t._keras_history[1]}", t._keras_history[0].name)
               for t in functional.outputs]
    for tensor, _ in outputs:
        if len(graph.tensors[tensor].shape) > MAX_RANK:
            raise UnsupportedModel(f"{source}: the output has rank {len(graph.tensors[tensor].shape)}; "
                                   f"ranks 1 to {MAX_RANK} are supported")
    if packed:
        pack_outputs(graph, outputs)
    else:
        graph.output, graph.output_name = outputs[0]
    return graph
