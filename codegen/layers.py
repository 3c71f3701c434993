"""One emitter per IR op, registered in ``EMITTERS`` (ACETONE's LayerFactory idea).

An emitter writes the inlined V2 code of one layer: counted ``for`` loops with
literal bounds, array accesses at constant strides, padding handled by ``if``
guards inside the loops. Options of a layer (padding, layout, kernel layout,
count_include_pad...) are data read from the node, not separate emitters.

Index expressions are built from each tensor's own strides, so one emitter
serves channels-last (Keras) and channels-first (ONNX) tensors alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from codegen.activations import expression
from codegen.cwriter import CWriter, c_float
from codegen.ir import CONTRACTED, Graph, Node, Tensor, row_major_strides
from codegen.memory import Buffer

EMITTERS: dict[str, Callable[["Context", Node], None]] = {}


def emitter(op: str):
    def register(function):
        EMITTERS[op] = function
        return function
    return register


@dataclass
class Context:
    """What an emitter may use: the writer, tensors, their storage and parameter symbols."""

    w: CWriter
    graph: Graph
    buffers: dict[str, Buffer]
    param_symbols: dict[tuple[int, str], str]  # (id(node), param key) -> C symbol

    def tensor(self, name: str) -> Tensor:
        return self.graph.tensors[name]

    def at(self, tensor: str, index: str) -> str:
        return self.buffers[tensor].at(index)

    def param(self, node: Node, key: str) -> str:
        return self.param_symbols[(id(node), key)]

    def store(self, node: Node, target: str, value: str) -> None:
        """``target = act(value);`` with the node's fused elementwise activation, if any."""
        act = node.act
        if act is None or act.kind in ("linear", "softmax"):
            self.w.line(f"{target} = {value};")
            return
        if not value.isidentifier():
            self.w.line(f"const float v = {value};")
            value = "v"
        self.w.line(f"{target} = {expression(act.kind, act.params, value)};")


def index(strides: tuple[int, ...], exprs: list[str]) -> str:
    """The flat index ``sum(expr * stride)``; a zero stride drops its term."""
    terms = []
    for expr, stride in zip(exprs, strides):
        if stride == 0 or expr == "0":
            continue
        expr = expr if expr.isidentifier() or expr.isdigit() else f"({expr})"
        terms.append(expr if stride == 1 else f"{expr} * {stride}")
    return " + ".join(terms) or "0"


