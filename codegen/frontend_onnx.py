"""ONNX front end: an ``.onnx`` file to the IR, channels-first (``CHW``), never transposed.

The leading batch axis (1 or symbolic) is dropped from every tensor; ONNX axis
attributes are shifted accordingly. Parameters are the initializers as stored
(Conv weights ``OIHW``, Gemm ``B`` with or without ``transB``). Nodes whose
inputs are all constants (``Shape`` of a known tensor included) are folded
with ONNX's reference evaluator, so exported ``Shape -> Gather -> Concat ->
Reshape`` chains become a constant Reshape. Each op type maps to a handler in
``HANDLERS``; any other op type is reported as unsupported.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from codegen.errors import UnsupportedModel
from codegen.ir import Activation, Graph, Node, default_layout

SELU = (1.67326319217681884765625, 1.05070102214813232421875)


class _Builder:
    def __init__(self, source: str, opset: int, consts: dict[str, np.ndarray], model: onnx.ModelProto) -> None:
        self.graph = Graph(source=source, fmt="onnx")
        self.opset = opset
        self.consts = consts
        self.model = model
        self.uses: dict[str, int] = {}

    # -- errors and attributes
    def reject(self, node, name: str, why: str = "is not supported") -> UnsupportedModel:
        return UnsupportedModel(f"{self.graph.source}: node '{name}' ({node.op_type}) {why}")

    @staticmethod
    def attr(node, key: str, default=None):
        for attribute in node.attribute:
            if attribute.name == key:
                value = helper.get_attribute_value(attribute)
                return value.decode() if isinstance(value, bytes) else value
        return default

    # -- inputs
    def has_input(self, node, k: int) -> bool:
        return len(node.input) > k and node.input[k] != ""

    def const(self, node, name: str, k: int, what: str) -> np.ndarray:
        if not self.has_input(node, k) or node.input[k] not in self.consts:
            raise self.reject(node, name, f"needs a constant {what} (input {k})")
        return self.consts[node.input[k]]

    def tensor(self, node, name: str, k: int = 0) -> str:
        tensor = node.input[k] if self.has_input(node, k) else ""
        if tensor not in self.graph.tensors:
            raise self.reject(node, name, f"reads '{tensor}', which is neither a tensor computed from the input "
                                          "nor supported as a constant here")
        return tensor

    def shape(self, tensor: str) -> tuple[int, ...]:
        return self.graph.tensors[tensor].shape

    # -- outputs
    def new(self, tensor: str, shape) -> str:
        shape = tuple(int(d) for d in shape)
        self.graph.add_tensor(tensor, shape, default_layout(len(shape), channels_last=False))
        return tensor

    def add(self, node, name: str, op: str, inputs: list[str], shape, attrs=None, params=None, act=None) -> Node:
        for extra in node.output[1:]:
            if extra and self.uses.get(extra, 0):
                raise self.reject(node, name, f"has its output '{extra}' used; only the first output is supported")
        output = self.new(node.output[0], shape)
        return self.graph.add_node(Node(name=name, kind=node.op_type, op=op, inputs=list(inputs), output=output,
                                        attrs=attrs or {}, params=params or {}, act=act))

    def axis(self, node, name: str, axis: int, rank: int) -> int:
        """An ONNX axis (counting the batch axis) as an IR axis."""
        axis = axis + rank + 1 if axis < 0 else axis
        if not 1 <= axis <= rank:
            raise self.reject(node, name, f"works on axis {axis}; the batch axis is not supported")
        return axis - 1


HANDLERS = {}


def handles(*op_types):
    def register(function):
        for op_type in op_types:
            HANDLERS[op_type] = function
        return function
    return register


def _spatial(b: _Builder, node, name: str, tensor: str) -> tuple[int, int, int]:
    shape = b.shape(tensor)
    if len(shape) != 3:
        raise b.reject(node, name, f"has a rank-{len(shape) + 1} input; only 2-D (NCHW) is supported")
    return shape


def _window(b: _Builder, node, name: str, size: tuple[int, int], kernel, ceil_mode: bool = False):
    """(strides, dilations, pads [t, l, b, r], output size) of a Conv or pooling node."""
    strides = tuple(b.attr(node, "strides", [1, 1]))
    dilations = tuple(b.attr(node, "dilations", [1, 1]))
    auto_pad = b.attr(node, "auto_pad", "NOTSET")
    if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2:
        raise b.reject(node, name, "is not 2-D")
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad == "NOTSET":
        pads = tuple(b.attr(node, "pads", [0, 0, 0, 0]))
    elif auto_pad == "VALID":
        pads = (0, 0, 0, 0)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for n, s, r in zip(size, strides, reach):
            total = max((math.ceil(n / s) - 1) * s + r - n, 0)
            small = total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        pads = (begin[0], begin[1], end[0], end[1])
    else:
        raise b.reject(node, name, f"has auto_pad={auto_pad!r}")
    if len(pads) != 4 or min(pads) < 0:
        raise b.reject(node, name, f"has pads {list(pads)}; four non-negative values are supported")
    out = []
    for k, (n, s, r) in enumerate(zip(size, strides, reach)):
        span = n + pads[k] + pads[k + 2] - r
        if span < 0:
            raise b.reject(node, name, f"has a window larger than its padded input ({n})")
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= n + pads[k]:
            count -= 1  # the last window must start inside the input or its leading padding
        out.append(count)
    return strides, dilations, pads, tuple(out)


@handles("Conv")
def _conv(b, node, name):
    x = b.tensor(node, name)
    c, h, w = _spatial(b, node, name, x)
    weight = b.const(node, name, 1, "weight")
    if b.attr(node, "group", 1) != 1:
        raise b.reject(node, name, f"has group={b.attr(node, 'group')}; only group=1 is supported")
    if weight.ndim != 4 or weight.shape[1] != c:
        raise b.reject(node, name, f"has weights of shape {list(weight.shape)} for {c} input channels")
    kernel = tuple(b.attr(node, "kernel_shape", weight.shape[2:]))
    if kernel != tuple(weight.shape[2:]):
        raise b.reject(node, name, f"has kernel_shape {list(kernel)} but weights {list(weight.shape)}")
    strides, dilations, pads, (oh, ow) = _window(b, node, name, (h, w), kernel)
    params = {"kernel": weight}
    if b.has_input(node, 2):
        params["bias"] = b.const(node, name, 2, "bias")
    attrs = {"kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads, "kernel_layout": "OIHW"}
    b.add(node, name, "Conv2D", [x], (weight.shape[0], oh, ow), attrs, params)


@handles("MaxPool", "AveragePool")
def _pool(b, node, name):
    x = b.tensor(node, name)
    c, h, w = _spatial(b, node, name, x)
    kernel = tuple(b.attr(node, "kernel_shape", []))
    if b.attr(node, "storage_order", 0) != 0:
        raise b.reject(node, name, "has storage_order=1")
    ceil_mode = bool(b.attr(node, "ceil_mode", 0))
    strides, dilations, pads, (oh, ow) = _window(b, node, name, (h, w), kernel, ceil_mode)
    include = bool(b.attr(node, "count_include_pad", 0))
    if node.op_type == "AveragePool" and include:
        for k, (n, o) in enumerate(zip((h, w), (oh, ow))):
            if (o - 1) * strides[k] + (kernel[k] - 1) * dilations[k] + 1 > n + pads[k] + pads[k + 2]:
                raise b.reject(node, name, "has windows past the padding (ceil_mode with count_include_pad=1)")
    attrs = {"kind": "max" if node.op_type == "MaxPool" else "avg", "kernel": kernel, "strides": strides,
             "dilations": dilations, "pads": pads, "count_include_pad": include}
    b.add(node, name, "Pool2D", [x], (c, oh, ow), attrs)


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b, node, name):
    x = b.tensor(node, name)
    c, _, _ = _spatial(b, node, name, x)
    b.add(node, name, "GlobalPool2D", [x], (c, 1, 1), {"kind": "max" if "Max" in node.op_type else "avg"})


@handles("BatchNormalization")
def _batch_norm(b, node, name):
    x = b.tensor(node, name)
    if b.attr(node, "training_mode", 0):
        raise b.reject(node, name, "is in training mode")
    if b.graph.tensors[x].layout is None:
        raise b.reject(node, name, f"has a rank-{len(b.shape(x)) + 1} input; ranks 2 to 4 are supported")
    gamma, beta, mean, var = (b.const(node, name, k, what).astype(np.float64)
                              for k, what in enumerate(("scale", "bias", "mean", "variance"), start=1))
    scale = gamma / np.sqrt(var + float(b.attr(node, "epsilon", 1e-5)))
    b.add(node, name, "BatchNorm", [x], b.shape(x), {}, {"scale": scale, "shift": beta - mean * scale})


@handles("Gemm")
def _gemm(b, node, name):
    x = b.tensor(node, name)
    if b.attr(node, "transA", 0):
        raise b.reject(node, name, "has transA=1")
    if len(b.shape(x)) != 1:
        raise b.reject(node, name, f"reads a rank-{len(b.shape(x)) + 1} input; Gemm needs [batch, K]")
    weight = b.const(node, name, 1, "B")
    trans_b = bool(b.attr(node, "transB", 0))
    n_out = weight.shape[0] if trans_b else weight.shape[1]
    params = {"kernel": weight}
    if b.has_input(node, 2):
        bias = b.const(node, name, 2, "C").reshape(-1)
        if bias.size not in (1, n_out):
            raise b.reject(node, name, f"has C of shape {list(b.consts[node.input[2]].shape)} for {n_out} outputs")
        params["bias"] = np.broadcast_to(bias, (n_out,)).copy()
    attrs = {"weight_layout": "OI" if trans_b else "IO", "alpha": float(b.attr(node, "alpha", 1.0)),
             "beta": float(b.attr(node, "beta", 1.0))}
    b.add(node, name, "Dense", [x], (n_out,), attrs, params)


@handles("MatMul")
def _matmul(b, node, name):
    x = b.tensor(node, name)
    weight = b.const(node, name, 1, "right-hand matrix")
    if weight.ndim != 2 or weight.shape[0] != b.shape(x)[-1]:
        raise b.reject(node, name, f"multiplies {list(b.shape(x))} by {list(weight.shape)}")
    b.add(node, name, "Dense", [x], b.shape(x)[:-1] + (weight.shape[1],), {"weight_layout": "IO"},
          {"kernel": weight})


def _const_operand(value: np.ndarray, rank: int) -> np.ndarray:
    """A constant operand without the batch axis (it may or may not have one)."""
    if value.ndim == rank + 1:
        return value.reshape(value.shape[1:])
    return value


@handles("Add", "Sub", "Mul", "Div")
def _binary(b, node, name):
    operator = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}[node.op_type]
    tensors = [t for t in node.input if t in b.graph.tensors]
    if not tensors:
        raise b.reject(node, name, "has no tensor input")
    rank = max(len(b.shape(t)) for t in tensors)
    operands, params, shapes = [], {}, []
    for k, source in enumerate(node.input):
        if source in b.graph.tensors:
            operands.append({"tensor": source})
            shapes.append(b.shape(source))
        elif source in b.consts:
            value = _const_operand(b.consts[source], rank)
            if value.ndim > rank:
                raise b.reject(node, name, f"broadcasts a constant of shape {list(b.consts[source].shape)}")
            key = "bias" if operator == "+" else f"operand{k}"
            operands.append({"param": key, "shape": value.shape})
            params[key] = value
            shapes.append(value.shape)
        else:
            b.tensor(node, name, k)
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise b.reject(node, name, f"cannot broadcast shapes {[list(s) for s in shapes]}") from None
    if _fold_bias(b, node, name, operator, operands, params, shape):
        return
    b.add(node, name, "Elementwise", tensors, shape, {"operator": operator, "operands": operands}, params)


def _fold_bias(b, node, name, operator, operands, params, shape) -> bool:
    """MatMul followed by Add of a constant vector: the Add becomes the Dense layer's bias."""
    if operator != "+" or len(operands) != 2 or "bias" not in params:
        return False
    source = next(op["tensor"] for op in operands if "tensor" in op)
    producer = b.graph.producer(source)
    bias = params["bias"]
    if (producer is None or producer.op != "Dense" or "bias" in producer.params or producer.act is not None
            or b.uses.get(source, 0) != 1 or tuple(shape) != b.shape(source)
            or bias.size != shape[-1] or bias.shape[-1:] != (shape[-1],)):
        return False
    producer.params["bias"] = bias.reshape(-1)
    producer.output = b.new(node.output[0], shape)
    del b.graph.tensors[source]
    fused = b.graph.add_node(Node(name=name, kind=node.op_type, op="Fused", inputs=[], output=None,
                                  note=f"bias added by layer '{producer.name}'"))
    fused.input_shapes, fused.output_shape = [tuple(shape), (shape[-1],)], tuple(shape)
    return True


