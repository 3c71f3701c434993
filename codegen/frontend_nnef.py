"""NNEF front end: an NNEF folder (``graph.nnef`` + ``.dat`` tensors) to the IR, channels-first (``CHW``).

The folder is parsed, its variables read and its shapes inferred by Khronos'
own ``nnef`` package (the reference parser of the NNEF 1.0.5 grammar, a
compiled wheel on PyPI); this module only maps each NNEF instruction to an IR
node. NNEF tensors always carry the batch axis first, and it must be 1: the IR
drops it, so ``[1, C, H, W]`` is ``CHW`` and ``[1, F]`` is ``C``. Each layer's
name is its result variable (the paper's instruction), so the manifest, the
NNEF text and the multi-item descriptions name the same layers.

The front end takes NNEF at its word and guesses nothing: an empty
``padding = []`` (NNEF's automatic padding), a ``max_pool`` that pads with
zeros (``border = 'constant'``), a convolution with groups other than 1 or a
border other than zeros are refused with the layer's name, rather than read
under an assumption.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codegen.errors import UnsupportedModel
from codegen.ir import Activation, Graph, Node, default_layout, dense_axes

GRAPH_FILE = "graph.nnef"


class _Builder:
    def __init__(self, source: str, nnef_graph) -> None:
        self.graph = Graph(source=source, fmt="nnef")
        self.nnef = nnef_graph
        self.consts: dict[str, np.ndarray] = {}

    def reject(self, op, why: str = "is not supported") -> UnsupportedModel:
        return UnsupportedModel(f"{self.graph.source}: layer '{_result(op)}' ({op.name}) {why}")

    def full(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self.nnef.tensors[name].shape)

    def tensor(self, op, key: str = "input") -> str:
        name = op.inputs[key]
        if not isinstance(name, str) or name not in self.graph.tensors:
            raise self.reject(op, f"reads {name!r} as '{key}', which is not a tensor computed from the input")
        return name

    def const(self, op, key: str) -> np.ndarray:
        value = op.inputs[key]
        if isinstance(value, str):
            if value not in self.consts:
                raise self.reject(op, f"needs a variable as '{key}', not the computed tensor '{value}'")
            return self.consts[value]
        return np.asarray(value, dtype=np.float32)

    def add(self, op, kind: str, inputs: list[str], attrs=None, params=None, act=None) -> Node:
        output = _result(op)
        full = self.full(output)
        if not full or full[0] != 1:
            raise self.reject(op, f"computes a tensor of shape {list(full)}; NNEF tensors here start with a batch "
                                  "axis of 1")
        shape = full[1:]
        self.graph.add_tensor(output, shape, default_layout(len(shape), channels_last=False))
        return self.graph.add_node(Node(name=output, kind=op.name, op=kind, inputs=list(inputs), output=output,
                                        attrs=attrs or {}, params=params or {}, act=act))


def _result(op) -> str:
    return next(iter(op.outputs.values()))


def _explicit(b: _Builder, op, values, what: str, rank: int, default=1) -> list:
    """An attribute list with one entry per axis; an empty list is NNEF's implicit default."""
    values = list(values)
    if not values:
        if what == "padding":
            raise b.reject(op, "has padding = [] (NNEF's automatic padding); give the padding of each side")
        return [default] * rank
    if len(values) != rank:
        raise b.reject(op, f"has {what} {values} for {rank} axes")
    return values


