"""Keras 3 -> ONNX exporter (tf2onnx does not support Keras 3).

The ONNX file is channels-first: one input named ``input`` of shape
``[N, C, H, W]`` for images or ``[N, F]`` for vectors (``N`` symbolic), one
output named ``output``. Each Keras layer maps to a few ONNX nodes (opset 17):
convolutions and pooling in NCHW with explicit pads (Keras ``same`` becomes the
asymmetric pads TensorFlow uses), ``Flatten`` flattens in CHW order and the
following ``Dense`` gets its weight rows permuted from HWC to CHW order, so the
file computes what the Keras model computes. A vector in permuted order that
reaches anything but an element-wise layer or a ``Dense`` is put back in Keras
order with a ``Gather``.

Keras 3 operation nodes that are not layers (``x + 3.0``, ``x * c``,
``keras.ops.maximum(x, 0.5)``, ``keras.ops.exp(x)``) are translated with their
constant operands (``_OP_HANDLERS``), each constant laid out as the ONNX value
it meets (NCHW, or the permuted order of a flattened vector).

A layer type, operation or option without a translation raises ``ModelError``
naming it: nothing is approximated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from harness.errors import ModelError

OPSET = 17
IR_VERSION = 8  # the IR version of opset 17; every onnxruntime >= 1.14 reads it
# Ops newer than OPSET: a graph that uses one is written at its opset (and that opset's IR version), every
# other graph at OPSET, so that existing exports stay byte for byte; the ops the exporter writes mean the same
# at these opsets (the checker below verifies the graph at the opset it declares).
NEWER_OPS = {"Gelu": (20, 9)}
INPUT_NAME = "input"
OUTPUT_NAME = "output"

# Layers that are the identity at inference.
PASSTHROUGH = frozenset(
    {"Dropout", "SpatialDropout1D", "SpatialDropout2D", "GaussianNoise", "GaussianDropout", "AlphaDropout",
     "ActivityRegularization", "Identity"}
)


@dataclass(frozen=True)
class _Tensor:
    """An ONNX value standing for a Keras tensor.

    ``shape`` is the Keras shape without the batch axis (channels last); the
    ONNX value of a rank-3 tensor is NCHW. ``perm`` is set on vectors whose
    ONNX order differs from Keras order: ``onnx[i] == keras[perm[i]]``.
    """

    name: str
    shape: tuple[int, ...]
    perm: np.ndarray | None = None


class _Graph:
    def __init__(self) -> None:
        self.nodes: list = []
        self.initializers: list = []
        self._names: set[str] = set()

    def unique(self, hint: str) -> str:
        name, index = hint, 0
        while name in self._names:
            index += 1
            name = f"{hint}_{index}"
        self._names.add(name)
        return name

    def const(self, hint: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        name = self.unique(hint)
        # np.asarray, not np.ascontiguousarray: the latter makes a scalar (Clip's min and max) a [1] tensor
        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"), name))
        return name

    def node(self, op: str, inputs: list[str], hint: str, **attrs) -> str:
        from onnx import helper

        output = self.unique(hint)
        self.nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output


_Handler = Callable[[_Graph, object, list[_Tensor]], _Tensor]
_HANDLERS: dict[str, _Handler] = {}


def _handles(*class_names: str):
    def register(function: _Handler) -> _Handler:
        for class_name in class_names:
            _HANDLERS[class_name] = function
        return function

    return register


def supported_layers() -> list[str]:
    return sorted(set(_HANDLERS) | PASSTHROUGH | {"InputLayer", "Functional", "Sequential"})


def export(keras_model, path: Path) -> None:
    """Write ``keras_model`` to ``path`` as a checked ONNX file, byte-for-byte the same for the same model."""
    model = to_onnx(keras_model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Deterministic serialisation (map fields in a fixed order): the same model gives the same bytes.
    path.write_bytes(model.SerializeToString(deterministic=True))


def to_onnx(keras_model):
    """The ``onnx.ModelProto`` equivalent of a Keras model: inputs ``input`` and output ``output``, or, for a model
    of several, ``input_0``, ``input_1``, ... and ``output_0``, ... in the Keras model's order."""
    import onnx
    from onnx import TensorProto, helper

    _check_supported(keras_model)
    several = len(keras_model.inputs) > 1 or len(keras_model.outputs) > 1
    in_names = [f"{INPUT_NAME}_{k}" if several else INPUT_NAME for k in range(len(keras_model.inputs))]
    out_names = [f"{OUTPUT_NAME}_{k}" if several else OUTPUT_NAME for k in range(len(keras_model.outputs))]
    graph = _Graph()
    sources = []
    for name, value in zip(in_names, keras_model.inputs):
        graph.unique(name)
        sources.append(_Tensor(name, _shape_of(value, f"input '{name}'" if several else "input")))
    results = [_materialize(graph, result) for result in _walk_all(graph, keras_model, sources)]
    out_shapes = [_shape_of(value, f"output '{name}'" if several else "output")
                  for name, value in zip(out_names, keras_model.outputs)]
    for k, result in enumerate(results):
        if result.name in in_names or result.name in [r.name for r in results[:k]]:  # an input, or twice an output
            results[k] = result = _Tensor(graph.node("Identity", [result.name], "identity"), result.shape)
        for node in graph.nodes:  # rename the value to its output's name
            node.output[:] = [out_names[k] if name == result.name else name for name in node.output]
            node.input[:] = [out_names[k] if name == result.name else name for name in node.input]
    onnx_graph = helper.make_graph(
        graph.nodes,
        keras_model.name,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *_onnx_dims(source.shape)])
         for name, source in zip(in_names, sources)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["N", *_onnx_dims(shape)])
         for name, shape in zip(out_names, out_shapes)],
        graph.initializers,
    )
    opset, ir_version = max([(OPSET, IR_VERSION),
                             *(NEWER_OPS[node.op_type] for node in graph.nodes if node.op_type in NEWER_OPS)])
    model = helper.make_model(
        onnx_graph,
        producer_name="assay",
        opset_imports=[helper.make_opsetid("", opset)],
        doc_string="Exported from Keras by harness.models.onnx_export (channels-first).",
    )
    model.ir_version = ir_version
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as error:  # noqa: BLE001 - the checker raises several types
        raise ModelError(f"exported ONNX model fails the checker: {_first_line(error)}") from error
    return model