@handles("Concat")
def _concat(b, node, name):
    inputs = [b.tensor(node, name, k) for k in range(len(node.input))]
    axis = b.axis(node, name, b.attr(node, "axis"), len(b.shape(inputs[0])))
    shape = list(b.shape(inputs[0]))
    shape[axis] = sum(b.shape(t)[axis] for t in inputs)
    b.add(node, name, "Concat", inputs, shape, {"axis": axis})


def _view(b, node, name, shape):
    x = b.tensor(node, name)
    if int(np.prod(shape, dtype=np.int64)) != b.graph.tensors[x].size:
        raise b.reject(node, name, f"reshapes {list(b.shape(x))} to {list(shape)}")
    b.add(node, name, "View", [x], shape)


@handles("Flatten")
def _flatten(b, node, name):
    x = b.tensor(node, name)
    axis = b.attr(node, "axis", 1)
    if axis % (len(b.shape(x)) + 1) != 1:
        raise b.reject(node, name, f"has axis={axis}; only axis=1 (keep the batch axis) is supported")
    _view(b, node, name, (b.graph.tensors[x].size,))


@handles("Reshape")
def _reshape(b, node, name):
    x = b.tensor(node, name)
    target = [int(d) for d in b.const(node, name, 1, "shape")]
    full = (1,) + b.shape(x)
    if not b.attr(node, "allowzero", 0):
        target = [full[k] if d == 0 and k < len(full) else d for k, d in enumerate(target)]
    if target.count(-1) == 1:
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        target[target.index(-1)] = b.graph.tensors[x].size // max(known, 1)
    if not target or target[0] != 1:
        raise b.reject(node, name, f"reshapes to {target}, which does not keep a batch axis of 1")
    _view(b, node, name, tuple(target[1:]))


