"""One emitter per IR op, registered in ``EMITTERS`` (ACETONE's LayerFactory idea).

An emitter writes the inlined V2 code of one layer: counted ``for`` loops with
literal bounds, array accesses at constant strides, padding handled by ``if``
guards inside the loops. Options of a layer (padding, layout, kernel layout,
count_include_pad...) are data read from the node, not separate emitters.

Index expressions are built from each tensor's own strides, so one emitter
serves channels-last (Keras) and channels-first (ONNX) tensors alike.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable

import numpy as np

from codegen.activations import expression
from codegen.cwriter import CWriter, c_float
from codegen.ir import CONTRACTED, QUANTIZED_TYPES, Graph, Node, Tensor, row_major_strides
from codegen.memory import Buffer
from codegen.minifloat import FORMATS, round_to
from codegen.quantize import ADD_LEFT_SHIFT

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


def softmax_in_place(ctx: Context, tensor: Tensor, buffer: Buffer, inner: int, source: Buffer | None = None,
                     stride: int = 1, log: bool = False) -> None:
    """Numerically stable (log-)softmax over groups of ``inner`` values ``stride`` apart.

    Softmax stores ``e = exp(x - max)`` then divides by their sum; LogSoftmax
    writes ``(x - max) - log(sum)``, as ONNX Runtime orders it.
    """
    w, source = ctx.w, source or buffer
    outer = tensor.size // (inner * stride)
    step = "k" if stride == 1 else f"k * {stride}"

    def body(base: str) -> None:
        at_in = lambda: source.at(f"{base}{step}")  # noqa: E731
        at_out = lambda: buffer.at(f"{base}{step}")  # noqa: E731
        w.line("float m = -INFINITY;")
        w.line("float s = 0.0f;")
        with w.loop("k", inner):
            w.line(f"m = {at_in()} > m ? {at_in()} : m;")
        with w.loop("k", inner):
            w.line(f"const float e = expf({at_in()} - m);")
            if not log:
                w.line(f"{at_out()} = e;")
            w.line("s += e;")
        with w.loop("k", inner):
            w.line(f"{at_out()} = ({at_in()} - m) - logf(s);" if log else f"{at_out()} = {at_out()} / s;")

    bases = ([("r", outer)] if outer > 1 else []) + ([("q", stride)] if stride > 1 else [])
    base = " + ".join(([f"r * {inner * stride}"] if outer > 1 else []) + (["q"] if stride > 1 else []))
    with w.nest(bases):
        if not bases:
            with w.block(""):
                body("")
        else:
            body(f"{base} + ")


# --------------------------------------------------------------------- dense

@emitter("Dense")
def emit_dense(ctx: Context, node: Node) -> None:
    """Definition 11 as a matrix product: O = alpha * sum_k X W + beta * B, indexed by ``x_axes``/``w_axes``.

    The index maps (``ir.dense_axes``) say which output axis each input and
    weight axis runs along, so X @ W, W @ X and transposed Gemm operands are
    one loop nest; the bias is broadcast to the output (numpy rules).
    """
    alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)

    def finish(target: str, bias: str | None) -> None:
        value = "acc" if alpha == 1.0 else f"{c_float(alpha)} * acc"
        if bias is not None:
            value = f"{value} + {bias if beta == 1.0 else f'{c_float(beta)} * {bias}'}"
        ctx.store(node, target, value)

    _dense_nest(ctx, node, "float acc = 0.0f;", lambda x, w: f"acc += {x} * {w};", finish)


def _dense_nest(ctx: Context, node: Node, start: str, tap: Callable[[str, str], str],
                finish: Callable[[str, str | None], None]) -> None:
    """The loops of a Dense or QDense node: per output value ``start``, ``tap(x read, weight read)`` per
    contracted index, then ``finish(output lvalue, bias read or None)``; the output's last axis is ``o``."""
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
    w = ctx.w
    with w.nest(zip(variables, y.shape)):
        w.line(start)
        with w.loop("i", k_in):
            w.line(tap(ctx.at(x.name, x_index), f"{weight}[{w_index}]"))
        bias = None
        if "bias" in node.params:
            strides = broadcast_strides(node.params["bias"].shape, y.shape)
            bias = f"{ctx.param(node, 'bias')}[{index(strides, variables)}]"
        finish(ctx.at(y.name, index(y.strides, variables)), bias)


# ------------------------------------------------- convolution and pooling

OUT_VARS = {"D": "od", "H": "oh", "W": "ow", "C": "oc"}


def spatial_letters(x: Tensor) -> str:
    """The spatial axes of an image (``HW``) or a volume (``DHW``), in the order of the window attrs."""
    return "".join(letter for letter in "DHW" if letter in x.layout)


def _reach(node: Node, x: Tensor, y: Tensor) -> dict[str, tuple[bool, bool]]:
    """Per spatial axis: can a window reach before the start / past the end of the input?"""
    a = node.attrs
    reach = {}
    for k, letter in enumerate(spatial_letters(x)):
        kernel, stride, dilation = a["kernel"][k], a["strides"][k], a["dilations"][k]
        begin = a["pads"][k]
        highest = (y.dim(letter) - 1) * stride + (kernel - 1) * dilation - begin
        reach[letter] = (begin > 0, highest >= x.dim(letter))
    return reach