def axis_vars(tensor: Tensor, prefix: str) -> list[str]:
    if tensor.layout is not None:
        return [prefix + letter.lower() for letter in tensor.layout]
    return [f"{prefix}{k}" for k in range(len(tensor.shape))]


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides that read a row-major array of ``shape`` broadcast (numpy rules) to ``out_shape``."""
    shape = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
    own = row_major_strides(shape)
    return tuple(0 if dim == 1 and out > 1 else stride for dim, out, stride in zip(shape, out_shape, own))


def softmax_in_place(ctx: Context, tensor: Tensor, buffer: Buffer, inner: int, source: Buffer | None = None) -> None:
    """Numerically stable softmax over consecutive blocks of ``inner`` values."""
    w, source = ctx.w, source or buffer
    outer = tensor.size // inner

    def body(base: str) -> None:
        at_in = lambda i: source.at(f"{base}{i}")  # noqa: E731
        at_out = lambda i: buffer.at(f"{base}{i}")  # noqa: E731
        w.line("float m = -INFINITY;")
        w.line("float s = 0.0f;")
        with w.loop("k", inner):
            w.line(f"m = {at_in('k')} > m ? {at_in('k')} : m;")
        with w.loop("k", inner):
            w.line(f"const float e = expf({at_in('k')} - m);")
            w.line(f"{at_out('k')} = e;")
            w.line("s += e;")
        with w.loop("k", inner):
            w.line(f"{at_out('k')} = {at_out('k')} / s;")

    if outer == 1:
        with w.block(""):
            body("")
    else:
        with w.loop("r", outer):
            body(f"r * {inner} + ")


# --------------------------------------------------------------------- dense

@emitter("Dense")
def emit_dense(ctx: Context, node: Node) -> None:
    """Definition 11 as a matrix product: O = alpha * sum_k X W + beta * B, indexed by ``x_axes``/``w_axes``.

    The index maps (``ir.dense_axes``) say which output axis each input and
    weight axis runs along, so X @ W, W @ X and transposed Gemm operands are
    one loop nest; the bias is broadcast to the output (numpy rules).
    """
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    kernel = node.params["kernel"]
    x_axes, w_axes = node.attrs["x_axes"], node.attrs["w_axes"]
    variables = [f"r{k}" for k in range(len(y.shape) - 1)] + ["o"]

    def subscripts(axes) -> list[str]:
        return ["i" if axis == CONTRACTED else "0" if axis is None else variables[axis] for axis in axes]

    k_in = kernel.shape[w_axes.index(CONTRACTED)]
    x_index = index(x.strides, subscripts(x_axes))
    w_index = index(row_major_strides(kernel.shape), subscripts(w_axes))
    weight = ctx.param(node, "kernel")
    alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
    w = ctx.w
    with w.nest(zip(variables, y.shape)):
        w.line("float acc = 0.0f;")
        with w.loop("i", k_in):
            w.line(f"acc += {ctx.at(x.name, x_index)} * {weight}[{w_index}];")
        value = "acc" if alpha == 1.0 else f"{c_float(alpha)} * acc"
        if "bias" in node.params:
            strides = broadcast_strides(node.params["bias"].shape, y.shape)
            bias = f"{ctx.param(node, 'bias')}[{index(strides, variables)}]"
            value = f"{value} + {bias if beta == 1.0 else f'{c_float(beta)} * {bias}'}"
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), value)


# ------------------------------------------------- convolution and pooling

OUT_VARS = {"H": "oh", "W": "ow", "C": "oc"}


def _reach(node: Node, x: Tensor, y: Tensor) -> dict[str, tuple[bool, bool]]:
    """Per spatial axis: can a window reach before the start / past the end of the input?"""
    a = node.attrs
    pads = {"H": (a["pads"][0], a["pads"][2]), "W": (a["pads"][1], a["pads"][3])}
    reach = {}
    for k, letter in enumerate("HW"):
        kernel, stride, dilation = a["kernel"][k], a["strides"][k], a["dilations"][k]
        begin = pads[letter][0]
        highest = (y.dim(letter) - 1) * stride + (kernel - 1) * dilation - begin
        reach[letter] = (begin > 0, highest >= x.dim(letter))
    return reach


def _spatial_window(ctx: Context, node: Node, x: Tensor, y: Tensor, order: str, coords: dict[str, str],
                    body: Callable[[dict[str, str]], None]) -> None:
    """Loops over the window of output position (oh, ow), nested in ``order`` (letters of H, W, I).

    ``body`` receives the input coordinates by axis letter; cells outside the
    input are skipped by ``if`` guards (zero padding for a convolution, ignored
    cells for pooling, as in Definition 6 and the NNEF ``border = 'ignore'``).
    """
    a, w = node.attrs, ctx.w
    reach = _reach(node, x, y)
    spatial = {"H": ("kh", "ih", "oh", 0, a["pads"][0]), "W": ("kw", "iw", "ow", 1, a["pads"][1])}
    coords = dict(coords)

    def nest(level: int) -> None:
        if level == len(order):
            body(coords)
            return
        letter = order[level]
        if letter == "I":
            with w.loop("ic", x.dim("C")):
                coords["C"] = "ic"
                nest(level + 1)
            return
        k_var, in_var, out_var, k, pad = spatial[letter]
        stride, dilation = a["strides"][k], a["dilations"][k]
        with w.loop(k_var, a["kernel"][k]):
            term = out_var if stride == 1 else f"{out_var} * {stride}"
            term += f" + {k_var}" if dilation == 1 else f" + {k_var} * {dilation}"
            if pad:
                term += f" - {pad}"
            w.line(f"const int {in_var} = {term};")
            coords[letter] = in_var
            low, high = reach[letter]
            guards = ([f"{in_var} >= 0"] if low else []) + ([f"{in_var} < {x.dim(letter)}"] if high else [])
            if guards:
                with w.block(f"if ({' && '.join(guards)})"):
                    nest(level + 1)
            else:
                nest(level + 1)

    nest(0)


@emitter("Conv2D")
def emit_conv(ctx: Context, node: Node) -> None:
    """Definition 14: activation(bias + convolution(padding(I))), padding as guards."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    layout = node.attrs["kernel_layout"]  # "HWIO" (Keras) or "OIHW" (ONNX)
    dims = {"H": node.attrs["kernel"][0], "W": node.attrs["kernel"][1], "I": x.dim("C"), "O": y.dim("C")}
    k_strides = row_major_strides(tuple(dims[letter] for letter in layout))
    k_vars = [{"H": "kh", "W": "kw", "I": "ic", "O": "oc"}[letter] for letter in layout]
    kernel, w = ctx.param(node, "kernel"), ctx.w

    def body(coords: dict[str, str]) -> None:
        x_index = index(x.strides, [coords[letter] for letter in x.layout])
        w.line(f"acc += {ctx.at(x.name, x_index)} * {kernel}[{index(k_strides, k_vars)}];")

    with w.nest([(OUT_VARS[letter], dim) for letter, dim in zip(y.layout, y.shape)]):
        w.line("float acc = 0.0f;")
        _spatial_window(ctx, node, x, y, layout.replace("O", ""), {}, body)
        value = f"acc + {ctx.param(node, 'bias')}[oc]" if "bias" in node.params else "acc"
        ctx.store(node, ctx.at(y.name, index(y.strides, [OUT_VARS[letter] for letter in y.layout])), value)