@handles("Squeeze", "Unsqueeze")
def _squeeze(b, node, name):
    x = b.tensor(node, name)
    axes = b.attr(node, "axes") if b.opset < 13 else (
        [int(a) for a in b.const(node, name, 1, "axes")] if b.has_input(node, 1) else None)
    full = [1, *b.shape(x)]
    if node.op_type == "Squeeze":
        rank = len(full)
        axes = [a % rank for a in axes] if axes is not None else [k for k, d in enumerate(full) if d == 1 and k]
        shape = [d for k, d in enumerate(full) if k not in axes]
        if 0 in axes:
            raise b.reject(node, name, "removes the batch axis")
    else:
        rank = len(full) + len(axes)
        axes = sorted(a % rank for a in axes)
        shape = list(full)
        for a in axes:
            shape.insert(a, 1)
        if 0 in axes:
            raise b.reject(node, name, "inserts an axis before the batch axis")
    _view(b, node, name, tuple(shape[1:]))


@handles("Identity", "Dropout")
def _identity(b, node, name):
    if node.op_type == "Dropout" and b.has_input(node, 2) and b.consts.get(node.input[2], np.array(False)).any():
        raise b.reject(node, name, "is in training mode")
    x = b.tensor(node, name)
    _view(b, node, name, b.shape(x))