def _check_supported(keras_model) -> None:
    """Raise ModelError naming the first layer (at any depth) we cannot translate."""
    for layer in _all_layers(keras_model):
        class_name = type(layer).__name__
        if class_name not in _HANDLERS and class_name not in PASSTHROUGH and class_name != "InputLayer":
            raise ModelError(f"unsupported layer type {class_name} (layer '{layer.name}')")


def _all_layers(model):
    for layer in model.layers:
        if _is_model(layer):
            yield from _all_layers(layer)
        else:
            yield layer


def _is_model(layer) -> bool:
    from harness.models.tf_runtime import keras

    return isinstance(layer, keras().Model)


def _is_layer(operation) -> bool:
    from harness.models.tf_runtime import keras

    return isinstance(operation, keras().layers.Layer)


def _walk(graph: _Graph, model, inputs: list[_Tensor]) -> _Tensor:
    """Translate the graph of a Functional (or built Sequential) model nested in another: its one output."""
    results = _walk_all(graph, model, inputs)
    if len(results) != 1:
        raise ModelError(f"nested model '{model.name}' has {len(results)} outputs; nested models with one are "
                         "supported")
    return results[0]


def _walk_all(graph: _Graph, model, inputs: list[_Tensor]) -> list[_Tensor]:
    """Translate the graph of a Functional (or built Sequential) model: its outputs, in order."""
    from harness.models.tf_runtime import keras

    functional = getattr(model, "_functional", None) if isinstance(model, keras().Sequential) else model
    if functional is None:
        raise ModelError(f"model '{model.name}' has no defined input shape (build it with keras.Input)")
    values = {id(tensor): value for tensor, value in zip(functional.inputs, inputs)}
    for depth in sorted(functional._nodes_by_depth, reverse=True):
        for node in functional._nodes_by_depth[depth]:
            if node.operation is None or node.is_input:
                continue
            if any(id(tensor) not in values for tensor in node.input_tensors):
                continue
            args = [values[id(tensor)] for tensor in node.input_tensors]
            layer = node.operation
            class_name = type(layer).__name__
            if not _is_layer(layer):  # a keras.ops operation: its constants are among its arguments
                if class_name not in _OP_HANDLERS:
                    raise ModelError(f"unsupported operation {class_name} (keras.ops, operation '{layer.name}')")
                result = _OP_HANDLERS[class_name](graph, layer, _op_arguments(layer, node, values),
                                                  _shape_of(node.outputs[0], f"operation '{layer.name}'"))
            elif _is_model(layer):
                result = _walk(graph, layer, args)
            elif class_name in PASSTHROUGH:
                result = args[0]
            else:
                result = _HANDLERS[class_name](graph, layer, args)
            expected = _shape_of(node.outputs[0], f"layer '{layer.name}'")
            if result.shape != expected:
                raise ModelError(f"layer '{layer.name}' ({class_name}): exporter produced shape {result.shape}, "
                                 f"Keras has {expected}")
            values[id(node.outputs[0])] = result
    return [values[id(output)] for output in functional.outputs]


def _shape_of(keras_tensor, what: str) -> tuple[int, ...]:
    shape = tuple(keras_tensor.shape[1:])
    if any(dim is None for dim in shape):
        raise ModelError(f"{what} has an undefined dimension: {tuple(keras_tensor.shape)}")
    if len(shape) not in (1, 3):
        raise ModelError(f"{what} has rank {len(shape)} (shape {shape}); only vectors and HxWxC images are supported")
    return tuple(int(dim) for dim in shape)