@emitter("Pool2D")
def emit_pool(ctx: Context, node: Node) -> None:
    """Definition 8 with padding: max ignores padded cells; average divides by the cells counted."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    kind, w = node.attrs["kind"], ctx.w
    kh, kw = node.attrs["kernel"]
    guarded = any(low or high for low, high in _reach(node, x, y).values())
    count = kind == "avg" and guarded and not node.attrs.get("count_include_pad", False)

    def body(coords: dict[str, str]) -> None:
        value = ctx.at(x.name, index(x.strides, [coords[letter] for letter in x.layout]))
        if kind == "max":
            w.line(f"acc = {value} > acc ? {value} : acc;")
        else:
            w.line(f"acc += {value};")
            if count:
                w.line("n += 1.0f;")

    with w.nest([(OUT_VARS[letter], dim) for letter, dim in zip(y.layout, y.shape)]):
        w.line("float acc = -INFINITY;" if kind == "max" else "float acc = 0.0f;")
        if count:
            w.line("float n = 0.0f;")
        _spatial_window(ctx, node, x, y, "HW", {"C": "oc"}, body)
        value = "acc" if kind == "max" else f"acc / {'n' if count else c_float(kh * kw)}"
        ctx.store(node, ctx.at(y.name, index(y.strides, [OUT_VARS[letter] for letter in y.layout])), value)


@emitter("GlobalPool2D")
def emit_global_pool(ctx: Context, node: Node) -> None:
    """Max or mean over the whole H x W plane of each channel; the output holds C values."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    kind, w = node.attrs["kind"], ctx.w
    with w.loop("c", x.dim("C")):
        w.line("float acc = -INFINITY;" if kind == "max" else "float acc = 0.0f;")
        with w.nest([("h", x.dim("H")), ("w", x.dim("W"))]):
            value = ctx.at(x.name, index(x.strides, [{"H": "h", "W": "w", "C": "c"}[k] for k in x.layout]))
            w.line(f"acc = {value} > acc ? {value} : acc;" if kind == "max" else f"acc += {value};")
        value = "acc" if kind == "max" else f"acc / {c_float(x.dim('H') * x.dim('W'))}"
        ctx.store(node, ctx.at(y.name, "c"), value)


# ---------------------------------------------------------- per-value layers