@handles("Transpose")
def _transpose(b, node, name):
    x = b.tensor(node, name)
    rank = len(b.shape(x))
    perm = list(b.attr(node, "perm", list(range(rank, -1, -1))))
    if perm[0] != 0:
        raise b.reject(node, name, f"has perm={perm}, which moves the batch axis")
    perm = [p - 1 for p in perm[1:]]
    b.add(node, name, "Transpose", [x], tuple(b.shape(x)[p] for p in perm), {"perm": perm})


@handles("Gather")
def _gather(b, node, name):
    x = b.tensor(node, name)
    shape = b.shape(x)
    axis = b.axis(node, name, b.attr(node, "axis", 0), len(shape))
    indices = b.const(node, name, 1, "indices").astype(np.int64)
    if indices.ndim > 1:
        raise b.reject(node, name, f"has rank-{indices.ndim} indices; scalar or 1-D indices are supported")
    indices = np.where(indices < 0, indices + shape[axis], indices)
    if indices.size and (indices.min() < 0 or indices.max() >= shape[axis]):
        raise b.reject(node, name, f"has indices outside [0, {shape[axis]})")
    out_shape = shape[:axis] + indices.shape + shape[axis + 1:]
    if indices.ndim == 0:
        b.add(node, name, "Gather", [x], out_shape, {"axis": axis, "index": int(indices)})
    else:
        b.add(node, name, "Gather", [x], out_shape, {"axis": axis}, {"indices": indices.astype(np.int32)})