def _conv(b: _Builder, op) -> None:
    x = b.tensor(op)
    weight = b.const(op, "filter")
    if b.graph.tensors[x].layout != "CHW" or weight.ndim != 4:
        raise b.reject(op, f"convolves {list(b.full(x))} by {list(weight.shape)}; 2-D NCHW is supported")
    if op.attribs["groups"] != 1:
        raise b.reject(op, f"has groups = {op.attribs['groups']}; only 1 is supported")
    if op.attribs["border"] != "constant":
        raise b.reject(op, f"has border = '{op.attribs['border']}'; only 'constant' (zeros) is supported")
    pads = _explicit(b, op, op.attribs["padding"], "padding", 2)
    strides = _explicit(b, op, op.attribs["stride"], "stride", 2)
    dilations = _explicit(b, op, op.attribs["dilation"], "dilation", 2)
    params = {"kernel": weight}
    bias = b.const(op, "bias")
    if bias.size > 1 or float(bias.reshape(-1)[0]) != 0.0:
        params["bias"] = np.broadcast_to(bias.reshape(-1), (weight.shape[0],)).astype(np.float32)
    attrs = {"kernel": tuple(weight.shape[2:]), "strides": tuple(strides), "dilations": tuple(dilations),
             "pads": (pads[0][0], pads[1][0], pads[0][1], pads[1][1]), "kernel_layout": "OIHW"}
    b.add(op, "Conv2D", [x], attrs, params)


def _pool(b: _Builder, op) -> None:
    x = b.tensor(op)
    if b.graph.tensors[x].layout != "CHW":
        raise b.reject(op, f"pools a tensor of shape {list(b.full(x))}; 2-D NCHW is supported")
    size = _explicit(b, op, op.attribs["size"], "size", 4)
    pads = _explicit(b, op, op.attribs["padding"], "padding", 4)
    strides = _explicit(b, op, op.attribs["stride"], "stride", 4)
    dilations = _explicit(b, op, op.attribs["dilation"], "dilation", 4)
    if size[:2] != [1, 1] or strides[:2] != [1, 1] or dilations[:2] != [1, 1] or list(pads[:2]) != [(0, 0), (0, 0)]:
        raise b.reject(op, "pools across the batch or channel axis")
    kind, border = ("max" if op.name == "max_pool" else "avg"), op.attribs["border"]
    padded = any(p != (0, 0) for p in pads[2:])
    if border not in ("ignore", "constant") or (kind == "max" and border == "constant" and padded):
        raise b.reject(op, f"has border = '{border}'; max_pool ignores padding ('ignore'), avg_pool ignores it "
                           "or counts zeros ('constant')")
    attrs = {"kind": kind, "kernel": tuple(size[2:]), "strides": tuple(strides[2:]),
             "dilations": tuple(dilations[2:]), "pads": (pads[2][0], pads[3][0], pads[2][1], pads[3][1]),
             "count_include_pad": kind == "avg" and border == "constant"}
    b.add(op, "Pool2D", [x], attrs)


def _reduce(b: _Builder, op) -> None:
    x = b.tensor(op)
    if b.graph.tensors[x].layout != "CHW" or list(op.attribs["axes"]) != [2, 3]:
        raise b.reject(op, f"reduces axes {list(op.attribs['axes'])}; only [2, 3] of an NCHW tensor is supported")
    b.add(op, "GlobalPool2D", [x], {"kind": "max" if op.name == "max_reduce" else "avg"})


def _linear(b: _Builder, op) -> None:
    x = b.tensor(op)
    weight = b.const(op, "filter")
    if len(b.full(x)) != 2 or weight.ndim != 2 or weight.shape[1] != b.full(x)[1]:
        raise b.reject(op, f"multiplies {list(b.full(x))} by a filter {list(weight.shape)}")
    params = {"kernel": weight}
    bias = b.const(op, "bias")
    if bias.size > 1 or float(bias.reshape(-1)[0]) != 0.0:
        params["bias"] = np.broadcast_to(bias.reshape(-1), (weight.shape[0],)).astype(np.float32)
    b.add(op, "Dense", [x], dense_axes(1, "OI"), params)


