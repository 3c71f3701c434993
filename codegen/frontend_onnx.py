"""ONNX front end: an ``.onnx`` file to the IR, channels-first (``CHW``), never transposed.

Handlers compute every tensor's full ONNX shape. A leading axis of size 1 (the
batch axis, or one an ``Unsqueeze`` or ``Reshape`` added) is not stored in the
IR: ``_Builder.lead`` records, per tensor, whether its ONNX shape is the IR
shape with a leading 1, so ``full`` gives it back and ONNX axis attributes are
shifted per tensor. The graph input and output follow the batch-axis rule of
``batch_axis`` (docs/zoo.md); intermediate tensors drop a leading 1 whenever
their rank is at least 2 and the op allows it, so Conv and pooling see
``CHW``. Parameters are the initializers as stored (Conv weights ``OIHW``,
Gemm and MatMul matrices with an index map, see ``ir.dense_axes``). Nodes
whose inputs are all constants (``Shape`` of a known tensor included) are
folded with ONNX's reference evaluator, so exported ``Shape -> Gather ->
Concat -> Reshape`` chains become a constant Reshape. Each op type maps to a
handler in ``HANDLERS``; any other op type is reported as unsupported.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from codegen.errors import UnsupportedModel
from codegen.ir import (CONTRACTED, MAX_RANK, NEAREST_MODES, RESIZE_COORDINATES, RESIZE_MODES, Activation, Graph, Node,
                        default_layout, pack_outputs, resize_params, resize_taps, unpack_inputs)

SELU = (1.67326319217681884765625, 1.05070102214813232421875)
# ``MAX_RANK``: rank 4 is a ``CDHW`` volume (``ir.default_layout``) for 3-D pooling and ConvTranspose; any other
# rank-4 tensor is read by position.


def batch_axis(dims: list) -> bool:
    """Whether the first of these declared dimensions is a batch axis (the rule of docs/zoo.md).

    It is when it is symbolic (a name, or unset), or when it is 1 and the rank
    is 2, 4 or 5 (``[1, F]``, ``[1, C, H, W]``, ``[1, C, D, H, W]``). Otherwise every axis is data:
    ``[5]`` is a vector, ``[1, 28, 28]`` and ``[3, 32, 32]`` are ``CHW``
    images. ``dims`` holds ints, or strings for symbolic dimensions.
    """
    if not dims:
        return False
    return not isinstance(dims[0], int) or (dims[0] == 1 and len(dims) in (2, 4, 5))


def declared(value_info) -> list | None:
    """The declared shape of a graph input or output: ints, or names ('?' if unset); None if undeclared."""
    tensor_type = value_info.type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]


def shape_text(dims) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


class _Builder:
    def __init__(self, source: str, opset: int, consts: dict[str, np.ndarray], model: onnx.ModelProto) -> None:
        self.graph = Graph(source=source, fmt="onnx")
        self.opset = opset
        self.consts = consts
        self.model = model
        self.uses: dict[str, int] = {}
        self.lead: dict[str, bool] = {}  # tensor -> its ONNX shape has a leading 1 the IR shape omits
        self.output_leads: dict[str, bool | None] = {}  # graph output -> its batch axis, when its shape is declared

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
        """The IR shape (without the leading 1, if any)."""
        return self.graph.tensors[tensor].shape

    def full(self, tensor: str) -> tuple[int, ...]:
        """The ONNX shape."""
        return (1,) * self.lead[tensor] + self.shape(tensor)

    # -- outputs
    def new(self, tensor: str, full, lead: bool) -> str:
        full = tuple(int(d) for d in full)
        shape = full[1:] if lead else full
        self.lead[tensor] = lead
        self.graph.add_tensor(tensor, shape, default_layout(len(shape), channels_last=False))
        return tensor

    def out_lead(self, node, name: str, full: tuple[int, ...], lead: bool | None = None,
                 output: str | None = None) -> bool:
        """Whether the IR drops the leading 1 of output shape ``full`` (of ``output``, default the node's first).

        ``lead`` is the op's requirement; None leaves the choice here (for ops
        whose emitter reads any IR shape): the graph output's declared rule,
        else drop it when the rank is at least 2.
        """
        free = len(full) >= 2 and full[0] == 1
        declared_lead = self.output_leads.get(output or node.output[0])
        if declared_lead is not None:
            if lead is not None and lead != declared_lead or declared_lead and not free:
                raise self.reject(node, name, f"computes the graph output with shape {list(full)}, which does not "
                                              "match its declared batch axis (docs/zoo.md)")
            return declared_lead
        return free if lead is None else lead

    def add(self, node, name: str, op: str, inputs: list[str], full, attrs=None, params=None, act=None,
            lead: bool | None = None, output: str | None = None) -> Node:
        """Add a node whose output has ONNX shape ``full`` (``lead``: see ``out_lead``).

        ``output`` names the tensor written (default: the node's first output,
        the only one it may have used; Split passes each of its own).
        """
        if output is None:
            for extra in node.output[1:]:
                if extra and self.uses.get(extra, 0):
                    raise self.reject(node, name, f"has its output '{extra}' used; only the first output is "
                                                  "supported")
        full = tuple(int(d) for d in full)
        if not full:
            raise self.reject(node, name, "produces a scalar; tensors of rank 1 or more are supported")
        if 0 in full:
            raise self.reject(node, name, f"produces an empty tensor of shape {list(full)}")
        output = output or node.output[0]
        output = self.new(output, full, self.out_lead(node, name, full, lead, output))
        return self.graph.add_node(Node(name=name, kind=node.op_type, op=op, inputs=list(inputs), output=output,
                                        attrs=attrs or {}, params=params or {}, act=act))

    def internal(self, node, name: str, op: str, inputs: list[str], shape, attrs=None, params=None) -> str:
        """A node of the IR alone (no ONNX tensor), writing a new tensor of IR ``shape``; returns its name."""
        tensor = f"{node.output[0]}:{name}"
        self.new(tensor, shape, False)
        self.graph.add_node(Node(name=name, kind=node.op_type, op=op, inputs=list(inputs), output=tensor,
                                 attrs=attrs or {}, params=params or {}))
        return tensor

    def axis(self, node, name: str, axis: int, tensor: str) -> int:
        """An ONNX axis of ``tensor`` as an IR axis."""
        rank = len(self.full(tensor))
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise self.reject(node, name, f"works on axis {axis} of a rank-{rank} tensor")
        if self.lead[tensor] and axis == 0:
            raise self.reject(node, name, "works on the batch axis, which is not supported")
        return axis - self.lead[tensor]

    def batched(self, node, name: str, tensor: str, what: str) -> tuple[int, ...]:
        """The ONNX shape of an input that must have its batch axis (``[N, C, ...]``)."""
        if not self.lead[tensor]:
            raise self.reject(node, name, f"reads '{tensor}' of shape {list(self.full(tensor))} without a batch "
                                          f"axis; {what} needs [N, C, ...] with N = 1")
        return self.full(tensor)


HANDLERS = {}
# Op types of other domains than ONNX's own that have a handler (``frontend_onnx_quant`` adds ONNX Runtime's).
OTHER_DOMAINS: set[tuple[str, str]] = set()
# Extensions of ``load`` (``frontend_onnx_quant.register``, which the pipeline calls): ``(rewrite, finish)``;
# ``rewrite(builder, nodes, outputs)`` returns, per node id, what runs instead of the node's handler (a callable
# ``(builder, name)``, or None for nothing), ``finish(builder, outputs, instead)`` runs once every node is built.
EXTENSIONS: list[tuple[Callable, Callable]] = []


def handles(*op_types):
    def register(function):
        for op_type in op_types:
            HANDLERS[op_type] = function
        return function
    return register


def _image(b: _Builder, node, name: str, tensor: str, volumes: bool = False) -> tuple[str, bool]:
    """The input of a Conv or pooling node as an IR image ``[C, H, W]``, and whether the node is 1-D.

    ONNX gives ``[1, C, H, W]`` or, for 1-D, ``[1, C, L]``; a 1-D input (or
    one whose leading 1 the IR keeps) is read through a ``View`` of shape
    ``[C, 1, L]`` (the same memory, no code), so the 2-D emitters serve both.
    ``volumes``: the op also takes 3-D ``[1, C, D, H, W]``, read as ``[C, D, H, W]``.
    """
    full = b.full(tensor)
    if len(full) not in ((3, 4, 5) if volumes else (3, 4)):
        raise b.reject(node, name, f"has a rank-{len(full)} input {list(full)}; 1-D ([N, C, L]) and 2-D "
                                   f"([N, C, H, W]){' and 3-D ([N, C, D, H, W])' if volumes else ''} are supported")
    if full[0] != 1:
        raise b.reject(node, name, f"reads '{tensor}' of shape {list(full)}, a batch of {full[0]}; "
                                   f"{node.op_type} is generated for one sample (N = 1)")
    image = full[1:] if len(full) == 5 else (full[1], 1 if len(full) == 3 else full[2], full[-1])
    if b.shape(tensor) != image:
        tensor = b.internal(node, f"{name}:2d", "View", [tensor], image)
    return tensor, len(full) == 3


def _image_out(b: _Builder, node, name: str, op: str, x: str, shape: tuple[int, ...], one_d: bool,
               attrs: dict, params: dict | None = None, output: str | None = None) -> Node:
    """The node writing IR image ``shape`` (returned); a 1-D node's output is viewed back as ``[1, C, L]``.

    ``output``: the ONNX tensor written (default the node's first output; a folded QDQ group's is its
    QuantizeLinear's)."""
    if not one_d:
        return b.add(node, name, op, [x], (1, *shape), attrs, params, lead=True, output=output)
    image = b.internal(node, name, op, [x], shape, attrs, params)
    b.add(node, f"{name}:1d", "View", [image], (1, shape[0], shape[2]), output=output)
    return b.graph.producer(image)


def _window_attrs(b: _Builder, node, name: str, kernel, one_d: bool, rank: int = 2) -> tuple[tuple, tuple, tuple,
                                                                                            list]:
    """(kernel, strides, dilations, explicit pads (begins, then ends) or None) per spatial axis; 1-D gets H = 1.

    ``rank``: the spatial axes of a node that is not 1-D (2, or 3 for a volume).
    """
    rank = 1 if one_d else rank
    kernel = tuple(kernel)
    strides = tuple(b.attr(node, "strides", [1] * rank))
    dilations = tuple(b.attr(node, "dilations", [1] * rank))
    pads = b.attr(node, "pads")
    if len(kernel) != rank or len(strides) != rank or len(dilations) != rank or (pads and len(pads) != 2 * rank):
        raise b.reject(node, name, f"has kernel_shape, strides, dilations or pads of another rank than its "
                                   f"{rank}-D input")
    if one_d:
        kernel, strides, dilations = (1, *kernel), (1, *strides), (1, *dilations)
        pads = [0, pads[0], 0, pads[1]] if pads else None
    return kernel, strides, dilations, list(pads) if pads else None


def _window(b: _Builder, node, name: str, size: tuple[int, ...], kernel, ceil_mode: bool = False,
            one_d: bool = False):
    """(kernel, strides, dilations, pads (begins, then ends), output size) of a Conv or pooling node.

    ``size`` is the IR image's spatial size (H, W) or a volume's (D, H, W).
    """
    kernel, strides, dilations, explicit = _window_attrs(b, node, name, kernel, one_d, len(size))
    auto_pad = b.attr(node, "auto_pad", "NOTSET")
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    spatial = len(size)
    if auto_pad == "NOTSET":
        pads = tuple(explicit or (0,) * 2 * spatial)
    elif auto_pad == "VALID":
        pads = (0,) * 2 * spatial
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for n, s, r in zip(size, strides, reach):
            total = max((math.ceil(n / s) - 1) * s + r - n, 0)
            small = total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        pads = (*begin, *end)
    else:
        raise b.reject(node, name, f"has auto_pad={auto_pad!r}")
    if min(pads) < 0:
        raise b.reject(node, name, f"has pads {list(pads)}; non-negative values are supported")
    out = []
    for k, (n, s, r) in enumerate(zip(size, strides, reach)):
        span = n + pads[k] + pads[k + spatial] - r
        if span < 0:
            raise b.reject(node, name, f"has a window larger than its padded input ({n})")
        count = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= n + pads[k]:
            count -= 1  # the last window must start inside the input or its leading padding
        out.append(count)
    return kernel, strides, dilations, pads, tuple(out)


def _group(b: _Builder, node, name: str, c_in: int, c_out: int, per_group: int) -> int:
    """A Conv's ``group``: it divides both channel counts and the weights hold C_in / group input channels."""
    group = int(b.attr(node, "group", 1))
    if group < 1 or c_in % group or c_out % group or per_group * group != c_in:
        raise b.reject(node, name, f"has group={group} with weights of {per_group} input channels per group for "
                                   f"{c_in} input and {c_out} output channels")
    return group


@handles("Conv")
def _conv(b, node, name):
    params = {"bias": b.const(node, name, 2, "bias")} if b.has_input(node, 2) else {}
    conv_layer(b, node, name, b.tensor(node, name), b.const(node, name, 1, "weight"), params)


def conv_layer(b: _Builder, node, name: str, x: str, weight: np.ndarray, params: dict, op: str = "Conv2D",
               output: str | None = None) -> Node:
    """The Conv2D (or ``op``: QConv2D) node of an ONNX Conv of tensor ``x`` by ``weight`` (``OIHW``) with the
    node's window attributes; ``params`` besides the kernel (bias...); ``output`` as in ``_image_out``."""
    x, one_d = _image(b, node, name, x)
    c, h, w = b.shape(x)
    if weight.ndim != (3 if one_d else 4):
        raise b.reject(node, name, f"has weights of shape {list(weight.shape)} for a {2 - one_d}-D input")
    group = _group(b, node, name, c, weight.shape[0], weight.shape[1])
    if one_d:
        weight = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    kernel = b.attr(node, "kernel_shape", None)
    if kernel is not None and tuple(kernel) != tuple(weight.shape[2 + one_d:]):
        raise b.reject(node, name, f"has kernel_shape {list(kernel)} but weights {list(weight.shape)}")
    kernel, strides, dilations, pads, (oh, ow) = _window(b, node, name, (h, w), weight.shape[2 + one_d:],
                                                          one_d=one_d)
    attrs = {"kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads, "kernel_layout": "OIHW",
             "group": group}
    return _image_out(b, node, name, op, x, (weight.shape[0], oh, ow), one_d, attrs, {"kernel": weight, **params},
                      output)


@handles("ConvTranspose")
def _conv_transpose(b, node, name):
    """y[oc, ih * s + kh * d - pad] += x[ic, ih] * w[ic, oc, kh]: the output size from ONNX's formula."""
    x, one_d = _image(b, node, name, b.tensor(node, name), volumes=True)
    c, *size = b.shape(x)
    rank = 1 if one_d else len(size)
    weight = b.const(node, name, 1, "weight")
    if weight.ndim != rank + 2:
        raise b.reject(node, name, f"has weights of shape {list(weight.shape)} for a {rank}-D input")
    group = int(b.attr(node, "group", 1))
    if weight.shape[0] != c or c % group:
        raise b.reject(node, name, f"has weights of shape {list(weight.shape)} for {c} input channels and "
                                   f"group={group}")
    c_out = weight.shape[1] * group
    if one_d:
        weight = weight.reshape(weight.shape[0], weight.shape[1], 1, weight.shape[2])
    kernel, strides, dilations, explicit = _window_attrs(b, node, name, weight.shape[2 + one_d:], one_d, rank)
    extra = list(b.attr(node, "output_padding", [0] * rank))
    shape = b.attr(node, "output_shape")
    auto_pad = b.attr(node, "auto_pad", "NOTSET")
    if one_d:
        extra = [0, *extra]
        shape = [1, *shape] if shape else shape
    spatial = len(size)
    full = [s * (n - 1) + o + (k - 1) * d + 1 for n, s, o, k, d in zip(size, strides, extra, kernel, dilations)]
    if shape or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = list(shape[-spatial:]) if shape else [n * s for n, s in zip(size, strides)]
        total = [f - t for f, t in zip(full, target)]
        upper = auto_pad == "SAME_UPPER"  # the spec: the smaller half first for SAME_UPPER, else the larger
        # an output_shape beyond the full output extends it at the end (a negative end pad: bias only there)
        begin = [0 if t < 0 else t // 2 if upper else t - t // 2 for t in total]
        pads = (*begin, *(t - g for t, g in zip(total, begin)))
    elif auto_pad in ("NOTSET", "VALID"):
        pads = tuple(explicit or (0,) * 2 * spatial) if auto_pad == "NOTSET" else (0,) * 2 * spatial
    else:
        raise b.reject(node, name, f"has auto_pad={auto_pad!r}")
    out = [f - pads[k] - pads[k + spatial] for k, f in enumerate(full)]
    if min(pads[:spatial]) < 0 or min(out) < 1:
        raise b.reject(node, name, f"has pads {list(pads)} for an output of {full}")
    params = {"kernel": weight}
    if b.has_input(node, 2):
        params["bias"] = b.const(node, name, 2, "bias")
    attrs = {"kernel": kernel, "strides": strides, "dilations": dilations, "pads": pads,
             "kernel_layout": "IO" + b.graph.tensors[x].layout[1:], "group": group}
    _image_out(b, node, name, "ConvTranspose2D", x, (c_out, *out), one_d, attrs, params)


@handles("MaxPool", "AveragePool")
def _pool(b, node, name):
    x, one_d = _image(b, node, name, b.tensor(node, name), volumes=True)
    c, *size = b.shape(x)
    # storage_order only orders MaxPool's Indices output, which ``add`` refuses when it is used.
    ceil_mode = bool(b.attr(node, "ceil_mode", 0))
    kernel, strides, dilations, pads, out = _window(b, node, name, tuple(size), b.attr(node, "kernel_shape", []),
                                                    ceil_mode, one_d)
    include = bool(b.attr(node, "count_include_pad", 0))
    attrs = {"kind": "max" if node.op_type == "MaxPool" else "avg", "kernel": kernel, "strides": strides,
             "dilations": dilations, "pads": pads, "count_include_pad": include}
    _image_out(b, node, name, "Pool2D", x, (c, *out), one_d, attrs)


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(b, node, name):
    x, one_d = _image(b, node, name, b.tensor(node, name))
    c = b.shape(x)[0]
    attrs = {"kind": "max" if "Max" in node.op_type else "avg"}
    if one_d:
        b.add(node, name, "GlobalPool2D", [x], (1, c, 1), attrs)
    else:
        b.add(node, name, "GlobalPool2D", [x], (1, c, 1, 1), attrs, lead=True)


@handles("BatchNormalization")
def _batch_norm(b, node, name):
    x = b.tensor(node, name)
    if b.attr(node, "training_mode", 0):
        raise b.reject(node, name, "is in training mode")
    full = b.batched(node, name, x, "BatchNormalization")
    if b.graph.tensors[x].layout is None:
        raise b.reject(node, name, f"has a rank-{len(full)} input; ranks 2 to 4 are supported")
    gamma, beta, mean, var = (b.const(node, name, k, what).astype(np.float64)
                              for k, what in enumerate(("scale", "bias", "mean", "variance"), start=1))
    scale = gamma / np.sqrt(var + float(b.attr(node, "epsilon", 1e-5)))
    b.add(node, name, "BatchNorm", [x], full, {}, {"scale": scale, "shift": beta - mean * scale}, lead=True)


def _dense(b: _Builder, node, name: str, x: str, x_axes, weight: np.ndarray, w_axes, full, attrs=None,
           params=None, op: str = "Dense", output: str | None = None) -> Node:
    """A Dense node from index maps over ONNX axes (input ``x``, constant ``weight``, output ``full``).

    ``x_axes``/``w_axes`` name, per ONNX axis, the ONNX output axis it runs
    along, ``CONTRACTED``, or None (size 1, read at 0); the axes the IR drops
    (leading 1s) are removed here, giving the maps of ``ir.dense_axes``.
    ``op``: QDense for a quantized product; ``output`` the ONNX tensor written (default the node's first).
    """
    node_ = b.add(node, name, op, [x], full, attrs, {"kernel": weight, **(params or {})}, output=output)
    out_lead = b.lead[node_.output]

    def ir(axis):
        if axis == CONTRACTED or axis is None:
            return axis
        return None if axis < out_lead else axis - out_lead

    node_.attrs.update(x_axes=tuple(ir(a) for a in x_axes[b.lead[x]:]), w_axes=tuple(ir(a) for a in w_axes))
    if "bias" in node_.params:
        bias = node_.params["bias"]
        bias = bias.reshape((1,) * (len(full) - bias.ndim) + bias.shape)
        node_.params["bias"] = bias.reshape(bias.shape[out_lead:])
    return node_


@handles("Gemm")
def _gemm(b, node, name):
    """Y = alpha * A' B' + beta * C, A' = A or its transpose (transA), B' likewise; one of A, B is constant."""
    side = 0 if node.input[0] in b.graph.tensors else 1
    x = b.tensor(node, name, side)
    weight = b.const(node, name, 1 - side, "A" if side else "B")
    x_axes, w_axes, (m, n) = gemm_axes(b, node, name, x, weight, side)
    attrs, params = {"alpha": float(b.attr(node, "alpha", 1.0))}, {}
    if b.has_input(node, 2):
        bias = np.asarray(b.const(node, name, 2, "C"), dtype=np.float32)
        try:
            if bias.ndim > 2 or np.broadcast_shapes(bias.shape, (m, n)) != (m, n):
                raise ValueError
        except ValueError:
            raise b.reject(node, name, f"has C of shape {list(bias.shape)} for an output of {[m, n]}") from None
        params["bias"], attrs["beta"] = bias, float(b.attr(node, "beta", 1.0))
    _dense(b, node, name, x, x_axes, weight, w_axes, (m, n), attrs, params)


def gemm_axes(b: _Builder, node, name: str, x: str, weight: np.ndarray, side: int) -> tuple[tuple, tuple, tuple]:
    """The ONNX index maps of tensor ``x`` and constant ``weight`` (``side``: 0 when x is A) of a Gemm
    (transA, transB) and its output's (M, N)."""
    trans = bool(b.attr(node, "transA", 0)), bool(b.attr(node, "transB", 0))
    x_full = b.full(x)
    if len(x_full) != 2 or weight.ndim != 2:
        raise b.reject(node, name, f"multiplies {list(x_full)} by {list(weight.shape)}; Gemm needs two matrices")
    # ONNX axes of A and B: output axis 0 (rows of A'), output axis 1 (columns of B') or the summed one.
    maps = ((0, CONTRACTED), (CONTRACTED, 1))
    a_axes, b_axes = (tuple(reversed(m)) if t else m for m, t in zip(maps, trans))
    shapes = {0: x_full if side == 0 else weight.shape, 1: x_full if side == 1 else weight.shape}
    m = shapes[0][a_axes.index(0)]
    k, k_b = shapes[0][a_axes.index(CONTRACTED)], shapes[1][b_axes.index(CONTRACTED)]
    n = shapes[1][b_axes.index(1)]
    if k != k_b:
        raise b.reject(node, name, f"multiplies A {list(shapes[0])} by B {list(shapes[1])} "
                                   f"(transA={int(trans[0])}, transB={int(trans[1])}): inner sizes {k} and {k_b}")
    return ((a_axes, b_axes) if side == 0 else (b_axes, a_axes)) + ((m, n),)


@handles("MatMul")
def _matmul(b, node, name):
    """X W with W a constant of any rank (numpy matmul), or W X with W a constant matrix; X of any rank."""
    side = 0 if node.input[0] in b.graph.tensors else 1
    x = b.tensor(node, name, side)
    weight = b.const(node, name, 1 - side, "matrix")
    x_full = b.full(x)
    if side == 0:
        return _matmul_by_constant(b, node, name, x, x_full, weight)
    if weight.ndim != 2:
        raise b.reject(node, name, f"multiplies a constant of shape {list(weight.shape)} by a tensor; a matrix is "
                                   "supported on the left")
    rank = len(x_full)
    if rank == 1:  # W [M, K] @ X [K] -> [M]
        k_x, k_w = x_full[0], weight.shape[1]
        full, x_axes, w_axes = (weight.shape[0],), (CONTRACTED,), (0, CONTRACTED)
    else:  # W [M, K] @ X [..., K, P] -> [..., M, P]
        k_x, k_w = x_full[-2], weight.shape[1]
        full = x_full[:-2] + (weight.shape[0], x_full[-1])
        x_axes = tuple(range(rank - 2)) + (CONTRACTED, rank - 1)
        w_axes = (rank - 2, CONTRACTED)
    if k_x != k_w:
        raise b.reject(node, name, f"multiplies {list(weight.shape)} by {list(x_full)}")
    _dense(b, node, name, x, x_axes, weight, w_axes, full)


def _matmul_by_constant(b: _Builder, node, name: str, x: str, x_full: tuple[int, ...], weight: np.ndarray,
                        params: dict | None = None, op: str = "Dense", output: str | None = None) -> Node:
    """X [..., M, K] @ W [..., K, N] as numpy's matmul: the leading axes broadcast, a 1-D operand promoted
    (X to [1, K], W to [K, 1]) and its added axis removed from the result.

    One Dense node (or ``op``, with ``params`` besides the kernel, writing ``output``: see ``_dense``): its
    index maps send each leading axis to its output axis, or to index 0 (None) where it has size 1 against a
    larger one.
    """
    xs = (1,) + tuple(x_full) if len(x_full) == 1 else tuple(x_full)
    ws = weight.shape + (1,) if weight.ndim == 1 else weight.shape
    try:
        lead_axes = tuple(np.broadcast_shapes(xs[:-2], ws[:-2]))
    except ValueError:
        lead_axes = None
    if weight.ndim == 0 or lead_axes is None or xs[-1] != ws[-2]:
        raise b.reject(node, name, f"multiplies {list(x_full)} by {list(weight.shape)}")
    promoted = lead_axes + (xs[-2], ws[-1])
    rank = len(promoted)
    dropped = [rank - 2] * (len(x_full) == 1) + [rank - 1] * (weight.ndim == 1)  # axes numpy squeezes

    def axes(shape: tuple[int, ...], last: tuple, stored: slice) -> tuple:
        offset = rank - len(shape)
        leading = tuple(k + offset if d == promoted[k + offset] else None for k, d in enumerate(shape[:-2]))
        kept = [a if a in (CONTRACTED, None) else a - sum(d < a for d in dropped) for a in leading + last]
        return tuple(kept[stored])  # a promoted operand's added axis (X: first, W: last) is not stored

    full = tuple(d for k, d in enumerate(promoted) if k not in dropped)
    return _dense(b, node, name, x,
                  axes(xs, (rank - 2, CONTRACTED), slice(-1, None) if len(x_full) == 1 else slice(None)), weight,
                  axes(ws, (CONTRACTED, rank - 1), slice(0, 1) if weight.ndim == 1 else slice(None)), full,
                  params=params, op=op, output=output)


def _const_operand(value: np.ndarray, rank: int) -> np.ndarray:
    """A constant operand with at most ``rank`` axes: leading axes beyond it have size 1 (numpy broadcasting)."""
    return value.reshape(value.shape[value.ndim - rank:]) if value.ndim > rank else value


OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Sum": "+", "Mean": "+", "Max": "max", "Min": "min"}


@handles(*OPERATORS)
def _binary(b, node, name):
    """Add, Sub, Mul, Div and the variadic Sum, Mean, Max, Min: numpy broadcasting, constants as params."""
    operator = OPERATORS[node.op_type]
    tensors = [t for t in node.input if t in b.graph.tensors]
    if not tensors:
        raise b.reject(node, name, "has no tensor input")
    shapes = []
    for k, source in enumerate(node.input):
        if source in b.graph.tensors:
            shapes.append(b.full(source))
        elif source in b.consts:
            shapes.append(b.consts[source].shape)
        else:
            b.tensor(node, name, k)
    try:
        full = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise b.reject(node, name, f"cannot broadcast shapes {[list(s) for s in shapes]}") from None
    # A tensor of the output's rank that keeps its leading 1 forces the output to keep it too.
    keeps = any(not b.lead[t] and len(b.full(t)) == len(full) for t in tensors)
    lead = b.out_lead(node, name, full, False if keeps else None)
    rank = len(full) - lead
    operands, params = [], {}
    for k, source in enumerate(node.input):
        if source in b.graph.tensors:
            operands.append({"tensor": source})
        else:
            value = _const_operand(b.consts[source], rank)
            key = "bias" if operator == "+" and len(node.input) == 2 else f"operand{k}"
            operands.append({"param": key, "shape": value.shape})
            params[key] = value
    if node.op_type != "Mean" and _fold_bias(b, node, name, operator, operands, params, full, lead):
        return
    attrs = {"operator": operator, "operands": operands}
    if node.op_type == "Mean":
        attrs["mean"] = True
    b.add(node, name, "Elementwise", tensors, full, attrs, params, lead=lead)


def _fold_bias(b, node, name, operator, operands, params, full, lead) -> bool:
    """MatMul followed by Add of a constant vector: the Add becomes the Dense layer's bias."""
    if operator != "+" or len(operands) != 2 or "bias" not in params:
        return False
    source = next(op["tensor"] for op in operands if "tensor" in op)
    producer = b.graph.producer(source)
    bias = params["bias"]
    if (producer is None or producer.op != "Dense" or "bias" in producer.params or producer.act is not None
            or b.uses.get(source, 0) != 1 or tuple(full) != b.full(source) or lead != b.lead[source]
            or bias.size != full[-1] or bias.shape[-1:] != (full[-1],)):
        return False
    producer.params["bias"] = bias.reshape(-1)
    producer.output = b.new(node.output[0], full, lead)
    del b.graph.tensors[source]
    fused = b.graph.add_node(Node(name=name, kind=node.op_type, op="Fused", inputs=[], output=None,
                                  note=f"bias added by layer '{producer.name}'"))
    shape = b.shape(producer.output)
    fused.input_shapes, fused.output_shape = [shape, (full[-1],)], shape
    return True


@handles("Concat")
def _concat(b, node, name):
    """Tensors (and constants, as params) joined along any axis but the batch axis."""
    inputs = [t for t in node.input if t in b.graph.tensors]
    if not inputs:
        raise b.reject(node, name, "has no tensor input")
    for k, source in enumerate(node.input):
        if source not in b.graph.tensors and source not in b.consts:
            b.tensor(node, name, k)
    if len({b.lead[t] for t in inputs}) != 1:
        raise b.reject(node, name, f"joins tensors of shapes {[list(b.full(t)) for t in inputs]} with and without "
                                   "a batch axis")
    lead = b.lead[inputs[0]]
    axis = b.axis(node, name, b.attr(node, "axis"), inputs[0])
    shapes, parts, params = [], [], {}
    for k, source in enumerate(node.input):
        if source in b.graph.tensors:
            shapes.append(b.shape(source))
            parts.append({"tensor": source})
        else:
            value = np.asarray(b.consts[source], dtype=np.float32)
            if value.ndim != len(b.full(inputs[0])) or lead and value.shape[0] != 1:
                raise b.reject(node, name, f"joins a constant of shape {list(value.shape)} to tensors of shape "
                                           f"{list(b.full(inputs[0]))}")
            value = value.reshape(value.shape[lead:])
            shapes.append(value.shape)
            parts.append({"param": f"part{k}"})
            params[f"part{k}"] = value
    if any(len(s) != len(shapes[0]) or any(d != e for j, (d, e) in enumerate(zip(s, shapes[0])) if j != axis)
           for s in shapes):
        raise b.reject(node, name, f"joins shapes {[list(s) for s in shapes]} along axis {axis}")
    full = list(b.full(inputs[0]))
    full[axis + lead] = sum(s[axis] for s in shapes)
    attrs = {"axis": axis, **({"parts": parts} if params else {})}
    b.add(node, name, "Concat", inputs, full, attrs, params, lead=lead)


def _view(b, node, name, full):
    """The input's memory read with ONNX shape ``full`` (any IR shape will do: a view emits no code)."""
    x = b.tensor(node, name)
    if int(np.prod(full, dtype=np.int64)) != b.graph.tensors[x].size:
        raise b.reject(node, name, f"reshapes {list(b.full(x))} to {list(full)}")
    b.add(node, name, "View", [x], full)


@handles("Flatten")
def _flatten(b, node, name):
    x = b.tensor(node, name)
    full = b.full(x)
    axis = b.attr(node, "axis", 1)
    axis = axis + len(full) if axis < 0 else axis
    if not 0 <= axis <= len(full):
        raise b.reject(node, name, f"has axis={b.attr(node, 'axis')} for a rank-{len(full)} input")
    _view(b, node, name, (int(np.prod(full[:axis], dtype=np.int64)), int(np.prod(full[axis:], dtype=np.int64))))


@handles("Reshape")
def _reshape(b, node, name):
    x = b.tensor(node, name)
    target = [int(d) for d in b.const(node, name, 1, "shape")]
    full = b.full(x)
    if not b.attr(node, "allowzero", 0):
        target = [full[k] if d == 0 and k < len(full) else d for k, d in enumerate(target)]
    if target.count(-1) == 1:
        known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
        target[target.index(-1)] = b.graph.tensors[x].size // max(known, 1)
    _view(b, node, name, tuple(target))


@handles("Squeeze", "Unsqueeze")
def _squeeze(b, node, name):
    x = b.tensor(node, name)
    axes = b.attr(node, "axes") if b.opset < 13 else (
        [int(a) for a in b.const(node, name, 1, "axes")] if b.has_input(node, 1) else None)
    full = list(b.full(x))
    if node.op_type == "Squeeze":
        rank = len(full)
        axes = [a % rank for a in axes] if axes is not None else [k for k, d in enumerate(full) if d == 1]
        shape = [d for k, d in enumerate(full) if k not in axes]
    else:
        rank = len(full) + len(axes)
        shape = list(full)
        for a in sorted(a % rank for a in axes):
            shape.insert(a, 1)
    _view(b, node, name, tuple(shape))


@handles("Cast", "CastLike")
def _cast(b, node, name):
    """A cast to float32 of a float32 tensor changes nothing (expanded function bodies write them).

    CastLike of a constant to the type of a tensor (float32) is folded here.
    """
    if node.op_type == "CastLike" and node.input[0] in b.consts and node.input[1] in b.graph.tensors:
        b.consts[node.output[0]] = np.asarray(b.consts[node.input[0]], dtype=np.float32)
        return
    x = b.tensor(node, name)
    if node.op_type == "Cast":
        target = b.attr(node, "to")
    else:
        like = b.consts.get(node.input[1]) if b.has_input(node, 1) else None
        target = onnx.TensorProto.FLOAT if node.input[1] in b.graph.tensors or (
            like is not None and like.dtype == np.float32) else None
    if target != onnx.TensorProto.FLOAT:
        raise b.reject(node, name, "casts to another type than float32")
    _view(b, node, name, b.full(x))


@handles("Identity", "Dropout")
def _identity(b, node, name):
    if node.op_type == "Dropout" and b.has_input(node, 2) and b.consts.get(node.input[2], np.array(False)).any():
        raise b.reject(node, name, "is in training mode")
    x = b.tensor(node, name)
    _view(b, node, name, b.full(x))


@handles("Transpose")
def _transpose(b, node, name):
    x = b.tensor(node, name)
    full, lead = b.full(x), b.lead[x]
    perm = list(b.attr(node, "perm", list(range(len(full) - 1, -1, -1))))
    if lead and perm[0] != 0:
        raise b.reject(node, name, f"has perm={perm}, which moves the batch axis")
    ir_perm = [p - lead for p in perm[lead:]]
    b.add(node, name, "Transpose", [x], tuple(full[p] for p in perm), {"perm": ir_perm}, lead=lead)


@handles("Gather")
def _gather(b, node, name):
    x = b.tensor(node, name)
    shape = b.shape(x)
    axis = b.axis(node, name, b.attr(node, "axis", 0), x)
    indices = b.const(node, name, 1, "indices").astype(np.int64)
    if indices.ndim > 1:
        raise b.reject(node, name, f"has rank-{indices.ndim} indices; scalar or 1-D indices are supported")
    indices = np.where(indices < 0, indices + shape[axis], indices)
    if indices.size and (indices.min() < 0 or indices.max() >= shape[axis]):
        raise b.reject(node, name, f"has indices outside [0, {shape[axis]})")
    out_shape = shape[:axis] + indices.shape + shape[axis + 1:]
    if not out_shape:
        raise b.reject(node, name, "picks a single value; tensors of rank 1 or more are supported")
    full, lead = (1,) * b.lead[x] + out_shape, b.lead[x]
    if indices.ndim == 0:
        b.add(node, name, "Gather", [x], full, {"axis": axis, "index": int(indices)}, lead=lead)
    else:
        b.add(node, name, "Gather", [x], full, {"axis": axis}, {"indices": indices.astype(np.int32)}, lead=lead)


@handles("Pad")
def _pad(b, node, name):
    x = b.tensor(node, name)
    full, lead = b.full(x), b.lead[x]
    rank = len(full)
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
    if lead and per_axis.get(0, (0, 0)) != (0, 0):
        raise b.reject(node, name, "pads the batch axis")
    all_pads = [per_axis.get(a, (0, 0)) for a in range(rank)]
    out = tuple(d + lo + hi for d, (lo, hi) in zip(full, all_pads))
    b.add(node, name, "Pad", [x], out, {"pads": all_pads[lead:], "value": value}, lead=lead)


def _activation(kind: str, params=()):
    def handler(b, node, name):
        x = b.tensor(node, name)
        act = Activation(kind, tuple(params(b, node, name)) if callable(params) else params)
        b.add(node, name, "Activation", [x], b.full(x), {"act": act}, lead=b.lead[x])
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
    "HardSigmoid": _activation("hard_sigmoid", lambda b, node, name: (float(b.attr(node, "alpha", 0.2)),
                                                                     float(b.attr(node, "beta", 0.5)))),
    "HardSwish": _activation("hard_swish", (1.0 / 6.0, 0.5)),
    "Exp": _activation("exponential"),
    "Log": _activation("log"),
    "Sqrt": _activation("sqrt"),
    "Neg": _activation("neg"),
    "Abs": _activation("abs"),
    "Reciprocal": _activation("reciprocal"),
})