@handles("Pad")
def _pad(b, node, name):
    x = b.tensor(node, name)
    rank = len(b.shape(x)) + 1
    if b.attr(node, "mode", "constant") != "constant":
        raise b.reject(node, name, f"has mode={b.attr(node, 'mode')!r}; only 'constant' is supported")
    if b.opset < 11:
        pads, value = list(b.attr(node, "pads")), float(b.attr(node, "value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in b.const(node, name, 1, "pads")]
        value = float(b.const(node, name, 2, "value").reshape(-1)[0]) if b.has_input(node, 2) else 0.0
        axes = [int(a) % rank for a in b.const(node, name, 3, "axes")] if b.has_input(node, 3) else list(range(rank))
    per_axis = {a: (pads[k], pads[k + len(axes)]) for k, a in enumerate(axes)}
    if per_axis.get(0, (0, 0)) != (0, 0):
        raise b.reject(node, name, "pads the batch axis")
    ir_pads = [per_axis.get(a, (0, 0)) for a in range(1, rank)]
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(b.shape(x), ir_pads))
    b.add(node, name, "Pad", [x], shape, {"pads": ir_pads, "value": value})


def _activation(kind: str, params=()):
    def handler(b, node, name):
        x = b.tensor(node, name)
        b.add(node, name, "Activation", [x], b.shape(x), {"act": Activation(kind, tuple(params(b, node, name))
                                                                               if callable(params) else params)})
    return handler


HANDLERS.update({
    "Relu": _activation("relu"),
    "Tanh": _activation("tanh"),
    "Sigmoid": _activation("sigmoid"),
    "Softplus": _activation("softplus"),
    "Softsign": _activation("softsign"),
    "LeakyRelu": _activation("leaky_relu", lambda b, node, name: (float(b.attr(node, "alpha", 0.01)),)),
    "Elu": _activation("elu", lambda b, node, name: (float(b.attr(node, "alpha", 1.0)),)),
    "Selu": _activation("selu", lambda b, node, name: (float(b.attr(node, "alpha", SELU[0])),
                                                       float(b.attr(node, "gamma", SELU[1])))),
    "Clip": _activation("clip", lambda b, node, name: _clip_bounds(b, node, name)),
})


def _clip_bounds(b, node, name) -> tuple[float, float]:
    if b.opset < 11:
        return float(b.attr(node, "min", -np.inf)), float(b.attr(node, "max", np.inf))
    low = float(b.const(node, name, 1, "min")) if b.has_input(node, 1) else -np.inf
    high = float(b.const(node, name, 2, "max")) if b.has_input(node, 2) else np.inf
    return low, high


@handles("Softmax")
def _softmax(b, node, name):
    x = b.tensor(node, name)
    shape = b.shape(x)
    rank = len(shape) + 1
    axis = b.attr(node, "axis", 1 if b.opset < 13 else -1) % rank
    if axis == 0:
        raise b.reject(node, name, "normalises over the batch axis")
    if b.opset >= 13 and axis != rank - 1:
        raise b.reject(node, name, f"has axis={axis}; only the last axis is supported")
    inner = int(np.prod(shape[axis - 1:], dtype=np.int64))  # before opset 13: all axes from `axis` on
    b.add(node, name, "Softmax", [x], shape, {"inner": inner})


def _fold(b: _Builder, node) -> bool:
    """Evaluate a node whose inputs are all constants (or Shape of a known tensor)."""
    if node.op_type == "Constant":
        (attribute,) = node.attribute
        if attribute.name != "value":
            b.consts[node.output[0]] = np.array(helper.get_attribute_value(attribute))
        else:
            b.consts[node.output[0]] = numpy_helper.to_array(attribute.t)
        return True
    if node.op_type == "Shape" and node.input[0] in b.graph.tensors:
        full = np.array((1,) + b.shape(node.input[0]), dtype=np.int64)
        start, end = b.attr(node, "start", 0), b.attr(node, "end", None)
        b.consts[node.output[0]] = full[start:end]
        return True
    inputs = [name for name in node.input if name]
    if not inputs or not all(name in b.consts for name in inputs):
        return False
    from onnx.reference import ReferenceEvaluator

    infos = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(b.consts[name].dtype), None)
             for name in inputs]
    outputs = [helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in node.output]
    model = helper.make_model(helper.make_graph([node], "fold", infos, outputs), opset_imports=b.model.opset_import)
    try:
        values = ReferenceEvaluator(model).run(None, {name: b.consts[name] for name in inputs})
    except Exception:  # noqa: BLE001 - fall back to the op's own handler or the unsupported message
        return False
    for name, value in zip(node.output, values):
        b.consts[name] = np.asarray(value)
    return True