def _matmul(b: _Builder, op) -> None:
    x = b.tensor(op, "A")
    matrix = b.const(op, "B")
    if op.attribs["transposeA"] or len(b.full(x)) != 2 or matrix.ndim != 2:
        raise b.reject(op, "is not A [1, K] (not transposed) times a variable matrix B")
    layout = "OI" if op.attribs["transposeB"] else "IO"
    if matrix.shape[1 if layout == "OI" else 0] != b.full(x)[1]:
        raise b.reject(op, f"multiplies {list(b.full(x))} by {list(matrix.shape)}")
    b.add(op, "Dense", [x], dense_axes(1, layout), {"kernel": matrix})


def _binary(b: _Builder, op) -> None:
    operator = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op.name]
    rank = len(b.full(_result(op))) - 1
    operands, params, tensors = [], {}, []
    for k, key in enumerate(("x", "y")):
        value = op.inputs[key]
        if isinstance(value, str) and value in b.graph.tensors:
            operands.append({"tensor": value})
            tensors.append(value)
            continue
        data = b.const(op, key)
        data = data.reshape(data.shape[1:]) if data.ndim > rank else data  # the batch axis (1)
        name = f"operand{k}"
        operands.append({"param": name, "shape": data.shape})
        params[name] = data.astype(np.float32)
    if not tensors:
        raise b.reject(op, "has no tensor operand")
    b.add(op, "Elementwise", tensors, {"operator": operator, "operands": operands}, params)


def _activation(kind: str, keys: tuple[str, ...] = ()):
    def handler(b: _Builder, op) -> None:
        x = b.tensor(op, "x")
        b.add(op, "Activation", [x], {"act": Activation(kind, tuple(float(op.attribs[k]) for k in keys))})
    return handler


def _clamp(b: _Builder, op) -> None:
    x = b.tensor(op, "x")
    low, high = (b.const(op, key) for key in ("a", "b"))
    if low.size != 1 or high.size != 1:
        raise b.reject(op, "clamps with tensors; scalar bounds are supported")
    b.add(op, "Activation", [x], {"act": Activation("clip", (float(low.reshape(-1)[0]), float(high.reshape(-1)[0])))})


def _softmax(b: _Builder, op) -> None:
    x = b.tensor(op, "x")
    full = b.full(x)
    axes = sorted(a % len(full) for a in op.attribs["axes"])
    if not axes or 0 in axes or axes != list(range(axes[0], len(full))):
        raise b.reject(op, f"normalises over axes {list(op.attribs['axes'])}; the trailing axes (not the batch "
                           "axis) are supported")
    b.add(op, "Softmax", [x], {"inner": int(np.prod(full[axes[0]:], dtype=np.int64))})


def _view(b: _Builder, op) -> None:
    x = b.tensor(op, "x" if op.name == "copy" else "input")
    b.add(op, "View", [x])


def _transpose(b: _Builder, op) -> None:
    x = b.tensor(op)
    axes = list(op.attribs["axes"]) + list(range(len(op.attribs["axes"]), len(b.full(x))))
    if axes[0] != 0:
        raise b.reject(op, f"has axes = {list(op.attribs['axes'])}, which moves the batch axis")
    b.add(op, "Transpose", [x], {"perm": [a - 1 for a in axes[1:]]})


def _pad(b: _Builder, op) -> None:
    x = b.tensor(op)
    pads = _explicit(b, op, op.attribs["padding"], "padding", len(b.full(x)))
    if op.attribs["border"] != "constant" or tuple(pads[0]) != (0, 0):
        raise b.reject(op, f"has border = '{op.attribs['border']}' or pads the batch axis; constant padding of "
                           "the other axes is supported")
    b.add(op, "Pad", [x], {"pads": [tuple(p) for p in pads[1:]], "value": float(op.attribs["value"])})


def _concat(b: _Builder, op) -> None:
    values = op.inputs["values"]
    inputs = [value if value in b.graph.tensors else None for value in values]
    if None in inputs or op.attribs["axis"] == 0:
        raise b.reject(op, "joins variables or joins along the batch axis")
    b.add(op, "Concat", inputs, {"axis": op.attribs["axis"] - 1})