def _spatial_window(ctx: Context, node: Node, x: Tensor, y: Tensor, order: str, coords: dict[str, str],
                    body: Callable[[dict[str, str]], None]) -> None:
    """Loops over the window of output position (od, oh, ow), nested in ``order`` (letters of D, H, W, I).

    ``body`` receives the input coordinates by axis letter; cells outside the
    input are skipped by ``if`` guards (zero padding for a convolution, ignored
    cells for pooling, as in Definition 6 and the NNEF ``border = 'ignore'``).
    """
    a, w = node.attrs, ctx.w
    reach = _reach(node, x, y)
    spatial = {letter: (f"k{letter.lower()}", f"i{letter.lower()}", OUT_VARS[letter], k, a["pads"][k])
               for k, letter in enumerate(spatial_letters(x))}
    coords = dict(coords)

    def nest(level: int) -> None:
        if level == len(order):
            body(coords)
            return
        letter = order[level]
        if letter == "I":
            with w.loop("ic", x.dim("C") // a.get("group", 1)):
                coords["C"] = "ic" if a.get("group", 1) == 1 else "gc + ic"
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


def group_base(ctx: Context, node: Node, x: Tensor, y: Tensor) -> None:
    """``gc``, the first input channel of output channel ``oc``'s group (grouped convolution only)."""
    group = node.attrs.get("group", 1)
    if group > 1:
        per_out, per_in = y.dim("C") // group, x.dim("C") // group
        first = "oc" if per_out == 1 else f"oc / {per_out}"  # a constant divisor: no library call on ARMv4
        ctx.w.line(f"const int gc = {first if per_in == 1 else f'{first} * {per_in}'};")


@emitter("Conv2D")
def emit_conv(ctx: Context, node: Node) -> None:
    """Definition 14: activation(bias + convolution(padding(I))), padding as guards; grouped: ONNX's groups."""
    def finish(target: str) -> None:
        ctx.store(node, target, f"acc + {ctx.param(node, 'bias')}[oc]" if "bias" in node.params else "acc")

    _conv_nest(ctx, node, "float acc = 0.0f;", lambda x, w: f"acc += {x} * {w};", finish)


def _conv_nest(ctx: Context, node: Node, start: str, tap: Callable[[str, str], str],
               finish: Callable[[str], None]) -> None:
    """The loops of a Conv2D or QConv2D node: per output value (oc, oh, ow) ``start``, ``tap(x read, weight
    read)`` per window cell inside the input, then ``finish(output lvalue)``."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    layout = node.attrs["kernel_layout"]  # "HWIO" (Keras) or "OIHW" (ONNX)
    group = node.attrs.get("group", 1)
    dims = {"H": node.attrs["kernel"][0], "W": node.attrs["kernel"][1], "I": x.dim("C") // group, "O": y.dim("C")}
    k_strides = row_major_strides(tuple(dims[letter] for letter in layout))
    k_vars = [{"H": "kh", "W": "kw", "I": "ic", "O": "oc"}[letter] for letter in layout]
    kernel, w = ctx.param(node, "kernel"), ctx.w

    def body(coords: dict[str, str]) -> None:
        x_index = index(x.strides, [coords[letter] for letter in x.layout])
        w.line(tap(ctx.at(x.name, x_index), f"{kernel}[{index(k_strides, k_vars)}]"))

    with w.nest([(OUT_VARS[letter], dim) for letter, dim in zip(y.layout, y.shape)]):
        w.line(start)
        group_base(ctx, node, x, y)
        _spatial_window(ctx, node, x, y, layout.replace("O", ""), {}, body)
        finish(ctx.at(y.name, index(y.strides, [OUT_VARS[letter] for letter in y.layout])))


def transposed_taps(node: Node, x: Tensor, letter: str, out: int, tap: int) -> int | None:
    """The input index that output index ``out`` reads at kernel tap ``tap`` of a transposed convolution."""
    k = spatial_letters(x).index(letter)
    a = node.attrs
    shifted = out + a["pads"][k] - tap * a["dilations"][k]
    if shifted < 0 or shifted % a["strides"][k] or shifted // a["strides"][k] >= x.dim(letter):
        return None
    return shifted // a["strides"][k]


@emitter("ConvTranspose2D")
def emit_conv_transpose(ctx: Context, node: Node) -> None:
    """ONNX ConvTranspose as a gather: output (oh, ow) sums x[ic, ih, iw] * w where oh = ih * s + kh * d - pad.

    Each output loops over its group's input channels and the kernel taps;
    ``if`` guards keep the taps whose input index is whole and inside the input.
    """
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    a, w = node.attrs, ctx.w
    layout, group = a["kernel_layout"], a.get("group", 1)  # "IOHW" or "IODHW" (ONNX) or "HWOI" (Keras)
    letters = spatial_letters(x)
    dims = {**dict(zip(letters, a["kernel"])), "I": x.dim("C"), "O": y.dim("C") // group}
    k_strides = row_major_strides(tuple(dims[letter] for letter in layout))
    k_vars = [{"I": "ic" if group == 1 else "gc + ic", "O": "oc" if group == 1 else "oc % " + str(dims["O"])}
              .get(letter, f"k{letter.lower()}") for letter in layout]
    kernel = ctx.param(node, "kernel")
    spatial = {}
    for k, letter in enumerate(letters):
        stride, dilation, pad = a["strides"][k], a["dilations"][k], a["pads"][k]
        out_var, k_var, in_var = OUT_VARS[letter], f"k{letter.lower()}", f"i{letter.lower()}"
        term = out_var + (f" + {pad}" if pad else "") + (f" - {k_var}" if dilation == 1 else f" - {k_var} * {dilation}")
        spatial[letter] = (k_var, in_var, term, stride, a["kernel"][k])

    with w.nest([(OUT_VARS[letter], dim) for letter, dim in zip(y.layout, y.shape)]):
        w.line("float acc = 0.0f;")
        group_base(ctx, node, x, y)
        with w.loop("ic", x.dim("C") // group):
            def nest(rest: str) -> None:
                if not rest:
                    coords = {**{letter: f"i{letter.lower()}" for letter in letters},
                              "C": "ic" if group == 1 else "gc + ic"}
                    x_index = index(x.strides, [coords[letter] for letter in x.layout])
                    w.line(f"acc += {ctx.at(x.name, x_index)} * {kernel}[{index(k_strides, k_vars)}];")
                    return
                k_var, in_var, term, stride, taps = spatial[rest[0]]
                with w.loop(k_var, taps):
                    w.line(f"const int t{in_var} = {term};")
                    guards = [f"t{in_var} >= 0"] + ([f"t{in_var} % {stride} == 0"] if stride > 1 else [])
                    guards.append(f"t{in_var} < {x.dim(rest[0]) * stride}")
                    with w.block(f"if ({' && '.join(guards)})"):
                        w.line(f"const int {in_var} = t{in_var}" + (f" / {stride};" if stride > 1 else ";"))
                        nest(rest[1:])
            nest(letters)
        value = f"acc + {ctx.param(node, 'bias')}[oc]" if "bias" in node.params else "acc"
        ctx.store(node, ctx.at(y.name, index(y.strides, [OUT_VARS[letter] for letter in y.layout])), value)


def padded_counts(node: Node, x: Tensor, y: Tensor) -> dict[str, list[int]]:
    """Per spatial letter, per output index: the window taps inside the explicitly padded input.

    ``count_include_pad`` divides by these (ONNX counts the explicit padding
    but not the overhang of a ``ceil_mode`` window); they are the kernel size
    but for the last windows of a ceil_mode axis.
    """
    a, letters = node.attrs, spatial_letters(x)
    counts = {}
    for k, letter in enumerate(letters):
        padded = x.dim(letter) + a["pads"][k] + a["pads"][k + len(letters)]
        counts[letter] = [sum(o * a["strides"][k] + tap * a["dilations"][k] < padded for tap in range(a["kernel"][k]))
                          for o in range(y.dim(letter))]
    return counts


def _padded_divisor(node: Node, x: Tensor, y: Tensor) -> str:
    """The C divisor of an average pool counting its padding: the product of ``padded_counts`` per axis, as
    ``(o < first short window ? kernel : ceil((padded - o * stride) / dilation))``."""
    a, letters = node.attrs, spatial_letters(x)
    terms = []
    for k, (letter, counts) in enumerate(padded_counts(node, x, y).items()):
        taps, stride, dilation = a["kernel"][k], a["strides"][k], a["dilations"][k]
        short = [o for o, count in enumerate(counts) if count < taps]
        if not short:
            terms.append(str(taps))
            continue
        padded, o = x.dim(letter) + a["pads"][k] + a["pads"][k + len(letters)], OUT_VARS[letter]
        left = f"{padded} - {o}" + (f" * {stride}" if stride > 1 else "")
        inside = f"({left} + {dilation - 1}) / {dilation}" if dilation > 1 else left
        terms.append(f"({o} < {short[0]} ? {taps} : {inside})")
    return "(float)(" + " * ".join(terms) + ")" if any("?" in term for term in terms) else c_float(int(
        np.prod(a["kernel"])))


@emitter("Pool2D")
def emit_pool(ctx: Context, node: Node) -> None:
    """Definition 8 with padding: max ignores padded cells; average divides by the cells counted."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    kind, w = node.attrs["kind"], ctx.w
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
        if x.quantized:  # a max of stored values (the scale is positive); the accumulator starts at the lowest
            w.line(f"int acc = {QUANTIZED_TYPES[x.dtype][0]};")
        else:
            w.line("float acc = -INFINITY;" if kind == "max" else "float acc = 0.0f;")
        if count:
            w.line("float n = 0.0f;")
        _spatial_window(ctx, node, x, y, spatial_letters(x), {"C": "oc"}, body)
        value = "acc" if kind == "max" else f"acc / {'n' if count else _padded_divisor(node, x, y)}"
        value = f"({x.ctype})acc" if x.quantized else value
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


def combine(operator: str, reads: list[str], mean: bool = False) -> tuple[list[str], str]:
    """Statements and the value of ``a op b op ...`` (left to right; ``max``/``min`` through ``acc``)."""
    if operator in ("max", "min"):
        sign = ">" if operator == "max" else "<"
        return [f"float acc = {reads[0]};"] + [f"acc = {r} {sign} acc ? {r} : acc;" for r in reads[1:]], "acc"
    value = f" {operator} ".join(reads)
    return [], f"({value}) / {c_float(len(reads))}" if mean else value


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
    statements, value = combine(node.attrs["operator"], reads, node.attrs.get("mean", False))
    with ctx.w.nest(zip(variables, y.shape)):
        for line in statements:
            ctx.w.line(line)
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), value)