def _onnx_dims(shape: tuple[int, ...]) -> list[int]:
    return [shape[2], shape[0], shape[1]] if len(shape) == 3 else list(shape)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _unsupported(layer, option: str) -> ModelError:
    return ModelError(f"unsupported option {option} of layer type {type(layer).__name__} (layer '{layer.name}')")


def _materialize(graph: _Graph, tensor: _Tensor) -> _Tensor:
    """The same tensor with its ONNX order equal to the Keras order."""
    if tensor.perm is None:
        return tensor
    inverse = np.argsort(tensor.perm).astype(np.int64)
    indices = graph.const(f"{tensor.name}_order", inverse)
    return _Tensor(graph.node("Gather", [tensor.name, indices], f"{tensor.name}_keras_order", axis=1), tensor.shape)


def _channels_last(layer) -> None:
    if getattr(layer, "data_format", "channels_last") != "channels_last":
        raise _unsupported(layer, f"data_format={layer.data_format}")


def _axis_of(layer, axis: int, rank: int) -> int:
    """The ONNX axis of Keras axis ``axis`` of a tensor of Keras rank ``rank`` (batch excluded)."""
    axis = axis % (rank + 1)
    if axis == 0:
        raise _unsupported(layer, "axis=0 (the batch axis)")
    if rank == 3:
        return {1: 2, 2: 3, 3: 1}[axis]
    return axis


# --- activations ------------------------------------------------------------


def _activation(graph: _Graph, x: _Tensor, name: str, hint: str, layer, axis: int = -1) -> _Tensor:
    if name in ("linear", None):
        return x
    simple = {"relu": "Relu", "tanh": "Tanh", "sigmoid": "Sigmoid", "softplus": "Softplus", "exponential": "Exp",
              "softsign": "Softsign"}
    if name in simple:
        return _Tensor(graph.node(simple[name], [x.name], f"{hint}_{name}"), x.shape, x.perm)
    if name == "softmax":
        onnx_axis = _axis_of(layer, axis, len(x.shape))
        if x.perm is not None and onnx_axis != 1:
            x = _materialize(graph, x)
        return _Tensor(graph.node("Softmax", [x.name], f"{hint}_softmax", axis=onnx_axis), x.shape, x.perm)
    if name == "leaky_relu":
        return _leaky(graph, x, 0.2, hint)
    if name == "relu6":
        return _clip(graph, x, 0.0, 6.0, hint)
    if name == "elu":
        return _Tensor(graph.node("Elu", [x.name], f"{hint}_elu", alpha=1.0), x.shape, x.perm)
    if name == "selu":
        return _Tensor(graph.node("Selu", [x.name], f"{hint}_selu", alpha=1.67326324, gamma=1.05070098),
                       x.shape, x.perm)
    if name == "hard_sigmoid":
        return _Tensor(graph.node("HardSigmoid", [x.name], f"{hint}_hard_sigmoid", alpha=1.0 / 6.0, beta=0.5),
                       x.shape, x.perm)
    if name in ("hard_silu", "hard_swish"):  # Keras 3: x * relu6(x + 3) / 6, ONNX HardSwish's definition
        return _Tensor(graph.node("HardSwish", [x.name], f"{hint}_hard_swish"), x.shape, x.perm)
    if name in ("silu", "swish"):
        gate = graph.node("Sigmoid", [x.name], f"{hint}_gate")
        return _Tensor(graph.node("Mul", [x.name, gate], f"{hint}_silu"), x.shape, x.perm)
    if name == "gelu":  # keras.activations.gelu's default, approximate=False: ONNX Gelu's erf form
        return _gelu(graph, x, False, hint)
    raise _unsupported(layer, f"activation={name}")


def _gelu(graph: _Graph, x: _Tensor, approximate: bool, hint: str) -> _Tensor:
    """ONNX Gelu (opset 20): the same formula as Keras, erf or (``approximate``) tanh."""
    return _Tensor(graph.node("Gelu", [x.name], f"{hint}_gelu", approximate="tanh" if approximate else "none"),
                   x.shape, x.perm)


def _activation_name(layer) -> str:
    function = getattr(layer, "activation", None)
    return "linear" if function is None else getattr(function, "__name__", str(function))


def _leaky(graph: _Graph, x: _Tensor, slope: float, hint: str) -> _Tensor:
    return _Tensor(graph.node("LeakyRelu", [x.name], f"{hint}_leaky_relu", alpha=float(slope)), x.shape, x.perm)


def _clip(graph: _Graph, x: _Tensor, low: float, high: float, hint: str) -> _Tensor:
    bounds = [graph.const(f"{hint}_min", np.array(low, np.float32)),
              graph.const(f"{hint}_max", np.array(high, np.float32))]
    return _Tensor(graph.node("Clip", [x.name, *bounds], f"{hint}_clip"), x.shape, x.perm)


@_handles("Activation")
def _activation_layer(graph, layer, args):
    return _activation(graph, args[0], _activation_name(layer), layer.name, layer)