GELU = {"none": "gelu", "tanh": "gelu_tanh"}  # Gelu's ``approximate`` (opset 20) -> activation kind


@handles("Gelu")
def _gelu(b, node, name):
    approximate = b.attr(node, "approximate", "none")
    if approximate not in GELU:
        raise b.reject(node, name, f"has approximate='{approximate}'; 'none' and 'tanh' are supported")
    _activation(GELU[approximate])(b, node, name)


@handles("PRelu")
def _prelu(b, node, name):
    """x < 0 ? slope * x : x, the constant slope broadcast to x (ONNX's unidirectional broadcasting)."""
    x = b.tensor(node, name)
    slope = np.asarray(b.const(node, name, 1, "slope"), dtype=np.float32)
    full, lead = b.full(x), b.lead[x]
    try:
        if np.broadcast_shapes(slope.shape, full) != full:
            raise ValueError
    except ValueError:
        raise b.reject(node, name, f"has a slope of shape {list(slope.shape)} for an input of {list(full)}") from None
    b.add(node, name, "PRelu", [x], full, {}, {"slope": _const_operand(slope, len(full) - lead)}, lead=lead)


def _clip_bounds(b, node, name) -> tuple[float, float]:
    if b.opset < 11:
        return float(b.attr(node, "min", -np.inf)), float(b.attr(node, "max", np.inf))
    low = _one_value(b, node, name, 1, "min") if b.has_input(node, 1) else -np.inf
    high = _one_value(b, node, name, 2, "max") if b.has_input(node, 2) else np.inf
    return low, high