def _batch_norm(b: _Builder, op) -> None:
    x = b.tensor(op)
    mean, variance, offset, scale = (b.const(op, key).astype(np.float64).reshape(-1)
                                     for key in ("mean", "variance", "offset", "scale"))
    factor = scale / np.sqrt(variance + float(op.attribs["epsilon"]))
    b.add(op, "BatchNorm", [x], {}, {"scale": factor, "shift": offset - mean * factor})


HANDLERS = {
    "conv": _conv, "max_pool": _pool, "avg_pool": _pool, "mean_reduce": _reduce, "max_reduce": _reduce,
    "linear": _linear, "matmul": _matmul, "add": _binary, "sub": _binary, "mul": _binary, "div": _binary,
    "relu": _activation("relu"), "tanh": _activation("tanh"), "sigmoid": _activation("sigmoid"),
    "softplus": _activation("softplus"), "elu": _activation("elu", ("alpha",)),
    "leaky_relu": _activation("leaky_relu", ("alpha",)), "clamp": _clamp, "softmax": _softmax,
    "reshape": _view, "squeeze": _view, "unsqueeze": _view, "copy": _view, "transpose": _transpose, "pad": _pad,
    "concat": _concat, "batch_normalization": _batch_norm,
}


def folder_of(path: Path) -> Path:
    """The NNEF folder named by ``path``: the folder itself or its ``graph.nnef``."""
    path = Path(path)
    return path.parent if path.is_file() and path.name == GRAPH_FILE else path


def load(path: Path) -> Graph:
    import nnef

    folder = folder_of(path)
    source = folder.name
    if not (folder / GRAPH_FILE).is_file():
        raise UnsupportedModel(f"{source}: not an NNEF folder (no {GRAPH_FILE})")
    try:
        nnef_graph = nnef.load_graph(str(folder))
        nnef.infer_shapes(nnef_graph)
    except (nnef.Error, OSError, ValueError) as error:
        raise UnsupportedModel(f"{source}: invalid NNEF: {' '.join(str(error).split())}") from None
    if len(nnef_graph.inputs) != 1 or len(nnef_graph.outputs) != 1:
        raise UnsupportedModel(f"{source}: the graph has {len(nnef_graph.inputs)} inputs and "
                               f"{len(nnef_graph.outputs)} outputs; exactly one of each is supported")
    b = _Builder(source, nnef_graph)
    for op in nnef_graph.operations:
        if op.name == "external":
            shape = b.full(_result(op))
            if len(shape) < 2 or shape[0] != 1 or len(shape) > 4:
                raise b.reject(op, f"has shape {list(shape)}; [1, F], [1, H, W] or [1, C, H, W] is supported")
            b.graph.input = b.graph.input_name = _result(op)
            b.graph.add_tensor(_result(op), shape[1:], default_layout(len(shape) - 1, channels_last=False))
        elif op.name == "variable":
            b.consts[_result(op)] = np.asarray(nnef_graph.tensors[_result(op)].data, dtype=np.float32)
        elif op.name == "constant":
            value = np.asarray(op.attribs["value"], dtype=np.float32)
            b.consts[_result(op)] = np.broadcast_to(value, tuple(op.attribs["shape"])).copy()
        elif op.name in HANDLERS:
            HANDLERS[op.name](b, op)
        else:
            raise b.reject(op)
    output = nnef_graph.outputs[0]
    if output not in b.graph.tensors or b.graph.producer(output) is None:
        raise UnsupportedModel(f"{source}: the output '{output}' is not computed from the input")
    if len(b.graph.tensors[output].shape) > 3:
        raise UnsupportedModel(f"{source}: the output '{output}' has shape {list(b.full(output))}; ranks 2 to 4 "
                               "(with the batch axis) are supported")
    b.graph.output = b.graph.output_name = output
    return b.graph