@emitter("BatchNorm")
def emit_batch_norm(ctx: Context, node: Node) -> None:
    """Definition 9 with alpha and B precomputed: O = alpha_c * I + B_c."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    variables = axis_vars(y, "")
    channel = variables[y.axis("C")]
    flat = index(y.strides, variables)
    scale, shift = ctx.param(node, "scale"), ctx.param(node, "shift")
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.store(node, ctx.at(y.name, flat), f"{ctx.at(x.name, flat)} * {scale}[{channel}] + {shift}[{channel}]")


@emitter("Activation")
def emit_activation(ctx: Context, node: Node) -> None:
    """Definition 4, for an activation no producer could absorb."""
    x, y, act = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), node.attrs["act"]
    with ctx.w.loop("i", y.size):
        ctx.w.line(f"const float v = {ctx.at(x.name, 'i')};")
        ctx.w.line(f"{ctx.at(y.name, 'i')} = {expression(act.kind, act.params, 'v')};")


@emitter("Elementwise")
def emit_elementwise(ctx: Context, node: Node) -> None:
    """out = a (op) b (op) ..., numpy broadcasting; operands are tensors or constant parameters."""
    y = ctx.tensor(node.output)
    variables = [f"e{k}" for k in range(len(y.shape))]
    reads = []
    for operand in node.attrs["operands"]:
        if "tensor" in operand:
            tensor = ctx.tensor(operand["tensor"])
            reads.append(ctx.at(tensor.name, index(broadcast_strides(tensor.shape, y.shape), variables)))
        else:
            strides = broadcast_strides(operand["shape"], y.shape)
            reads.append(f"{ctx.param(node, operand['param'])}[{index(strides, variables)}]")
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), f" {node.attrs['operator']} ".join(reads))


@emitter("Softmax")
def emit_softmax(ctx: Context, node: Node) -> None:
    y = ctx.tensor(node.output)
    softmax_in_place(ctx, y, ctx.buffers[y.name], node.attrs["inner"], source=ctx.buffers[node.inputs[0]])


# ----------------------------------------------------------- data movement

@emitter("Concat")
def emit_concat(ctx: Context, node: Node) -> None:
    """Each input copied to its slice of the output along ``axis``."""
    y, axis, offset = ctx.tensor(node.output), node.attrs["axis"], 0
    for name in node.inputs:
        x = ctx.tensor(name)
        variables = [f"e{k}" for k in range(len(x.shape))]
        placed = [f"{v} + {offset}" if k == axis and offset else v for k, v in enumerate(variables)]
        with ctx.w.nest(zip(variables, x.shape)):
            ctx.store(node, ctx.at(y.name, index(y.strides, placed)), ctx.at(x.name, index(x.strides, variables)))
        offset += x.shape[axis]


@emitter("Pad")
def emit_pad(ctx: Context, node: Node) -> None:
    """Definition 6 with any constant value; negative pads crop."""
    x, y, w = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), ctx.w
    variables = [f"e{k}" for k in range(len(y.shape))]
    with w.nest(zip(variables, y.shape)):
        sources, guards = [], []
        for k, ((begin, end), var) in enumerate(zip(node.attrs["pads"], variables)):
            if begin == 0 and end == 0:
                sources.append(var)
                continue
            w.line(f"const int i{k} = {var} {'-' if begin >= 0 else '+'} {abs(begin)};")
            sources.append(f"i{k}")
            if begin > 0:
                guards.append(f"i{k} >= 0")
            if end > 0:
                guards.append(f"i{k} < {x.shape[k]}")
        read = ctx.at(x.name, index(x.strides, sources))
        value = f"({' && '.join(guards)}) ? {read} : {c_float(node.attrs['value'])}" if guards else read
        w.line(f"{ctx.at(y.name, index(y.strides, variables))} = {value};")


@emitter("Transpose")
def emit_transpose(ctx: Context, node: Node) -> None:
    """Output axis k is input axis perm[k]."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    variables = [f"e{k}" for k in range(len(y.shape))]
    x_strides = tuple(x.strides[p] for p in node.attrs["perm"])
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.w.line(f"{ctx.at(y.name, index(y.strides, variables))} = {ctx.at(x.name, index(x_strides, variables))};")


@emitter("Gather")
def emit_gather(ctx: Context, node: Node) -> None:
    """Values picked along ``axis`` by a constant index (table), e.g. to restore a flattening order."""
    x, y, axis = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), node.attrs["axis"]
    variables = [f"e{k}" for k in range(len(y.shape))]
    if "indices" in node.params:
        sources = list(variables)
        sources[axis] = f"{ctx.param(node, 'indices')}[{variables[axis]}]"
    else:
        sources = variables[:axis] + [str(node.attrs["index"])] + variables[axis:]
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.w.line(f"{ctx.at(y.name, index(y.strides, variables))} = {ctx.at(x.name, index(x.strides, sources))};")


@emitter("View")
def emit_view(ctx: Context, node: Node) -> None:
    """Flatten, Reshape, Dropout...: the same memory read with another shape; no code.

    Only when the model's output is a view of its input does it copy.
    """
    if node.attrs.get("copy"):
        with ctx.w.loop("i", ctx.tensor(node.output).size):
            ctx.w.line(f"{ctx.at(node.output, 'i')} = {ctx.at(node.inputs[0], 'i')};")


@emitter("Fused")
def emit_fused(ctx: Context, node: Node) -> None:
    """A layer another layer computes (its comment says which); no code."""