def _one_value(b, node, name, k: int, what: str) -> float:
    """A bound given as a scalar (the ONNX spec) or, as ONNX Runtime also accepts, a one-element tensor."""
    value = np.asarray(b.const(node, name, k, what))
    if value.size != 1:
        raise b.reject(node, name, f"has a {what} of shape {list(value.shape)}; a scalar is expected")
    return float(value.reshape(()))


@handles("Softmax", "LogSoftmax")
def _softmax(b, node, name):
    """Over one axis (opset 13 on), or over all axes from ``axis`` on (before: the input coerced to 2-D)."""
    x = b.tensor(node, name)
    full = b.full(x)
    rank = len(full)
    axis = b.attr(node, "axis", 1 if b.opset < 13 else -1)
    if not -rank <= axis < rank:
        raise b.reject(node, name, f"has axis={axis} for a rank-{rank} input")
    axis %= rank
    if b.lead[x] and axis == 0:
        raise b.reject(node, name, "normalises over the batch axis")
    if b.opset >= 13:
        inner, stride = full[axis], int(np.prod(full[axis + 1:], dtype=np.int64))
    else:
        inner, stride = int(np.prod(full[axis:], dtype=np.int64)), 1
    attrs = {"inner": inner, "stride": stride, "log": node.op_type == "LogSoftmax"}
    b.add(node, name, "Softmax", [x], full, attrs, lead=b.lead[x])