@_handles("ReLU")
def _relu_layer(graph, layer, args):
    x = args[0]
    if layer.threshold:
        raise _unsupported(layer, f"threshold={layer.threshold}")
    if layer.max_value is not None and layer.negative_slope:
        raise _unsupported(layer, "max_value together with negative_slope")
    if layer.max_value is not None:
        return _clip(graph, x, 0.0, float(layer.max_value), layer.name)
    if layer.negative_slope:
        return _leaky(graph, x, layer.negative_slope, layer.name)
    return _activation(graph, x, "relu", layer.name, layer)


@_handles("LeakyReLU")
def _leaky_layer(graph, layer, args):
    return _leaky(graph, args[0], layer.negative_slope, layer.name)


@_handles("ELU")
def _elu_layer(graph, layer, args):
    x = args[0]
    return _Tensor(graph.node("Elu", [x.name], f"{layer.name}_elu", alpha=float(layer.alpha)), x.shape, x.perm)


@_handles("Softmax")
def _softmax_layer(graph, layer, args):
    axis = layer.axis
    if not isinstance(axis, int):
        if len(axis) != 1:
            raise _unsupported(layer, f"axis={axis}")
        axis = axis[0]
    return _activation(graph, args[0], "softmax", layer.name, layer, axis)


# --- dense and convolutions -------------------------------------------------


@_handles("Dense")
def _dense(graph, layer, args):
    x = args[0]
    if len(x.shape) != 1:
        raise _unsupported(layer, f"input of rank {len(x.shape)} (Dense on images needs a Flatten first)")
    kernel = layer.kernel.numpy()
    if x.perm is not None:
        kernel = kernel[x.perm]  # rows in the order the flattened ONNX vector has
    inputs = [x.name, graph.const(f"{layer.name}_kernel", np.ascontiguousarray(kernel.T))]
    if layer.use_bias:
        inputs.append(graph.const(f"{layer.name}_bias", layer.bias.numpy()))
    y = _Tensor(graph.node("Gemm", inputs, f"{layer.name}_gemm", transB=1), (int(kernel.shape[1]),))
    return _activation(graph, y, _activation_name(layer), layer.name, layer)