@emitter("PRelu")
def emit_prelu(ctx: Context, node: Node) -> None:
    """x < 0 ? slope * x : x, the slope broadcast (numpy rules)."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    variables = [f"e{k}" for k in range(len(y.shape))]
    slope = f"{ctx.param(node, 'slope')}[{index(broadcast_strides(node.params['slope'].shape, y.shape), variables)}]"
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.w.line(f"const float v = {ctx.at(x.name, index(x.strides, variables))};")
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), f"(v < 0.0f ? {slope} * v : v)")


@emitter("Softmax")
def emit_softmax(ctx: Context, node: Node) -> None:
    y = ctx.tensor(node.output)
    softmax_in_place(ctx, y, ctx.buffers[y.name], node.attrs["inner"], source=ctx.buffers[node.inputs[0]],
                     stride=node.attrs.get("stride", 1), log=node.attrs.get("log", False))


# Per reduction: the accumulator's start, its update with value {v}, its final value over {n} values
# (``m``: logsumexp's maximum, from a first pass).
REDUCE = {
    "sum": ("0.0f", "acc += {v};", "acc"),
    "mean": ("0.0f", "acc += {v};", "acc / {n}"),
    "max": ("-INFINITY", "acc = {v} > acc ? {v} : acc;", "acc"),
    "min": ("INFINITY", "acc = {v} < acc ? {v} : acc;", "acc"),
    "prod": ("1.0f", "acc *= {v};", "acc"),
    "l1": ("0.0f", "acc += fabsf({v});", "acc"),
    "l2": ("0.0f", "acc += {v} * {v};", "sqrtf(acc)"),
    "sumsquare": ("0.0f", "acc += {v} * {v};", "acc"),
    "logsum": ("0.0f", "acc += {v};", "logf(acc)"),
    "logsumexp": ("0.0f", "acc += expf({v} - m);", "logf(acc) + m"),
}


def reduce_parts(node: Node, x: Tensor) -> tuple[list[int], list[int], tuple[int, ...]]:
    """(kept axes, reduced axes, row-major strides of the output over the kept axes) of a Reduce node."""
    reduced = list(node.attrs["axes"])
    kept = [k for k in range(len(x.shape)) if k not in reduced]
    return kept, reduced, row_major_strides(tuple(x.shape[k] for k in kept))


@emitter("Reduce")
def emit_reduce(ctx: Context, node: Node) -> None:
    """One accumulator per output value over the reduced axes (logsumexp: a first pass for the max)."""
    x, y, w = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), ctx.w
    kind = node.attrs["kind"]
    kept, reduced, y_strides = reduce_parts(node, x)
    variables = [f"e{k}" for k in range(len(x.shape))]
    read = ctx.at(x.name, index(x.strides, variables))
    start, update, final = REDUCE[kind]
    count = 1
    for k in reduced:
        count *= x.shape[k]
    outer = [(variables[k], x.shape[k]) for k in kept]
    with w.nest(outer) if outer else w.block(""):
        if kind == "logsumexp":
            w.line("float m = -INFINITY;")
            with w.nest((variables[k], x.shape[k]) for k in reduced):
                w.line(f"m = {read} > m ? {read} : m;")
        w.line(f"float acc = {start};")
        with w.nest((variables[k], x.shape[k]) for k in reduced):
            w.line(f"const float v = {read};")
            w.line(update.format(v="v"))
        ctx.store(node, ctx.at(y.name, index(y_strides, [variables[k] for k in kept])),
                  final.format(n=c_float(count)))


@emitter("LRN")
def emit_lrn(ctx: Context, node: Node) -> None:
    """ONNX LRN: x * (bias + alpha / size * sum of squares over nearby channels) ** -beta."""
    x, y, w, a = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), ctx.w, node.attrs
    axis, size = a["axis"], a["size"]
    variables = [f"e{k}" for k in range(len(y.shape))]
    near = list(variables)
    near[axis] = "c"
    before = (size - 1) // 2
    scale = c_float(np.float32(a["alpha"]) / np.float32(size))
    with w.nest(zip(variables, y.shape)):
        w.line("float acc = 0.0f;")
        with w.loop("j", size):
            w.line(f"const int c = {variables[axis]} + j" + (f" - {before};" if before else ";"))
            with w.block(f"if (c >= 0 && c < {x.shape[axis]})"):
                w.line(f"const float v = {ctx.at(x.name, index(x.strides, near))};")
                w.line("acc += v * v;")
        value = (f"{ctx.at(x.name, index(x.strides, variables))} * powf({c_float(a['bias'])} + {scale} * acc, "
                 f"{c_float(-a['beta'])})")
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), value)


# ----------------------------------------------------------- data movement

@emitter("Concat")
def emit_concat(ctx: Context, node: Node) -> None:
    """Each input copied to its slice of the output along ``axis``."""
    y, axis, offset = ctx.tensor(node.output), node.attrs["axis"], 0
    for part in concat_parts(node):
        shape = ctx.tensor(part["tensor"]).shape if "tensor" in part else node.params[part["param"]].shape
        variables = [f"e{k}" for k in range(len(shape))]
        placed = [f"{v} + {offset}" if k == axis and offset else v for k, v in enumerate(variables)]
        flat = index(row_major_strides(shape), variables)
        read = ctx.at(part["tensor"], flat) if "tensor" in part else f"{ctx.param(node, part['param'])}[{flat}]"
        with ctx.w.nest(zip(variables, shape)):
            ctx.store(node, ctx.at(y.name, index(y.strides, placed)), read)
        offset += shape[axis]


def concat_parts(node: Node) -> list[dict]:
    """A Concat node's operands in order: ``{"tensor": name}`` or ``{"param": key}`` (a constant)."""
    return node.attrs.get("parts") or [{"tensor": name} for name in node.inputs]