def _axes(b: _Builder, node, name: str, k: int, attr_until: int) -> list[int] | None:
    """The ``axes`` of a node: an attribute before opset ``attr_until``, else the optional input ``k``."""
    if b.opset < attr_until:
        axes = b.attr(node, "axes")
    else:
        axes = [int(a) for a in b.const(node, name, k, "axes").reshape(-1)] if b.has_input(node, k) else None
    return None if axes is None else [int(a) for a in axes]


REDUCE_OPS = {"ReduceSum": ("sum", 13), "ReduceMean": ("mean", 18), "ReduceMax": ("max", 18),
              "ReduceMin": ("min", 18), "ReduceProd": ("prod", 18), "ReduceL1": ("l1", 18), "ReduceL2": ("l2", 18),
              "ReduceSumSquare": ("sumsquare", 18), "ReduceLogSum": ("logsum", 18),
              "ReduceLogSumExp": ("logsumexp", 18)}


@handles(*REDUCE_OPS)
def _reduce(b, node, name):
    """A reduction over some axes; over the batch axis (size 1) it reduces a single value."""
    x = b.tensor(node, name)
    kind, attr_until = REDUCE_OPS[node.op_type]
    full, lead = b.full(x), b.lead[x]
    rank = len(full)
    axes = _axes(b, node, name, 1, attr_until)
    if not axes:
        if b.attr(node, "noop_with_empty_axes", 0):
            return _view(b, node, name, full)  # the spec: the output is the input
        axes = list(range(rank))
    if any(not -rank <= a < rank for a in axes):
        raise b.reject(node, name, f"has axes {axes} for a rank-{rank} input")
    axes = sorted({a % rank for a in axes})
    keep = b.attr(node, "keepdims", 1)
    out = tuple(1 if k in axes else d for k, d in enumerate(full)) if keep else \
        tuple(d for k, d in enumerate(full) if k not in axes)
    if not out:
        raise b.reject(node, name, "reduces to a scalar (keepdims=0 over every axis); tensors of rank 1 or more "
                                   "are supported")
    ir_axes = tuple(a - lead for a in axes if a >= lead)
    # keepdims keeps the rank, so the output keeps the input's batch axis rule; else any IR shape will do
    b.add(node, name, "Reduce", [x], out, {"kind": kind, "axes": ir_axes}, lead=lead if keep else None)