def _same_pads(layer, size: tuple[int, int], kernel, strides, dilations) -> list[int]:
    """ONNX pads [top, left, bottom, right] that reproduce TensorFlow's SAME padding."""
    begins, ends = [], []
    for n, k, s, d in zip(size, kernel, strides, dilations):
        total = max((math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n, 0)
        begins.append(total // 2)
        ends.append(total - total // 2)
    return begins + ends


def _pads(layer, x: _Tensor, kernel, strides, dilations) -> list[int]:
    padding = layer.padding
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        return _same_pads(layer, x.shape[:2], kernel, strides, dilations)
    raise _unsupported(layer, f"padding={padding}")


def _image(layer, x: _Tensor) -> None:
    if len(x.shape) != 3:
        raise _unsupported(layer, f"input of rank {len(x.shape)} (expected HxWxC)")
    _channels_last(layer)


@_handles("Conv2D")
def _conv2d(graph, layer, args):
    x = args[0]
    _image(layer, x)
    kernel = layer.kernel.numpy().transpose(3, 2, 0, 1)  # (kh, kw, cin/g, cout) -> (cout, cin/g, kh, kw)
    y = _conv(graph, layer, x, kernel, layer.bias.numpy() if layer.use_bias else None, group=layer.groups,
              hint=layer.name)
    return _activation(graph, y, _activation_name(layer), layer.name, layer)


@_handles("DepthwiseConv2D")
def _depthwise(graph, layer, args):
    x = args[0]
    _image(layer, x)
    kernel = layer.kernel.numpy()  # (kh, kw, cin, multiplier); output channel c*multiplier + m
    kh, kw, cin, mult = kernel.shape
    kernel = kernel.transpose(2, 3, 0, 1).reshape(cin * mult, 1, kh, kw)
    y = _conv(graph, layer, x, kernel, layer.bias.numpy() if layer.use_bias else None, group=cin, hint=layer.name)
    return _activation(graph, y, _activation_name(layer), layer.name, layer)


@_handles("SeparableConv2D")
def _separable(graph, layer, args):
    x = args[0]
    _image(layer, x)
    depthwise = layer.depthwise_kernel.numpy()
    kh, kw, cin, mult = depthwise.shape
    depthwise = depthwise.transpose(2, 3, 0, 1).reshape(cin * mult, 1, kh, kw)
    y = _conv(graph, layer, x, depthwise, None, group=cin, hint=f"{layer.name}_depthwise")
    pointwise = layer.pointwise_kernel.numpy().transpose(3, 2, 0, 1)
    z = _conv_node(graph, y, pointwise, layer.bias.numpy() if layer.use_bias else None, (1, 1), (1, 1), (1, 1),
                   [0, 0, 0, 0], 1, f"{layer.name}_pointwise")
    return _activation(graph, z, _activation_name(layer), layer.name, layer)


@_handles("Conv2DTranspose")
def _conv_transpose(graph, layer, args):
    """Keras's kernel ``(kh, kw, C_out, C_in)`` as ONNX's ``(C_in, C_out, kh, kw)``; the pads are what the
    Keras output size leaves over, the smaller half before (TensorFlow's ``conv2d_transpose``)."""
    x = args[0]
    _image(layer, x)
    if layer.output_padding is not None:
        raise _unsupported(layer, f"output_padding={layer.output_padding}")
    kernel = layer.kernel.numpy().transpose(3, 2, 0, 1)
    out = _shape_of(layer.output, f"layer '{layer.name}'")
    ksize, strides = tuple(int(k) for k in kernel.shape[2:]), tuple(int(s) for s in layer.strides)
    dilations = tuple(int(d) for d in layer.dilation_rate)
    totals = [(n - 1) * s + (k - 1) * d + 1 - o for n, s, k, d, o in zip(x.shape[:2], strides, ksize, dilations, out)]
    if min(totals) < 0:
        raise _unsupported(layer, f"strides={strides} above the kernel size {ksize}")
    inputs = [x.name, graph.const(f"{layer.name}_kernel", np.ascontiguousarray(kernel, np.float32))]
    if layer.use_bias:
        inputs.append(graph.const(f"{layer.name}_bias", layer.bias.numpy().astype(np.float32)))
    name = graph.node("ConvTranspose", inputs, f"{layer.name}_convtranspose", kernel_shape=list(ksize),
                      strides=list(strides), dilations=list(dilations),
                      pads=[t // 2 for t in totals] + [t - t // 2 for t in totals])
    return _activation(graph, _Tensor(name, out), _activation_name(layer), layer.name, layer)


def _conv(graph, layer, x: _Tensor, kernel: np.ndarray, bias, group: int, hint: str) -> _Tensor:
    ksize = tuple(int(k) for k in kernel.shape[2:])
    strides = tuple(int(s) for s in layer.strides)
    dilations = tuple(int(d) for d in layer.dilation_rate)
    pads = _pads(layer, x, ksize, strides, dilations)
    return _conv_node(graph, x, kernel, bias, ksize, strides, dilations, pads, group, hint)


def _conv_node(graph, x, kernel, bias, ksize, strides, dilations, pads, group, hint) -> _Tensor:
    inputs = [x.name, graph.const(f"{hint}_kernel", kernel.astype(np.float32))]
    if bias is not None:
        inputs.append(graph.const(f"{hint}_bias", bias.astype(np.float32)))
    name = graph.node("Conv", inputs, f"{hint}_conv", kernel_shape=list(ksize), strides=list(strides),
                      dilations=list(dilations), pads=pads, group=int(group))
    h, w = (_out_size(n, k, s, d, p0 + p1)
            for n, k, s, d, p0, p1 in zip(x.shape[:2], ksize, strides, dilations, pads[:2], pads[2:]))
    return _Tensor(name, (h, w, int(kernel.shape[0])))


def _out_size(n: int, k: int, s: int, d: int, pad: int) -> int:
    return (n + pad - (k - 1) * d - 1) // s + 1


# --- pooling, padding, reshaping --------------------------------------------


@_handles("MaxPooling2D", "AveragePooling2D")
def _pool(graph, layer, args):
    x = args[0]
    _image(layer, x)
    ksize = tuple(int(k) for k in layer.pool_size)
    strides = tuple(int(s) for s in layer.strides)
    pads = _pads(layer, x, ksize, strides, (1, 1))
    attrs = {"kernel_shape": list(ksize), "strides": list(strides), "pads": pads}
    if type(layer).__name__ == "MaxPooling2D":
        name = graph.node("MaxPool", [x.name], f"{layer.name}_maxpool", **attrs)
    else:  # Keras (TensorFlow) averages over the valid part of the window only
        name = graph.node("AveragePool", [x.name], f"{layer.name}_avgpool", count_include_pad=0, **attrs)
    h, w = (_out_size(n, k, s, 1, p0 + p1) for n, k, s, p0, p1 in zip(x.shape[:2], ksize, strides, pads[:2], pads[2:]))
    return _Tensor(name, (h, w, x.shape[2]))


@_handles("GlobalAveragePooling2D", "GlobalMaxPooling2D")
def _global_pool(graph, layer, args):
    x = args[0]
    _image(layer, x)
    op = "GlobalAveragePool" if "Average" in type(layer).__name__ else "GlobalMaxPool"
    name = graph.node(op, [x.name], f"{layer.name}_{op.lower()}")
    if getattr(layer, "keepdims", False):
        return _Tensor(name, (1, 1, x.shape[2]))
    return _Tensor(graph.node("Flatten", [name], f"{layer.name}_flatten", axis=1), (x.shape[2],))


@_handles("ZeroPadding2D")
def _zero_padding(graph, layer, args):
    x = args[0]
    _image(layer, x)
    (top, bottom), (left, right) = layer.padding
    pads = graph.const(f"{layer.name}_pads", np.array([0, 0, top, left, 0, 0, bottom, right], np.int64))
    name = graph.node("Pad", [x.name, pads], f"{layer.name}_pad", mode="constant")
    return _Tensor(name, (x.shape[0] + top + bottom, x.shape[1] + left + right, x.shape[2]))


@_handles("Cropping2D")
def _cropping(graph, layer, args):
    x = args[0]
    _image(layer, x)
    (top, bottom), (left, right) = layer.cropping
    h, w, c = x.shape
    starts = graph.const(f"{layer.name}_starts", np.array([top, left], np.int64))
    ends = graph.const(f"{layer.name}_ends", np.array([h - bottom, w - right], np.int64))
    axes = graph.const(f"{layer.name}_axes", np.array([2, 3], np.int64))
    name = graph.node("Slice", [x.name, starts, ends, axes], f"{layer.name}_slice")
    return _Tensor(name, (h - top - bottom, w - left - right, c))


@_handles("UpSampling2D")
def _upsampling(graph, layer, args):
    """Keras ``nearest`` repeats each pixel (ONNX asymmetric coordinates, floor); ``bilinear`` is
    ``tf.image.resize`` with half-pixel centres and no antialiasing (ONNX ``half_pixel``)."""
    x = args[0]
    _image(layer, x)
    modes = {"nearest": {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
             "bilinear": {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}}
    if layer.interpolation not in modes:
        raise _unsupported(layer, f"interpolation={layer.interpolation}")
    a, b = (int(v) for v in layer.size)
    scales = graph.const(f"{layer.name}_scales", np.array([1.0, 1.0, a, b], np.float32))
    name = graph.node("Resize", [x.name, "", scales], f"{layer.name}_resize", **modes[layer.interpolation])
    return _Tensor(name, (x.shape[0] * a, x.shape[1] * b, x.shape[2]))


@_handles("Rescaling")
def _rescaling(graph, layer, args):
    """``x * scale + offset`` in float32, as Keras computes it."""
    x = args[0]
    scaled = graph.node("Mul", [x.name, _constant(graph, layer, np.asarray(layer.scale, np.float32), x.shape, x.perm,
                                                  f"{layer.name}_scale")], f"{layer.name}_mul")
    offset = _constant(graph, layer, np.asarray(layer.offset, np.float32), x.shape, x.perm, f"{layer.name}_offset")
    return _Tensor(graph.node("Add", [scaled, offset], f"{layer.name}_add"), x.shape, x.perm)


@_handles("Normalization")
def _normalization(graph, layer, args):
    """``(x - mean) / max(sqrt(variance), epsilon)`` as Keras computes it (the divisor rounded in float32)."""
    from harness.models.tf_runtime import keras

    x = args[0]
    if layer.invert:
        raise _unsupported(layer, "invert=True")
    mean = np.asarray(layer.mean, np.float32)
    divisor = np.maximum(np.sqrt(np.asarray(layer.variance, np.float32)), np.float32(keras().backend.epsilon()))
    centred = graph.node("Sub", [x.name, _constant(graph, layer, mean, x.shape, x.perm, f"{layer.name}_mean")],
                         f"{layer.name}_sub")
    divisor_name = _constant(graph, layer, divisor.astype(np.float32), x.shape, x.perm, f"{layer.name}_divisor")
    return _Tensor(graph.node("Div", [centred, divisor_name], f"{layer.name}_div"), x.shape, x.perm)


def _flatten_chw(graph: _Graph, x: _Tensor, hint: str) -> _Tensor:
    """Flatten an NCHW value in CHW order and record the order relative to Keras (HWC)."""
    h, w, c = x.shape
    perm = np.arange(h * w * c).reshape(h, w, c).transpose(2, 0, 1).ravel()
    name = graph.node("Flatten", [x.name], f"{hint}_flatten", axis=1)
    return _Tensor(name, (h * w * c,), None if np.array_equal(perm, np.arange(perm.size)) else perm)


@_handles("Flatten")
def _flatten(graph, layer, args):
    x = args[0]
    if len(x.shape) == 1:
        return x
    _channels_last(layer)
    return _flatten_chw(graph, x, layer.name)


@_handles("Reshape")
def _reshape(graph, layer, args):
    x = args[0]
    target = _shape_of(layer.output, f"layer '{layer.name}'")
    if len(target) == 1 and len(x.shape) == 3:
        return _flatten_chw(graph, x, layer.name)
    x = _materialize(graph, x)
    source = x.name
    if len(x.shape) == 3:
        source = graph.node("Transpose", [source], f"{layer.name}_to_nhwc", perm=[0, 2, 3, 1])
    shape = graph.const(f"{layer.name}_shape", np.array([-1, *target], np.int64))
    name = graph.node("Reshape", [source, shape], f"{layer.name}_reshape")
    if len(target) == 3:
        name = graph.node("Transpose", [name], f"{layer.name}_to_nchw", perm=[0, 3, 1, 2])
    return _Tensor(name, target)


@_handles("BatchNormalization")
def _batch_norm(graph, layer, args):
    x = args[0]
    if layer.axis % (len(x.shape) + 1) != len(x.shape):
        raise _unsupported(layer, f"axis={layer.axis} (only the channel axis)")
    channels = x.shape[-1]
    gamma = layer.gamma.numpy() if layer.scale else np.ones(channels, np.float32)
    beta = layer.beta.numpy() if layer.center else np.zeros(channels, np.float32)
    params = [gamma, beta, layer.moving_mean.numpy(), layer.moving_variance.numpy()]
    if x.perm is not None:
        params = [param[x.perm] for param in params]
    names = [graph.const(f"{layer.name}_{part}", param.astype(np.float32))
             for part, param in zip(("scale", "bias", "mean", "var"), params)]
    name = graph.node("BatchNormalization", [x.name, *names], f"{layer.name}_bn", epsilon=float(layer.epsilon))
    return _Tensor(name, x.shape, x.perm)


# --- merging ----------------------------------------------------------------


def _same_order(graph: _Graph, args: list[_Tensor]) -> list[_Tensor]:
    perms = [arg.perm for arg in args]
    if all(p is None for p in perms) or all(p is not None and np.array_equal(p, perms[0]) for p in perms):
        return args
    return [_materialize(graph, arg) for arg in args]


_MERGE_OPS = {"Add": "Sum", "Average": "Mean", "Maximum": "Max", "Minimum": "Min"}


@_handles("Add", "Average", "Maximum", "Minimum", "Multiply", "Subtract")
def _merge(graph, layer, args):
    """The element-wise merges, with numpy broadcasting between operands of one rank: a squeeze-and-excite gate
    ``(1, 1, C)`` times a feature map ``(H, W, C)`` is ONNX's own broadcasting of ``[N, C, 1, 1]`` against
    ``[N, C, H, W]``, since the NCHW layout keeps the size-1 axes where numpy expects them."""
    shape = _broadcast_shape(layer, [arg.shape for arg in args])
    full = iter(_same_order(graph, [arg for arg in args if arg.shape == shape]))
    args = [next(full) if arg.shape == shape else arg for arg in args]  # a smaller one: an image or a size-1 vector
    perm = next((arg.perm for arg in args if arg.shape == shape), None)  # a broadcast operand has no order
    class_name = type(layer).__name__
    if class_name == "Subtract":
        name = graph.node("Sub", [args[0].name, args[1].name], f"{layer.name}_sub")
    elif class_name == "Multiply":
        name = args[0].name
        for other in args[1:]:
            name = graph.node("Mul", [name, other.name], f"{layer.name}_mul")
    elif class_name == "Add" and len(args) == 2:
        name = graph.node("Add", [args[0].name, args[1].name], f"{layer.name}_add")
    else:
        op = _MERGE_OPS[class_name]
        name = graph.node(op, [arg.name for arg in args], f"{layer.name}_{op.lower()}")
    return _Tensor(name, shape, perm)


def _broadcast_shape(layer, shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """The numpy broadcast of operand shapes of one rank; a ModelError naming the layer for anything else (operands
    of different ranks, whose alignment differs between Keras's HWC and ONNX's NCHW)."""
    if len({len(shape) for shape in shapes}) != 1:
        raise _unsupported(layer, f"broadcasting between shapes of different ranks {sorted(set(shapes))}")
    try:
        return tuple(int(dim) for dim in np.broadcast_shapes(*shapes))
    except ValueError:
        raise _unsupported(layer, f"broadcasting between shapes {sorted(set(shapes))}") from None


@_handles("Concatenate")
def _concatenate(graph, layer, args):
    args = [_materialize(graph, arg) for arg in args]
    rank = len(args[0].shape)
    axis = _axis_of(layer, layer.axis, rank)
    name = graph.node("Concat", [arg.name for arg in args], f"{layer.name}_concat", axis=axis)
    keras_axis = layer.axis % (rank + 1) - 1
    shape = list(args[0].shape)
    shape[keras_axis] = sum(arg.shape[keras_axis] for arg in args)
    return _Tensor(name, tuple(shape))


# --- Keras 3 operation nodes (keras.ops) ------------------------------------

_OpHandler = Callable[[_Graph, object, list, tuple[int, ...]], _Tensor]
_OP_HANDLERS: dict[str, _OpHandler] = {}


def _handles_op(*class_names: str):
    def register(function: _OpHandler) -> _OpHandler:
        for class_name in class_names:
            _OP_HANDLERS[class_name] = function
        return function

    return register


def _op_arguments(operation, node, values: dict) -> list:
    """The operation's positional arguments: a ``_Tensor`` for a Keras tensor, a float32 array for a constant."""
    if node.arguments.kwargs:
        raise ModelError(f"unsupported keyword arguments {sorted(node.arguments.kwargs)} of operation "
                         f"{type(operation).__name__} (operation '{operation.name}')")
    arguments = []
    for argument in node.arguments.args:
        if id(argument) in values:
            arguments.append(values[id(argument)])
            continue
        try:
            arguments.append(np.asarray(argument, dtype=np.float32))
        except (TypeError, ValueError):
            raise ModelError(f"unsupported argument of type {type(argument).__name__} of operation "
                             f"{type(operation).__name__} (operation '{operation.name}')") from None
    return arguments


def _constant(graph: _Graph, operation, value: np.ndarray, shape: tuple[int, ...], perm, hint: str) -> str:
    """A constant that broadcasts against a Keras tensor of ``shape`` (batch excluded), as the ONNX value of
    that tensor lays it out: NCHW for images, ``perm`` order for a permuted vector; a scalar stays a scalar."""
    if value.ndim == len(shape) + 1:
        if value.shape[0] != 1:
            raise ModelError(f"unsupported constant of shape {list(value.shape)} varying along the batch axis "
                             f"(operation '{operation.name}')")
        value = value[0]
    if value.ndim > len(shape) or np.broadcast_shapes(value.shape, shape) != shape:
        raise ModelError(f"unsupported constant of shape {list(value.shape)} that does not broadcast to "
                         f"{list(shape)} (operation '{operation.name}')")
    if value.ndim == 0:
        return graph.const(hint, value)
    full = np.broadcast_to(value, shape)
    if len(shape) == 3:
        full = full.transpose(2, 0, 1)
    elif perm is not None:
        full = full[perm]
    return graph.const(hint, np.ascontiguousarray(full[np.newaxis]))


_ARITHMETIC = {"Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "Divide": "Div", "TrueDivide": "Div",
               "Maximum": "Max", "Minimum": "Min"}


@_handles_op(*_ARITHMETIC)
def _arithmetic_op(graph, operation, arguments, shape):
    tensors = _same_order(graph, [a for a in arguments if isinstance(a, _Tensor)])
    if not tensors:
        raise ModelError(f"operation '{operation.name}' ({type(operation).__name__}) has no tensor operand")
    if any(t.shape != shape for t in tensors):
        raise ModelError(f"unsupported broadcasting between tensors of shapes {[t.shape for t in tensors]} "
                         f"(operation '{operation.name}')")
    perm, ordered = tensors[0].perm, iter(tensors)
    names = [next(ordered).name if isinstance(a, _Tensor)
             else _constant(graph, operation, a, shape, perm, f"{operation.name}_operand{k}")
             for k, a in enumerate(arguments)]
    op = _ARITHMETIC[type(operation).__name__]
    return _Tensor(graph.node(op, names, f"{operation.name}_{op.lower()}"), shape, perm)


# keras.ops functions of one tensor: the ONNX op of their own, or the activation of the same name.
_UNARY = {"Log": "Log", "Sqrt": "Sqrt", "Negative": "Neg", "Absolute": "Abs", "Abs": "Abs",
          "Reciprocal": "Reciprocal"}
_OP_ACTIVATIONS = {"Relu": "relu", "Relu6": "relu6", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus",
                   "Softsign": "softsign", "Silu": "silu", "HardSigmoid": "hard_sigmoid", "HardSilu": "hard_silu",
                   "Selu": "selu", "Exp": "exponential", "Elu": "elu", "LeakyRelu": "leaky_relu",
                   "Softmax": "softmax", "Gelu": "gelu"}


def _one_tensor(operation, arguments) -> _Tensor:
    if len(arguments) != 1 or not isinstance(arguments[0], _Tensor):
        raise ModelError(f"unsupported arguments of operation {type(operation).__name__} (operation "
                         f"'{operation.name}'): one tensor is supported")
    return arguments[0]


@_handles_op(*_UNARY)
def _unary_op(graph, operation, arguments, shape):
    x = _one_tensor(operation, arguments)
    op = _UNARY[type(operation).__name__]
    return _Tensor(graph.node(op, [x.name], f"{operation.name}_{op.lower()}"), x.shape, x.perm)


@_handles_op(*_OP_ACTIVATIONS)
def _activation_op(graph, operation, arguments, shape):
    x = _one_tensor(operation, arguments)
    name = _OP_ACTIVATIONS[type(operation).__name__]
    if name == "elu":
        return _Tensor(graph.node("Elu", [x.name], f"{operation.name}_elu", alpha=float(operation.alpha)),
                       x.shape, x.perm)
    if name == "leaky_relu":
        return _leaky(graph, x, float(operation.negative_slope), operation.name)
    if name == "gelu":  # keras.ops.gelu: approximate=True by default
        return _gelu(graph, x, bool(operation.approximate), operation.name)
    return _activation(graph, x, name, operation.name, operation, getattr(operation, "axis", -1))