def slice_sources(node: Node, variables: list[str]) -> list[str]:
    """The input index of each axis of a Slice node's output index ``variables``: start + e * step."""
    sources = []
    for var, start, step in zip(variables, node.attrs["starts"], node.attrs["steps"]):
        term = var if step == 1 else f"{var} * {abs(step)}"
        if step > 0:
            sources.append(f"{term} + {start}" if start else term)
        else:
            sources.append(f"{start} - {term}")
    return sources


@emitter("Slice")
def emit_slice(ctx: Context, node: Node) -> None:
    """Output index e reads input index starts + e * steps on every axis (Slice, Split, cropping)."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    variables = [f"e{k}" for k in range(len(y.shape))]
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)),
                  ctx.at(x.name, index(x.strides, slice_sources(node, variables))))


def resize_terms(node: Node, variables: list, table) -> list[tuple[list, list]]:
    """Per combination of taps of a Resize (K per resized axis): (weight factors, source index per axis);
    ``table(key, var, tap, k)`` reads entry (var, tap) of a (out, k) table."""
    corners = [([], [])]
    for k, var in enumerate(variables):
        taps = node.attrs["taps"][k]
        if not taps:
            corners = [(f, s + [var]) for f, s in corners]
            continue
        weighted = f"w{k}" in node.params
        corners = [(f + ([table(f"w{k}", var, t, taps)] if weighted else []), s + [table(f"i{k}", var, t, taps)])
                   for f, s in corners for t in range(taps)]
    return corners


def resize_inside(node: Node, variables: list, table) -> list:
    """The ``in<k>`` reads that must all hold for an output index to be inside the region (none: always)."""
    return [table(f"in{k}", var, 0, 1) for k, var in enumerate(variables) if f"in{k}" in node.params]


@emitter("Resize")
def emit_resize(ctx: Context, node: Node) -> None:
    """The sum over the taps of every resized axis (nearest 1, linear 2, cubic 4, antialias more) of their
    weights' product times the input there, all read from tables; outside the region, the extrapolation value."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    variables = [f"e{k}" for k in range(len(y.shape))]

    def table(key: str, var: str, tap: int, taps: int) -> str:
        return f"{ctx.param(node, key)}[{var if taps == 1 else f'{var} * {taps} + {tap}'}]"

    value = " + ".join(" * ".join(factors + [ctx.at(x.name, index(x.strides, sources))])
                       for factors, sources in resize_terms(node, variables, table))
    inside = resize_inside(node, variables, table)
    if inside:
        value = f"({' && '.join(inside)}) ? ({value}) : {c_float(node.attrs['extrapolation'])}"
    with ctx.w.nest(zip(variables, y.shape)):
        ctx.store(node, ctx.at(y.name, index(y.strides, variables)), value)


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