@handles("Slice")
def _slice(b, node, name):
    x = b.tensor(node, name)
    full, lead = b.full(x), b.lead[x]
    rank = len(full)
    if b.opset < 10:
        starts, ends = b.attr(node, "starts"), b.attr(node, "ends")
        axes, steps = b.attr(node, "axes", list(range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = (list(b.const(node, name, k, what).reshape(-1)) for k, what in ((1, "starts"), (2, "ends")))
        axes = list(b.const(node, name, 3, "axes").reshape(-1)) if b.has_input(node, 3) else list(range(len(starts)))
        steps = list(b.const(node, name, 4, "steps").reshape(-1)) if b.has_input(node, 4) else [1] * len(starts)
    begin, step, out = [0] * rank, [1] * rank, list(full)
    for start, end, axis, stride in zip(starts, ends, axes, steps):
        axis = int(axis) % rank
        if int(stride) == 0:
            raise b.reject(node, name, "has a step of 0")
        first, stop, stride = slice(int(start), int(end), int(stride)).indices(full[axis])
        begin[axis], step[axis], out[axis] = first, stride, len(range(first, stop, stride))
    if lead and (out[0], begin[0]) != (1, 0):
        raise b.reject(node, name, "slices the batch axis")
    b.add(node, name, "Slice", [x], out, {"starts": tuple(begin[lead:]), "steps": tuple(step[lead:])}, lead=lead)


@handles("Split")
def _split(b, node, name):
    """One Slice node per output along ``axis``."""
    x = b.tensor(node, name)
    full, lead = b.full(x), b.lead[x]
    axis = b.axis(node, name, b.attr(node, "axis", 0), x)
    size, count = b.shape(x)[axis], len(node.output)
    if b.opset < 13:
        sizes = b.attr(node, "split")
    else:
        sizes = [int(v) for v in b.const(node, name, 1, "split")] if b.has_input(node, 1) else None
    if sizes is None:
        count = int(b.attr(node, "num_outputs", count))
        part = -(-size // count)
        sizes = [min(part, size - k * part) for k in range(count)]
    if sum(sizes) != size or len(sizes) != len(node.output) or min(sizes) < 0:
        raise b.reject(node, name, f"splits an axis of {size} into {list(sizes)}")
    offset = 0
    for k, (output, length) in enumerate(zip(node.output, sizes)):
        starts = [0] * len(b.shape(x))
        starts[axis] = offset
        out = list(full)
        out[axis + lead] = length
        offset += length
        if output and (length or b.uses.get(output, 0)):  # an empty part nothing reads is left out
            b.add(node, f"{name}:{k}", "Slice", [x], out, {"starts": tuple(starts), "steps": (1,) * len(starts)},
                  lead=lead, output=output)


@handles("Resize", "Upsample")
def _resize(b, node, name):
    """Every mode as tables of K taps per output index per axis (``ir.resize_taps``): nearest, linear, cubic,
    antialias, every coordinate transformation, ``tf_crop_and_resize``'s region and extrapolation value."""
    x = b.tensor(node, name)
    full, lead = b.full(x), b.lead[x]
    rank = len(full)
    mode = b.attr(node, "mode", "nearest")
    mode = "linear" if mode == "bilinear" else mode
    if mode not in RESIZE_MODES:
        raise b.reject(node, name, f"has mode={mode!r}; {', '.join(repr(m) for m in RESIZE_MODES)} are supported")
    old = node.op_type == "Upsample" or b.opset < 11
    coordinate = "asymmetric" if old else b.attr(node, "coordinate_transformation_mode", "half_pixel")
    nearest = "floor" if old else b.attr(node, "nearest_mode", "round_prefer_floor")
    if coordinate not in RESIZE_COORDINATES:
        raise b.reject(node, name, f"has coordinate_transformation_mode={coordinate!r}")
    if nearest not in NEAREST_MODES:
        raise b.reject(node, name, f"has nearest_mode={nearest!r}")
    antialias = bool(b.attr(node, "antialias", 0))
    if antialias and mode == "nearest":
        raise b.reject(node, name, "has antialias=1 with mode='nearest', which the spec does not define")
    policy = b.attr(node, "keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise b.reject(node, name, f"has keep_aspect_ratio_policy={policy!r}")
    axes = [int(a) % rank for a in b.attr(node, "axes", range(rank))]
    roi = [(0.0, 1.0)] * rank
    if node.op_type == "Upsample" and b.opset < 9:
        scales, sizes = list(b.attr(node, "scales")), None
    else:
        k = 1 if old else 2
        scales = b.const(node, name, k, "scales") if b.has_input(node, k) else None
        scales = [float(v) for v in scales.reshape(-1)] if scales is not None and scales.size else None
        sizes = [int(v) for v in b.const(node, name, 3, "sizes")] if not old and b.has_input(node, 3) else None
        if coordinate == "tf_crop_and_resize":
            region = b.const(node, name, 1, "roi").reshape(-1) if b.has_input(node, 1) else np.zeros(0)
            if region.size != 2 * len(axes):
                raise b.reject(node, name, f"has a roi of {region.size} values for {len(axes)} axes")
            for k, axis in enumerate(axes):
                roi[axis] = (float(region[k]), float(region[len(axes) + k]))
    per_axis_scale, out = [1.0] * rank, list(full)
    common = None  # keep_aspect_ratio_policy: one scale for every resized axis, from the sizes
    if sizes is not None and policy != "stretch":
        pick = min if policy == "not_larger" else max
        common = pick(size / full[axis] for size, axis in zip(sizes, axes))
        sizes = [int(common * full[axis] + 0.5) for axis in axes]  # the spec's round half up
    for k, axis in enumerate(axes):
        if sizes is not None:
            out[axis] = sizes[k]
            per_axis_scale[axis] = sizes[k] / full[axis] if common is None else common
        elif scales is not None:
            per_axis_scale[axis] = scales[k]
            out[axis] = int(math.floor(full[axis] * scales[k]))
        else:
            raise b.reject(node, name, "has neither scales nor sizes")
    taps = []
    for axis in range(rank):
        tap = resize_taps(full[axis], out[axis], mode, coordinate, nearest, per_axis_scale[axis],
                          cubic_a=float(b.attr(node, "cubic_coeff_a", -0.75)),
                          exclude_outside=bool(b.attr(node, "exclude_outside", 0)), antialias=antialias,
                          roi=roi[axis])
        if tap is not None and axis < lead:
            raise b.reject(node, name, "resizes the batch axis")
        taps.append(tap)
    attrs, params = resize_params(taps[lead:], float(b.attr(node, "extrapolation_value", 0.0)))
    b.add(node, name, "Resize", [x], out, attrs, params, lead=lead)


@handles("LRN")
def _lrn(b, node, name):
    x = b.tensor(node, name)
    axis = b.axis(node, name, 1, x)
    attrs = {"size": int(b.attr(node, "size")), "alpha": float(b.attr(node, "alpha", 1e-4)),
             "beta": float(b.attr(node, "beta", 0.75)), "bias": float(b.attr(node, "bias", 1.0)), "axis": axis}
    b.add(node, name, "LRN", [x], b.full(x), attrs, lead=b.lead[x])


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
        full = np.array(b.full(node.input[0]), dtype=np.int64)
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


def _input_shape(source: str, value_info) -> tuple[tuple[int, ...], bool]:
    """The input's ONNX shape (batch axis as 1) and whether it has a batch axis (``batch_axis``)."""
    where = f"{source}: input '{value_info.name}'"
    dims = declared(value_info)
    if not dims:
        raise UnsupportedModel(f"{where} has no declared shape" if dims is None else f"{where} is a scalar")
    text = shape_text(dims)
    lead = batch_axis(dims)
    for k, dim in enumerate(dims[lead:], start=lead):
        if not isinstance(dim, int):
            raise UnsupportedModel(f"{where}: dimension {k} is symbolic ('{dim}') (declared shape {text}); "
                                   "only a batch axis (the first) may be")
        if dim == 0:
            raise UnsupportedModel(f"{where}: dimension {k} is 0 (declared shape {text})")
    shape = tuple(dims[lead:])
    if not 1 <= len(shape) <= MAX_RANK:
        raise UnsupportedModel(f"{where} has declared shape {text}: {'with' if lead else 'without'} a batch axis "
                               f"(docs/zoo.md), its rank is {len(shape)}; ranks 1 to {MAX_RANK} are supported")
    return (1,) * lead + shape, lead


# The quantized ONNX types, by the IR's names of them (``ir.QUANTIZED_TYPES``: numpy's and ml_dtypes' names).
_P = onnx.TensorProto
QUANTIZED_ONNX_TYPES = {code: str(helper.tensor_dtype_to_np_dtype(code)) for code in (
    _P.INT8, _P.UINT8, _P.INT16, _P.UINT16, _P.INT4, _P.UINT4, _P.INT2, _P.UINT2, _P.FLOAT8E4M3FN, _P.FLOAT8E4M3FNUZ,
    _P.FLOAT8E5M2, _P.FLOAT8E5M2FNUZ, _P.FLOAT4E2M1)}
# The graph input and output types the ABI's float32 vectors carry: a quantized or float16 tensor as its values, every
# one of them a float32 (docs/quantized.md, "Integer graph inputs and outputs").
ABI_TYPES = {_P.FLOAT: "float32", _P.FLOAT16: "float16", **QUANTIZED_ONNX_TYPES}
ABI_SUFFIX = ":abi"  # the float32 tensor of the ABI beside a quantized graph input or output


def _abi_type(source: str, value_info, single: bool) -> str:
    """The element type of a graph input (``ABI_TYPES``); a quantized one only when ``single`` (the model's one
    input: a packed vector is float32)."""
    elem_type = value_info.type.tensor_type.elem_type
    dtype = ABI_TYPES.get(elem_type)
    if dtype is None or dtype != "float32" and not single:
        kinds = "float32 or quantized (int8 ... float4e2m1)" if single else \
            "float32 (quantized ones in a model of one input and one output)"
        raise UnsupportedModel(f"{source}: input '{value_info.name}' is {onnx.TensorProto.DataType.Name(elem_type)}"
                               f"; {kinds} graph inputs are supported")
    return dtype


def _integer_input(b: _Builder, name: str, dtype: str) -> str:
    """A quantized graph input ``name`` (already added as a tensor): the ABI's float32 vector carries its values, read
    by a Quantize of scale 1 and zero point 0 (saturate(round half to even(x)): the exact integer of an integer value;
    a float8/float4 type: the float rounded to it, saturating as ONNX's Cast; docs/quantized.md, "Integer graph inputs
    and outputs"). Returns the ABI tensor."""
    abi = b.new(f"{name}{ABI_SUFFIX}", b.full(name), b.lead[name])
    tensor = b.graph.tensors[name]
    tensor.dtype, tensor.scale, tensor.zero_point = dtype, 1.0, 0
    b.graph.add_node(Node(name=f"read:{name}", kind="Input", op="Quantize", inputs=[abi], output=name))
    return abi


def _integer_output(b: _Builder, name: str) -> str:
    """A quantized graph output ``name``: written to the ABI's float32 vector as its values (exact) by a
    Dequantize of scale 1 and zero point 0 (exact). Returns the ABI tensor."""
    abi = b.new(f"{name}{ABI_SUFFIX}", b.full(name), b.lead[name])
    b.graph.add_node(Node(name=f"write:{name}", kind="Output", op="Dequantize", inputs=[name], output=abi,
                          attrs={"scale": 1.0, "zero_point": 0}))
    return abi


def _reason(error: Exception) -> str:
    """An ONNX loader or checker message on one line, its ``==> Context:`` part in parentheses."""
    main, _, context = str(error).partition("==> Context:")
    reason = " ".join(main.split()) or type(error).__name__
    return f"{reason} ({' '.join(context.split())})" if context.strip() else reason


def load(path: Path) -> Graph:
    source = Path(path).name
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(str(path))
    except Exception as exc:  # noqa: BLE001 - any loader failure is a user-facing error
        raise UnsupportedModel(f"{source}: not a valid ONNX model: {_reason(exc)}") from None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    g = model.graph
    consts = {init.name: numpy_helper.to_array(init) for init in g.initializer}
    inputs = [vi for vi in g.input if vi.name not in consts]
    if not inputs or not g.output:
        raise UnsupportedModel(f"{source}: the graph has {len(inputs)} inputs and {len(g.output)} outputs; "
                               "at least one of each is needed")
    b = _Builder(source, opset, consts, model)
    for node in g.node:
        for name in node.input:
            b.uses[name] = b.uses.get(name, 0) + 1
    for out in g.output:
        b.uses[out.name] = b.uses.get(out.name, 0) + 1
        out_dims = declared(out)
        b.output_leads[out.name] = batch_axis(out_dims) if out_dims else None
    graph = b.graph
    packed = len(inputs) > 1 or len(g.output) > 1
    if packed:
        _unpack_inputs(b, inputs)
    else:
        graph.input = graph.input_name = inputs[0].name
        b.new(inputs[0].name, *_input_shape(source, inputs[0]))
        dtype = _abi_type(source, inputs[0], single=True)
        if dtype != "float32":
            graph.input = _integer_input(b, inputs[0].name, dtype)
    nodes = list(g.node)  # one Python object per node for the whole loop: ``instead`` is keyed by id()
    outputs = [out.name for out in g.output]
    instead = {}
    for rewrite, _ in EXTENSIONS:
        instead.update(rewrite(b, nodes, set(outputs)))
    names: set[str] = set()
    for k, node in enumerate(nodes):
        name = node.name or f"{node.op_type}_{k}"
        while name in names:
            name += "_"
        names.add(name)
        if node.domain not in ("", "ai.onnx") and (node.domain, node.op_type) not in OTHER_DOMAINS:
            raise b.reject(node, name, f"is from domain '{node.domain}', which is not supported")
        if id(node) in instead:
            if instead[id(node)] is not None:
                instead[id(node)](b, name)
            continue
        if _fold(b, node):
            continue
        handler = HANDLERS.get(node.op_type)
        if handler is None:
            raise b.reject(node, name)
        handler(b, node, name)
    for out in g.output:
        if out.name not in graph.tensors:
            raise UnsupportedModel(f"{source}: the output '{out.name}' is a constant, not computed from the input")
        if len(graph.tensors[out.name].shape) > MAX_RANK:
            raise UnsupportedModel(f"{source}: the output '{out.name}' has shape {list(b.full(out.name))}; "
                                   f"ranks 1 to {MAX_RANK} (without a batch axis) are supported")
    for out in g.output:
        if graph.tensors[out.name].quantized and packed:
            raise UnsupportedModel(f"{source}: the output '{out.name}' is quantized ({graph.tensors[out.name].dtype});"
                                   " quantized outputs are supported in a model of one input and one output")
    for _, finish in EXTENSIONS:
        finish(b, outputs, instead)
    if packed:
        pack_outputs(graph, [(out.name, out.name) for out in g.output])
    else:
        graph.output = graph.output_name = g.output[0].name
        if graph.tensors[graph.output].quantized:
            graph.output = _integer_output(b, graph.output)
    return graph


def _unpack_inputs(b: _Builder, inputs: list) -> None:
    """The graph inputs (with their batch-axis rule) as Slices of one packed input vector (``ir.unpack_inputs``)."""
    for value in inputs:
        _abi_type(b.graph.source, value, single=False)
        b.new(value.name, *_input_shape(b.graph.source, value))
    unpack_inputs(b.graph, [(value.name, value.name) for value in inputs])