def _input_shape(source: str, value_info) -> tuple[int, ...]:
    dims = value_info.type.tensor_type.shape.dim
    if value_info.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
        raise UnsupportedModel(f"{source}: input '{value_info.name}' is not float32")
    if not dims:
        raise UnsupportedModel(f"{source}: input '{value_info.name}' has no shape")
    batch, rest = dims[0], dims[1:]
    if batch.HasField("dim_value") and batch.dim_value not in (0, 1):
        raise UnsupportedModel(f"{source}: input '{value_info.name}' has batch size {batch.dim_value}; "
                               "1 or symbolic is supported")
    if any(not d.HasField("dim_value") or d.dim_value < 1 for d in rest):
        raise UnsupportedModel(f"{source}: input '{value_info.name}' has a symbolic non-batch dimension")
    shape = tuple(d.dim_value for d in rest)
    if not 1 <= len(shape) <= 3:
        raise UnsupportedModel(f"{source}: input '{value_info.name}' has rank {len(dims)}; ranks 2 to 4 "
                               "(with batch) are supported")
    return shape


def load(path: Path) -> Graph:
    source = Path(path).name
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(str(path))
    except Exception as exc:  # noqa: BLE001 - any loader failure is a user-facing error
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UnsupportedModel(f"{source}: not a valid ONNX model: {reason}") from None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    g = model.graph
    consts = {init.name: numpy_helper.to_array(init) for init in g.initializer}
    inputs = [vi for vi in g.input if vi.name not in consts]
    if len(inputs) != 1 or len(g.output) != 1:
        raise UnsupportedModel(f"{source}: the graph has {len(inputs)} inputs and {len(g.output)} outputs; "
                               "exactly one of each is supported")
    b = _Builder(source, opset, consts, model)
    for node in g.node:
        for name in node.input:
            b.uses[name] = b.uses.get(name, 0) + 1
    for out in g.output:
        b.uses[out.name] = b.uses.get(out.name, 0) + 1
    graph = b.graph
    graph.input = graph.input_name = inputs[0].name
    b.new(inputs[0].name, _input_shape(source, inputs[0]))
    names: set[str] = set()
    for k, node in enumerate(g.node):
        name = node.name or f"{node.op_type}_{k}"
        while name in names:
            name += "_"
        names.add(name)
        if node.domain not in ("", "ai.onnx"):
            raise b.reject(node, name, f"is from domain '{node.domain}', which is not supported")
        if _fold(b, node):
            continue
        handler = HANDLERS.get(node.op_type)
        if handler is None:
            raise b.reject(node, name)
        handler(b, node, name)
    graph.output = graph.output_name = g.output[0].name
    if graph.output not in graph.tensors:
        raise UnsupportedModel(f"{source}: the output '{graph.output}' is a constant, not computed from the input")
    if graph.tensors[graph.output].layout is None:
        raise UnsupportedModel(f"{source}: the output has rank {len(graph.tensors[graph.output].shape) + 1}; "
                               "ranks 2 to 4 (with batch) are supported")
    return graph