# ----------------------------------------------------------- quantized (int8)

def requantize(w: CWriter, result: str, acc: str, m0: str, shift: str, left: bool) -> None:
    """``result = MultiplyByQuantizedMultiplier(acc, m0, shift)`` (TFLite), integer-only, as a C block.

    ``result`` is a declared ``int32_t``; ``acc`` an int32 expression; ``m0`` in [0, 2^31) and ``shift``
    (``quantize.quantize_multiplier``) C expressions; ``left``: some shift of this layer is positive (else the
    left shift is not written). The steps, for docs/codegen.md's formulas:
    a = acc * 2^max(shift, 0), saturated to int32 (TFLite leaves an overflow undefined);
    h = SaturatingRoundingDoublingHighMul(a, m0) = (a * m0 + (a * m0 >= 0 ? 2^30 : 1 - 2^30)) / 2^31 truncated
    toward zero (m0 is never INT32_MIN, so the saturating case does not arise); then RoundingDivideByPOT(h, e),
    e = max(-shift, 0): floor(h / 2^e) plus 1 when the remainder exceeds (2^e - 1) / 2 (+ 1 when h < 0), i.e.
    rounding half away from zero. Right shifts apply to non-negative values only (C99 leaves the shift of a
    negative value implementation-defined), and no 64-bit division is written (no library call on Cortex-M).
    """
    with w.block(""):
        if left:
            w.line(f"const int64_t up = (int64_t){acc} * ((int64_t)1 << ({shift} > 0 ? {shift} : 0));")
            w.line("const int32_t a = up > INT32_MAX ? INT32_MAX : up < INT32_MIN ? INT32_MIN : (int32_t)up;")
            acc = "a"
        w.line(f"const int64_t p = (int64_t){acc} * {m0};")
        w.line("const int64_t n = p >= 0 ? p + 1073741824 : p - 1073741823;")
        w.line("const int64_t h = n >= 0 ? n >> 31 : -(-n >> 31);")
        w.line(f"const int e = {shift} < 0 ? -{shift} : 0;")
        w.line("const int64_t q = h >= 0 ? h >> e : ~(~h >> e);")
        w.line("const int64_t mask = ((int64_t)1 << e) - 1;")
        w.line(f"{result} = (int32_t)(q + ((h & mask) > (mask >> 1) + (h < 0 ? 1 : 0) ? 1 : 0));")


def minus_zero_point(value: str, zero_point: int) -> str:
    """``value - zero_point`` as C (nothing for 0, ``+ 128`` rather than ``- -128``)."""
    if not zero_point:
        return value
    return f"({value} - {zero_point})" if zero_point > 0 else f"({value} + {-zero_point})"


def store_saturated(ctx: Context, node: Node, target: str, value: str, zero_point: int | None = None) -> None:
    """``target = clamp(zero_point + value, low, high)`` for int32 ``value``, clamped before the zero point is
    added (no overflow), cast to the output's C type; ``zero_point`` defaults to the node's ``y_zero_point`` (0:
    ``value`` is already a stored q, as TFLite's same-scale average)."""
    a, y = node.attrs, ctx.tensor(node.output)
    zero_point = a["y_zero_point"] if zero_point is None else zero_point
    low, high = a["low"] - zero_point, a["high"] - zero_point
    clamped = f"({value} < {low} ? {low} : {value} > {high} ? {high} : {value})"
    ctx.w.line(f"{target} = ({y.ctype}){clamped if not zero_point else minus_zero_point(clamped, -zero_point)};")


def requantize_store(ctx: Context, node: Node, target: str, channel: str, bias: str | None) -> None:
    """The end of a QConv2D or QDense output value: ``acc`` plus the bias, requantized with the channel's
    multiplier and shift (one for all when the params hold one), saturated to the output (``store_saturated``)."""
    w = ctx.w
    if bias is not None:
        w.line(f"acc += {bias};")
    at = channel if node.params["multiplier"].size > 1 else "0"
    w.line("int32_t v;")
    requantize(w, "v", "acc", f"{ctx.param(node, 'multiplier')}[{at}]", f"{ctx.param(node, 'shift')}[{at}]",
               left=bool((node.params["shift"] > 0).any()))
    store_saturated(ctx, node, target, "v")


def quantized_tap(ctx: Context, node: Node, channel: str) -> Callable[[str, str], str]:
    """``acc += (x - x_zero_point) * (w - w_zero_point[channel])`` for a QConv2D or QDense node."""
    x_zero = node.attrs["x_zero_point"]
    w_zero = None
    if "w_zero_point" in node.params:
        w_zero = f"{ctx.param(node, 'w_zero_point')}[{channel if node.params['w_zero_point'].size > 1 else '0'}]"

    def tap(x: str, weight: str) -> str:
        return f"acc += {minus_zero_point(x, x_zero)} * {f'({weight} - {w_zero})' if w_zero else weight};"
    return tap


@emitter("QConv2D")
def emit_qconv(ctx: Context, node: Node) -> None:
    """The Conv2D loops in int32 (padding adds nothing: it reads x_zero_point), then per-channel requantization."""
    bias = f"{ctx.param(node, 'bias')}[oc]" if "bias" in node.params else None
    _conv_nest(ctx, node, "int32_t acc = 0;", quantized_tap(ctx, node, "oc"),
               lambda target: requantize_store(ctx, node, target, "oc", bias))


@emitter("QDense")
def emit_qdense(ctx: Context, node: Node) -> None:
    """The Dense loops in int32, then requantization per output column (``o``)."""
    _dense_nest(ctx, node, "int32_t acc = 0;", quantized_tap(ctx, node, "o"),
                lambda target, bias: requantize_store(ctx, node, target, "o", bias))


@emitter("IConv2D")
def emit_iconv(ctx: Context, node: Node) -> None:
    """ConvInteger: the QConv2D accumulator, stored as ``(float) acc`` (exact: |acc| <= 2^24, ``ir``)."""
    _conv_nest(ctx, node, "int32_t acc = 0;", quantized_tap(ctx, node, "oc"),
               lambda target: ctx.w.line(f"{target} = (float)acc;"))


@emitter("IDense")
def emit_idense(ctx: Context, node: Node) -> None:
    """MatMulInteger: the QDense accumulator, stored as ``(float) acc`` (exact: |acc| <= 2^24, ``ir``)."""
    _dense_nest(ctx, node, "int32_t acc = 0;", quantized_tap(ctx, node, "o"),
                lambda target, bias: ctx.w.line(f"{target} = (float)acc;"))


@emitter("QAdd")
def emit_qadd(ctx: Context, node: Node) -> None:
    """TFLite's 8-bit ADD (docs/quantized.md): each operand, centred and multiplied by 2^20, is rescaled to units
    of 2^-20 of twice the larger input scale (multipliers 0 and 1), the two are added, and the sum is requantized
    to the output (multiplier 2) and saturated. A one-element operand is read at stride 0."""
    y, w = ctx.tensor(node.output), ctx.w
    variables = [f"e{k}" for k in range(len(y.shape))]
    multiplier, shift = ctx.param(node, "multiplier"), ctx.param(node, "shift")
    left = node.params["shift"] > 0
    zero_points = (node.attrs["a_zero_point"], node.attrs["b_zero_point"])
    with w.nest(zip(variables, y.shape)):
        w.line("int32_t sum = 0;")
        for k, (operand, zero_point) in enumerate(zip(node.inputs, zero_points)):
            x = ctx.tensor(operand)
            read = ctx.at(x.name, index(broadcast_strides(x.shape, y.shape), variables))
            with w.block(""):  # |q - zero point| <= 255: times 2^20 it stays below 2^28
                w.line(f"const int32_t shifted = (int32_t){minus_zero_point(read, zero_point)} * "
                       f"{1 << ADD_LEFT_SHIFT};")
                w.line("int32_t v;")
                requantize(w, "v", "shifted", f"{multiplier}[{k}]", f"{shift}[{k}]", left=bool(left[k]))
                w.line("sum += v;")
        w.line("int32_t v;")
        requantize(w, "v", "sum", f"{multiplier}[2]", f"{shift}[2]", left=bool(left[2]))
        store_saturated(ctx, node, ctx.at(y.name, index(y.strides, variables)), "v")


@emitter("QAvgPool")
def emit_qavg_pool(ctx: Context, node: Node) -> None:
    """Average pooling of q values over each window's valid taps (n, counted at run time only where a window
    can leave the input), rounded half away from zero (TFLite's reference AveragePool): ``r = (s + n / 2) / n``
    or ``(s - n / 2) / n`` with C's truncating 32-bit division (a hardware ``sdiv`` on Cortex-M4; a literal n
    becomes a multiplication). Same scale and zero point in and out: s is the sum of q and r is stored; else s is
    the sum of q - x_zero_point and r is requantized by M = s_x / s_y (``requantize``)."""
    x, y, w, a = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), ctx.w, node.attrs
    counted = any(low or high for low, high in _reach(node, x, y).values())
    rescale = "multiplier" in node.params

    def body(coords: dict[str, str]) -> None:
        w.line(f"acc += {ctx.at(x.name, index(x.strides, [coords[letter] for letter in x.layout]))};")
        if counted:
            w.line("n += 1;")

    with w.nest([(OUT_VARS[letter], dim) for letter, dim in zip(y.layout, y.shape)]):
        w.line("int32_t acc = 0;")
        if counted:
            w.line("int32_t n = 0;")
        _spatial_window(ctx, node, x, y, spatial_letters(x), {"C": "oc"}, body)
        n = "n" if counted else str(int(np.prod(a["kernel"])))
        half = "n / 2" if counted else str(int(n) // 2)
        zero = a["x_zero_point"] if rescale else 0
        if zero:
            w.line(f"acc {'-' if zero > 0 else '+'}= {abs(zero)} * {n};")
        w.line(f"const int32_t r = acc > 0 ? (acc + {half}) / {n} : (acc - {half}) / {n};")
        target = ctx.at(y.name, index(y.strides, [OUT_VARS[letter] for letter in y.layout]))
        if rescale:
            w.line("int32_t v;")
            requantize(w, "v", "r", f"{ctx.param(node, 'multiplier')}[0]", f"{ctx.param(node, 'shift')}[0]",
                       left=bool(node.params["shift"][0] > 0))
            store_saturated(ctx, node, target, "v")
        else:
            store_saturated(ctx, node, target, "r", zero_point=0)


@contextmanager
def _quantization_elements(ctx: Context, node: Node, size: int):
    """The loops of a Quantize or Dequantize over its ``size`` values: yields the C expressions of the value's index
    and of its scale's (None per tensor). Per axis or blocked (attr ``blocks``): three nested loops over the
    values before, along and after the quantization axis; the scale index steps along the axis once per block."""
    blocks = node.attrs.get("blocks")
    if blocks is None:
        with ctx.w.loop("i", size):
            yield "i", None
        return
    outer, length, inner, block, strides = blocks
    with ctx.w.nest([("o", outer), ("c", length), ("n", inner)]):
        ctx.w.line(f"const int i = {index((length * inner, inner, 1), ['o', 'c', 'n'])};")
        ctx.w.line(f"const int s = {index(strides, ['o', f'c / {block}' if block > 1 else 'c', 'n'])};")
        yield "i", "s"


def _scale_and_zero(ctx: Context, node: Node, at: str | None, scale: float, zero_point: int) -> tuple[str, str]:
    """The C expressions of a value's scale (float) and zero point (int): literals per tensor, the node's params at
    ``at`` otherwise (a zero point absent from the params is 0)."""
    if at is None:
        return c_float(scale), str(zero_point)
    zero = f"{ctx.param(node, 'zero_point')}[{at}]" if "zero_point" in node.params else "0"
    return f"{ctx.param(node, 'scale')}[{at}]", zero


@emitter("Quantize")
def emit_quantize(ctx: Context, node: Node) -> None:
    """ONNX QuantizeLinear in float32: saturate(nearbyintf(x / scale) + zero_point) (round half to even in the
    default rounding mode; a NaN gives the lowest value) to an integer type; x / scale rounded to a float8/float4
    type (``minifloat.round_to``, the node's ``saturate``)."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    low, high, _ = QUANTIZED_TYPES[y.dtype]
    with _quantization_elements(ctx, node, y.size) as (i, at):
        scale, zero = _scale_and_zero(ctx, node, at, y.scale, y.zero_point)
        quotient = f"{ctx.at(x.name, i)} / {scale}"
        if y.dtype in FORMATS:
            round_to(ctx.w, ctx.at(y.name, i), quotient, FORMATS[y.dtype], bool(node.attrs.get("saturate", 1)))
        else:
            plus = "" if zero == "0" else f" + (float){zero}" if at else \
                f" {'-' if int(zero) < 0 else '+'} {c_float(abs(int(zero)))}"
            ctx.w.line(f"const float r = nearbyintf({quotient}){plus};")
            ctx.w.line(f"{ctx.at(y.name, i)} = r >= {c_float(high)} ? {high} : r > {c_float(low)} ? "
                       f"({y.ctype})r : {low};")


@emitter("DynQuantize")
def emit_dyn_quantize(ctx: Context, node: Node) -> None:
    """ONNX DynamicQuantizeLinear (uint8) in float32, in ONNX Runtime's order of operations (its
    ``GetQuantizationParameter`` and MLAS's quantization; ONNX's reference evaluator computes the same but for an
    input of zeros, docs/quantized.md): lo = min(0, min x), hi = max(0, max x); scale = hi == lo ? 1 : (hi - lo) /
    255; zero point = round_half_even(clamp(0 - lo / scale, 0, 255)); y = saturate(round_half_even(x / scale) + zero
    point). Writes the part the node's ``part`` attr names, as float32 (y and the zero point exact integers)."""
    x, y, w = ctx.tensor(node.inputs[0]), ctx.tensor(node.output), ctx.w
    with w.block(""):
        w.line("float lo = 0.0f, hi = 0.0f;")
        with w.loop("i", x.size):
            w.line(f"const float v = {ctx.at(x.name, 'i')};")
            w.line("if (v < lo) lo = v;")
            w.line("if (v > hi) hi = v;")
        w.line("const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;")
        part = node.attrs["part"]
        if part == "scale":
            w.line(f"{ctx.at(y.name, '0')} = scale;")
            return
        w.line("const float zero = 0.0f - lo / scale;")
        w.line("const float zero_point = nearbyintf(zero < 0.0f ? 0.0f : zero > 255.0f ? 255.0f : zero);")
        if part == "zero_point":
            w.line(f"{ctx.at(y.name, '0')} = zero_point;")
            return
        with w.loop("i", y.size):
            w.line(f"const float r = nearbyintf({ctx.at(x.name, 'i')} / scale) + zero_point;")
            w.line(f"{ctx.at(y.name, 'i')} = r >= 255.0f ? 255.0f : r > 0.0f ? r : 0.0f;")


@emitter("Dequantize")
def emit_dequantize(ctx: Context, node: Node) -> None:
    """ONNX DequantizeLinear in float32: (float)(q - zero_point) * scale (a float8/float4 q as the float it is), rounded
    to a float16 output (a float16 scale's type)."""
    x, y = ctx.tensor(node.inputs[0]), ctx.tensor(node.output)
    with _quantization_elements(ctx, node, y.size) as (i, at):
        scale, zero = _scale_and_zero(ctx, node, at, node.attrs.get("scale"), node.attrs.get("zero_point"))
        value = ctx.at(x.name, i) if x.dtype in FORMATS else f"(int){ctx.at(x.name, i)}"
        value = (value if zero == "0" else f"({value} - {zero})") if at else minus_zero_point(value, int(zero))
        if y.dtype in FORMATS:  # a float16 output (a float16 scale's type): the float32 product rounded to it
            round_to(ctx.w, ctx.at(y.name, i), f"(float){value} * {scale}", FORMATS[y.dtype], saturate=False)
        else:
            ctx.w.line(f"{ctx.at(y.name, i)} = (float){value} * {scale};")
