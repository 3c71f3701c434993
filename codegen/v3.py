"""Strategy V3 (§3.4, Listing 4): no loops, weights as literals, one statement per multiply-accumulate.

Every layer is written out element by element, in the same order of
operations as V2 (so V2 and V3 compute the same floats): ``acc = 0.0f;``,
then ``acc += x[i] * <weight literal>;`` for each product, the bias added as
a literal, the activation applied on the store. Intermediate tensors live in
the same static arena as V2 (``memory.plan``); there is no layer struct and no
parameter array.

The code grows with the number of multiply-accumulates (MACs: the products of
Dense and Conv2D layers, padded window cells included), so generation is
refused above ``DEFAULT_MAX_MACS`` with one line naming the count, unless the
caller raises the limit. The file is streamed to disk layer by layer
(``Stream``); no string of the whole program is ever built.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from codegen.activations import expression
from codegen.cwriter import INDENT, c_float
from codegen.errors import OverLimit
from codegen.ir import CONTRACTED, Graph, Node, Tensor, row_major_strides
from codegen.layers import (REDUCE, _reach, broadcast_strides, combine, concat_parts, reduce_parts,
                            padded_counts, resize_inside, resize_terms, spatial_letters,
                            transposed_taps)
from codegen.memory import MemoryPlan

DEFAULT_MAX_MACS = 2_000_000


PART_LINES = 2000  # statements per part function: gcc's time and memory grow faster than linearly with size


class Stream:
    """Writes C lines straight to a file and counts them (for the manifest's line spans).

    The straight-line code is cut into ``static void <prefix>part<N>`` functions
    of about ``PART_LINES`` lines, called in order by the entry: one function of
    millions of statements takes gcc -O0 minutes and gigabytes (lenet5: 308 s,
    3 GB), parts keep compilation linear. Cuts fall between the statement
    groups of two output elements, never inside one.
    """

    def __init__(self, handle, prefix: str = "") -> None:
        self.handle = handle
        self.line_number = 0
        self.depth = 0
        self.prefix = prefix
        self.parts: list[str] = []
        self._in_part = 0
        self._open = False  # inside a part function (cuts allowed)

    def line(self, text: str = "") -> int:
        self.handle.write(f"{INDENT * self.depth}{text}\n" if text else "\n")
        self.line_number += 1
        return self.line_number

    def lines(self, texts: list[str]) -> None:
        if texts:
            pad = INDENT * self.depth
            self.handle.write("".join(f"{pad}{t}\n" for t in texts))
            self.line_number += len(texts)
            self._in_part += len(texts)
            if self._open and self._in_part >= PART_LINES:
                self.close_part()
                self.open_part()

    def open_part(self) -> None:
        name = f"{self.prefix}part{len(self.parts)}"
        self.parts.append(name)
        self.line(f"static void {name}(const float *input, float *output) {{")
        self.depth += 1
        self._in_part, self._open = 0, True
        self.lines(["float acc = 0.0f;", "(void)input;", "(void)output;", "(void)acc;"])

    def close_part(self) -> None:
        self._open = False
        self.depth -= 1
        self.line("}")
        self.line()

    @property
    def part(self) -> str:
        return self.parts[-1]

    def comment(self, text: str) -> int:
        text = " ".join(str(text).split()).replace("*/", "* /").replace("/*", "/ *")
        return self.line(f"/* {text} */")


def macs(graph: Graph) -> int:
    """Multiply-accumulate statements V3 writes: Dense and Conv2D products, padded cells included, and the
    weighted taps of a Resize (K per axis, multiplied: cubic and antialias ones grow fast)."""
    total = 0
    for node in graph.nodes:
        if node.op == "Dense":
            kernel = node.params["kernel"]
            total += graph.tensors[node.output].size * kernel.shape[node.attrs["w_axes"].index(CONTRACTED)]
        elif node.op in ("Conv2D", "ConvTranspose2D"):
            x = graph.tensors[node.inputs[0]]
            per_group = x.dim("C") // node.attrs.get("group", 1)
            total += graph.tensors[node.output].size * int(np.prod(node.attrs["kernel"])) * per_group
        elif node.op == "Resize" and any(key.startswith("w") for key in node.params):  # weighted taps, not copies
            total += graph.tensors[node.output].size * int(np.prod([k for k in node.attrs["taps"] if k]))
    return total


def literals(values: np.ndarray) -> np.ndarray:
    """``c_float`` of every value, vectorised (the same text ``c_float`` gives)."""
    flat = np.asarray(values, dtype=np.float32).reshape(-1)
    text = np.char.mod("%.9g", flat.astype(np.float64))
    plain = ~(np.char.find(text, ".") >= 0) & ~(np.char.find(text, "e") >= 0)
    text = np.where(plain, np.char.add(text, ".0"), text)
    text = np.char.add(text, "f")
    if not np.all(np.isfinite(flat)):
        text = np.where(np.isnan(flat), "NAN", text)
        text = np.where(np.isposinf(flat), "INFINITY", text)
        text = np.where(np.isneginf(flat), "-INFINITY", text)
    return text


@dataclass
class _Ctx:
    out: Stream
    graph: Graph
    plan: MemoryPlan

    def ref(self, tensor: str):
        """A function from a flat element index to the C lvalue of that element of ``tensor``."""
        buffer = self.plan.buffers[tensor]
        return lambda index: f"{buffer.symbol}[{buffer.offset + int(index)}]"

    def store(self, node: Node, target: str, value: str) -> list[str]:
        """Statements that write ``act(value)`` to ``target`` (softmax is applied afterwards, as a layer)."""
        act = node.act
        if act is None or act.kind in ("linear", "softmax"):
            return [f"{target} = {value};"]
        if value.isidentifier():
            return [f"{target} = {expression(act.kind, act.params, value)};"]
        return [f"{{ const float v = {value}; {target} = {expression(act.kind, act.params, 'v')}; }}"]


def _grid(shape: tuple[int, ...]) -> np.ndarray:
    """Every multi-index of ``shape`` in row-major order, one row each."""
    return np.indices(shape).reshape(len(shape), -1).T if shape else np.zeros((1, 0), dtype=int)


def _dense(ctx: _Ctx, node: Node) -> None:
    x, y = ctx.graph.tensors[node.inputs[0]], ctx.graph.tensors[node.output]
    kernel = np.asarray(node.params["kernel"])
    x_axes, w_axes = node.attrs["x_axes"], node.attrs["w_axes"]
    k_in = kernel.shape[w_axes.index(CONTRACTED)]
    weights = literals(kernel)
    w_strides = row_major_strides(kernel.shape)
    alpha, beta = node.attrs.get("alpha", 1.0), node.attrs.get("beta", 1.0)
    bias = bias_strides = None
    if "bias" in node.params:
        bias = literals(node.params["bias"])
        bias_strides = np.array(broadcast_strides(node.params["bias"].shape, y.shape))

    def base(axes, strides) -> tuple[np.ndarray, int]:
        per_out, contracted = np.zeros(len(y.shape), dtype=np.int64), 0
        for axis, stride in zip(axes, strides):
            if axis == CONTRACTED:
                contracted = stride
            elif axis is not None:
                per_out[axis] += stride
        return per_out, contracted

    x_out, x_k = base(x_axes, x.strides)
    w_out, w_k = base(w_axes, w_strides)
    read, write, k = ctx.ref(x.name), ctx.ref(y.name), np.arange(k_in)
    for flat, index in enumerate(_grid(y.shape)):
        xs, ws = int(index @ x_out) + k * x_k, int(index @ w_out) + k * w_k
        lines = ["acc = 0.0f;"] + [f"acc += {read(a)} * {weights[b]};" for a, b in zip(xs, ws)]
        value = "acc" if alpha == 1.0 else f"{c_float(alpha)} * acc"
        if bias is not None:
            term = bias[int(index @ bias_strides)]
            value = f"{value} + {term if beta == 1.0 else f'{c_float(beta)} * {term}'}"
        if value != "acc":
            lines.append(f"acc = {value};")
        lines += ctx.store(node, write(flat), "acc")
        ctx.out.lines(lines)


def _window_cells(node: Node, x: Tensor, out: dict[str, int], order: str) -> list[dict[str, int]]:
    """The input cells of output position ``out`` (per spatial letter) inside the input, in ``order`` (letters
    D, H, W, I) like V2's loops: each cell maps a letter to its kernel tap and ``i<letter>`` to its input index.

    ``I`` runs over one group's input channels (all of them without groups).
    """
    a = node.attrs
    letters = spatial_letters(x)
    ranges = {**{letter: range(k) for letter, k in zip(letters, a["kernel"])},
              "I": range(x.dim("C") // a.get("group", 1))}
    cells = []
    for combo in np.ndindex(*(len(ranges[letter]) for letter in order)):
        cell = dict(zip(order, combo))
        inside = {f"i{letter.lower()}": out[letter] * a["strides"][k] + cell[letter] * a["dilations"][k] - a["pads"][k]
                  for k, letter in enumerate(letters)}
        if all(0 <= inside[f"i{letter.lower()}"] < x.dim(letter) for letter in letters):
            cells.append({**cell, **inside})
    return cells


def _offset(t: Tensor, coords: dict[str, int]) -> int:
    """The flat index of the cell at ``coords`` (an index per axis letter of ``t``)."""
    return sum(coords[letter] * t.strides[t.axis(letter)] for letter in t.layout)


def _outputs(y: Tensor) -> list[dict[str, int]]:
    """Every spatial output position of an image or volume, row-major over its spatial letters."""
    letters = spatial_letters(y)
    return [dict(zip(letters, position)) for position in np.ndindex(*(y.dim(letter) for letter in letters))]


def _conv(ctx: _Ctx, node: Node) -> None:
    x, y = ctx.graph.tensors[node.inputs[0]], ctx.graph.tensors[node.output]
    layout, group = node.attrs["kernel_layout"], node.attrs.get("group", 1)
    dims = {"H": node.attrs["kernel"][0], "W": node.attrs["kernel"][1], "I": x.dim("C") // group, "O": y.dim("C")}
    k_strides = dict(zip(layout, row_major_strides(tuple(dims[letter] for letter in layout))))
    weights = literals(node.params["kernel"])
    bias = literals(node.params["bias"]) if "bias" in node.params else None
    read, write = ctx.ref(x.name), ctx.ref(y.name)
    for out in _outputs(y):
        cells = _window_cells(node, x, out, layout.replace("O", ""))
        k_base = [c["H"] * k_strides["H"] + c["W"] * k_strides["W"] + c["I"] * k_strides["I"] for c in cells]
        for oc in range(y.dim("C")):
            gc = oc // (y.dim("C") // group) * dims["I"]
            reads = [read(_offset(x, {"H": c["ih"], "W": c["iw"], "C": gc + c["I"]})) for c in cells]
            k_off = oc * k_strides["O"]
            lines = ["acc = 0.0f;"] + [f"acc += {r} * {weights[b + k_off]};" for r, b in zip(reads, k_base)]
            if bias is not None:
                lines.append(f"acc = acc + {bias[oc]};")
            lines += ctx.store(node, write(_offset(y, {**out, "C": oc})), "acc")
            ctx.out.lines(lines)


def _conv_transpose(ctx: _Ctx, node: Node) -> None:
    """V2's gather order: per output, the group's input channels, then the kernel taps that reach it."""
    x, y = ctx.graph.tensors[node.inputs[0]], ctx.graph.tensors[node.output]
    a = node.attrs
    layout, group = a["kernel_layout"], a.get("group", 1)
    letters = spatial_letters(x)
    dims = {**dict(zip(letters, a["kernel"])), "I": x.dim("C"), "O": y.dim("C") // group}
    k_strides = dict(zip(layout, row_major_strides(tuple(dims[letter] for letter in layout))))
    weights = literals(node.params["kernel"])
    bias = literals(node.params["bias"]) if "bias" in node.params else None
    read, write = ctx.ref(x.name), ctx.ref(y.name)
    per_group = x.dim("C") // group
    for out in _outputs(y):
        # per spatial axis, the (tap, input index) pairs that reach this output, nested in V2's order
        axes = [[(tap, i) for tap in range(dims[letter])
                 if (i := transposed_taps(node, x, letter, out[letter], tap)) is not None] for letter in letters]
        for oc in range(y.dim("C")):
            gc = oc // dims["O"] * per_group
            lines = ["acc = 0.0f;"]
            for ic in range(gc, gc + per_group):
                for taps in itertools.product(*axes):
                    k = ic * k_strides["I"] + oc % dims["O"] * k_strides["O"] + sum(
                        tap * k_strides[letter] for letter, (tap, _) in zip(letters, taps))
                    cell = {**{letter: i for letter, (_, i) in zip(letters, taps)}, "C": ic}
                    lines.append(f"acc += {read(_offset(x, cell))} * {weights[k]};")
            if bias is not None:
                lines.append(f"acc = acc + {bias[oc]};")
            lines += ctx.store(node, write(_offset(y, {**out, "C": oc})), "acc")
            ctx.out.lines(lines)


def _pool(ctx: _Ctx, node: Node) -> None:
    x, y = ctx.graph.tensors[node.inputs[0]], ctx.graph.tensors[node.output]
    kind = node.attrs["kind"]
    guarded = any(low or high for low, high in _reach(node, x, y).values())
    count = kind == "avg" and guarded and not node.attrs.get("count_include_pad", False)
    read, write = ctx.ref(x.name), ctx.ref(y.name)
    letters = spatial_letters(x)
    padded = padded_counts(node, x, y)
    for out in _outputs(y):
        cells = _window_cells(node, x, out, letters)
        divisor = len(cells) if count else int(np.prod([padded[letter][out[letter]] for letter in letters]))
        for oc in range(y.dim("C")):
            reads = [read(_offset(x, {**{letter: c[f"i{letter.lower()}"] for letter in letters}, "C": oc}))
                     for c in cells]
            if kind == "max":
                lines = ["acc = -INFINITY;"] + [f"acc = {r} > acc ? {r} : acc;" for r in reads]
                value = "acc"
            else:
                lines = ["acc = 0.0f;"] + [f"acc += {r};" for r in reads]
                value = f"acc / {c_float(divisor)}"
            lines += ctx.store(node, write(_offset(y, {**out, "C": oc})), value)
            ctx.out.lines(lines)


def _global_pool(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    kind = node.attrs["kind"]
    read, write = ctx.ref(x.name), ctx.ref(node.output)
    for c in range(x.dim("C")):
        reads = [read(_offset(x, {"H": h, "W": w, "C": c})) for h in range(x.dim("H")) for w in range(x.dim("W"))]
        if kind == "max":
            lines = ["acc = -INFINITY;"] + [f"acc = {r} > acc ? {r} : acc;" for r in reads]
            value = "acc"
        else:
            lines = ["acc = 0.0f;"] + [f"acc += {r};" for r in reads]
            value = f"acc / {c_float(x.dim('H') * x.dim('W'))}"
        lines += ctx.store(node, write(c), value)
        ctx.out.lines(lines)


def _batch_norm(ctx: _Ctx, node: Node) -> None:
    y = ctx.graph.tensors[node.output]
    scale, shift = literals(node.params["scale"]), literals(node.params["shift"])
    read, write = ctx.ref(node.inputs[0]), ctx.ref(y.name)
    channel = y.axis("C")
    for flat, index in enumerate(_grid(y.shape)):
        c = int(index[channel])
        ctx.out.lines(ctx.store(node, write(flat), f"{read(flat)} * {scale[c]} + {shift[c]}"))


def _activation(ctx: _Ctx, node: Node) -> None:
    act = node.attrs["act"]
    read, write = ctx.ref(node.inputs[0]), ctx.ref(node.output)
    for flat in range(ctx.graph.tensors[node.output].size):
        ctx.out.line(f"{{ const float v = {read(flat)}; {write(flat)} = {expression(act.kind, act.params, 'v')}; }}")


def softmax(ctx: _Ctx, tensor: str, inner: int, source: str | None = None, stride: int = 1,
            log: bool = False) -> None:
    """Numerically stable (log-)softmax over groups of ``inner`` values ``stride`` apart, unrolled (V2's order)."""
    read, write = ctx.ref(source or tensor), ctx.ref(tensor)
    size = ctx.graph.tensors[tensor].size
    for first in range(0, size, inner * stride):
        for offset in range(stride):
            block = range(first + offset, first + offset + inner * stride, stride)
            lines = ["{", f"{INDENT}float m = -INFINITY;", f"{INDENT}float s = 0.0f;", f"{INDENT}float e;"]
            lines += [f"{INDENT}m = {read(k)} > m ? {read(k)} : m;" for k in block]
            for k in block:
                lines += [f"{INDENT}e = expf({read(k)} - m);"] + ([] if log else [f"{INDENT}{write(k)} = e;"])
                lines.append(f"{INDENT}s += e;")
            if log:
                lines += [f"{INDENT}{write(k)} = ({read(k)} - m) - logf(s);" for k in block] + ["}"]
            else:
                lines += [f"{INDENT}{write(k)} = {write(k)} / s;" for k in block] + ["}"]
            ctx.out.lines(lines)


def _softmax(ctx: _Ctx, node: Node) -> None:
    softmax(ctx, node.output, node.attrs["inner"], source=node.inputs[0], stride=node.attrs.get("stride", 1),
            log=node.attrs.get("log", False))


def _copy_map(ctx: _Ctx, node: Node, sources) -> None:
    """``y[e] = source(e)`` for every output element; ``sources`` gives a C expression per multi-index."""
    y = ctx.graph.tensors[node.output]
    write = ctx.ref(y.name)
    for flat, index in enumerate(_grid(y.shape)):
        ctx.out.lines(ctx.store(node, write(flat), sources(index)))


def _transpose(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    strides, read = np.array([x.strides[p] for p in node.attrs["perm"]]), ctx.ref(x.name)
    _copy_map(ctx, node, lambda index: read(index @ strides))


def _pad(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    begins = np.array([begin for begin, _ in node.attrs["pads"]])
    read, fill = ctx.ref(x.name), c_float(node.attrs["value"])

    def source(index: np.ndarray) -> str:
        at = index - begins
        inside = np.all(at >= 0) and np.all(at < np.array(x.shape))
        return read(at @ np.array(x.strides)) if inside else fill

    _copy_map(ctx, node, source)


def _gather(ctx: _Ctx, node: Node) -> None:
    x, axis = ctx.graph.tensors[node.inputs[0]], node.attrs["axis"]
    read, strides = ctx.ref(x.name), np.array(x.strides)
    table = np.asarray(node.params["indices"]).reshape(-1) if "indices" in node.params else None

    def source(index: np.ndarray) -> str:
        if table is not None:
            at = index.copy()
            at[axis] = table[index[axis]]
        else:
            at = np.concatenate([index[:axis], [node.attrs["index"]], index[axis:]])
        return read(at @ strides)

    _copy_map(ctx, node, source)


def _elementwise(ctx: _Ctx, node: Node) -> None:
    y = ctx.graph.tensors[node.output]
    operands = []
    for operand in node.attrs["operands"]:
        if "tensor" in operand:
            tensor = ctx.graph.tensors[operand["tensor"]]
            operands.append((ctx.ref(tensor.name), np.array(broadcast_strides(tensor.shape, y.shape))))
        else:
            values = literals(node.params[operand["param"]])
            strides = np.array(broadcast_strides(operand["shape"], y.shape))
            operands.append((lambda i, values=values: values[int(i)], strides))
    write = ctx.ref(y.name)
    for flat, index in enumerate(_grid(y.shape)):
        reads = [get(index @ strides) for get, strides in operands]
        statements, value = combine(node.attrs["operator"], reads, node.attrs.get("mean", False))
        lines = ctx.store(node, write(flat), value)
        ctx.out.lines(["{", *(INDENT + line for line in statements + lines), "}"] if statements else lines)


def _prelu(ctx: _Ctx, node: Node) -> None:
    y, read = ctx.graph.tensors[node.output], ctx.ref(node.inputs[0])
    slope = literals(node.params["slope"])
    strides = np.array(broadcast_strides(node.params["slope"].shape, y.shape))
    write = ctx.ref(y.name)
    for flat, index in enumerate(_grid(y.shape)):
        value = f"({read(flat)} < 0.0f ? {slope[int(index @ strides)]} * {read(flat)} : {read(flat)})"
        ctx.out.lines(ctx.store(node, write(flat), value))


def _reduce(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    kind = node.attrs["kind"]
    kept, reduced, _ = reduce_parts(node, x)
    start, update, final = REDUCE[kind]
    read, write = ctx.ref(x.name), ctx.ref(node.output)
    strides = np.array(x.strides)
    inner = _grid(tuple(x.shape[k] for k in reduced)) @ strides[reduced] if reduced else np.zeros(1, dtype=int)
    outer = _grid(tuple(x.shape[k] for k in kept)) @ strides[kept] if kept else np.zeros(1, dtype=int)
    for flat, base in enumerate(outer):
        cells = [read(base + offset) for offset in inner]
        lines = []
        if kind == "logsumexp":
            lines += ["float m = -INFINITY;"] + [f"m = {c} > m ? {c} : m;" for c in cells]
        lines.append(f"acc = {start};")
        lines += [update.format(v=c) for c in cells]
        lines += ctx.store(node, write(flat), final.format(n=c_float(len(inner))))
        ctx.out.lines(["{", *(INDENT + line for line in lines), "}"] if kind == "logsumexp" else lines)


def _lrn(ctx: _Ctx, node: Node) -> None:
    x, a = ctx.graph.tensors[node.inputs[0]], node.attrs
    axis, size = a["axis"], a["size"]
    read, write = ctx.ref(x.name), ctx.ref(node.output)
    before, stride = (size - 1) // 2, x.strides[axis]
    scale = c_float(np.float32(a["alpha"]) / np.float32(size))
    for flat, index in enumerate(_grid(x.shape)):
        near = [flat + (j - before) * stride for j in range(size) if 0 <= index[axis] + j - before < x.shape[axis]]
        lines = ["acc = 0.0f;"] + [f"acc += {read(c)} * {read(c)};" for c in near]
        value = f"{read(flat)} * powf({c_float(a['bias'])} + {scale} * acc, {c_float(-a['beta'])})"
        ctx.out.lines(lines + ctx.store(node, write(flat), value))


def _slice(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    read, strides = ctx.ref(x.name), np.array(x.strides)
    starts, steps = np.array(node.attrs["starts"]), np.array(node.attrs["steps"])
    _copy_map(ctx, node, lambda index: read((starts + index * steps) @ strides))


def _resize(ctx: _Ctx, node: Node) -> None:
    x = ctx.graph.tensors[node.inputs[0]]
    read, strides = ctx.ref(x.name), np.array(x.strides)
    tables = {key: (literals(value) if value.dtype == np.float32 else value) for key, value in node.params.items()}

    def table(key: str, i: int, tap: int, taps: int):
        return tables[key][i * taps + tap]

    def source(index: np.ndarray) -> str:
        variables = [int(i) for i in index]
        if not all(int(inside) for inside in resize_inside(node, variables, table)):
            return c_float(node.attrs["extrapolation"])
        terms = []
        for factors, sources in resize_terms(node, variables, table):
            terms.append(" * ".join([str(f) for f in factors] + [read(np.array(sources, dtype=np.int64) @ strides)]))
        return " + ".join(terms)

    _copy_map(ctx, node, source)


def _concat(ctx: _Ctx, node: Node) -> None:
    y, axis, offset = ctx.graph.tensors[node.output], node.attrs["axis"], 0
    write = ctx.ref(y.name)
    for part in concat_parts(node):
        if "tensor" in part:
            shape, read = ctx.graph.tensors[part["tensor"]].shape, ctx.ref(part["tensor"])
        else:
            values = node.params[part["param"]]
            shape, read = values.shape, (lambda i, text=literals(values): text[int(i)])
        shift = np.zeros(len(y.shape), dtype=np.int64)
        shift[axis] = offset
        for flat, index in enumerate(_grid(shape)):
            ctx.out.lines(ctx.store(node, write((index + shift) @ np.array(y.strides)), read(flat)))
        offset += shape[axis]


def _view(ctx: _Ctx, node: Node) -> None:
    if node.attrs.get("copy"):
        read, write = ctx.ref(node.inputs[0]), ctx.ref(node.output)
        ctx.out.lines([f"{write(i)} = {read(i)};" for i in range(ctx.graph.tensors[node.output].size)])


WRITERS = {"Dense": _dense, "Conv2D": _conv, "ConvTranspose2D": _conv_transpose, "Pool2D": _pool,
           "GlobalPool2D": _global_pool, "BatchNorm": _batch_norm, "Activation": _activation, "Softmax": _softmax,
           "Transpose": _transpose, "Pad": _pad, "Gather": _gather, "Elementwise": _elementwise, "Concat": _concat,
           "View": _view, "PRelu": _prelu, "Reduce": _reduce, "LRN": _lrn, "Slice": _slice, "Resize": _resize,
           "Fused": lambda ctx, node: None}


def check_size(graph: Graph, max_macs: int) -> int:
    count = macs(graph)
    if count > max_macs:
        raise OverLimit(f"{graph.source}: assay-v3 would write {count:,} multiply-accumulate statements, above its "
                        f"limit of {max_macs:,}", "raise the limit (max_macs, --max-macs) to generate it anyway")
    return count


def write_inference(path: Path, graph: Graph, prefix: str, plan: MemoryPlan, headers: list[str],
                    banner: str) -> tuple[list[dict], str, str, list[str]]:
    """Stream the unrolled code to ``path``; return (manifest layer records, entry, signature, part functions)."""
    entry = f"{prefix}inference"
    signature = f"void {entry}(const float *input, float *output)"
    layers = []
    with open(path, "w") as handle:
        out = Stream(handle, prefix)
        out.comment(banner)
        out.line("#include <math.h>")
        for header in headers:
            out.line(f'#include "{header}"')
        out.line()
        if plan.arena_size:
            out.comment("intermediate tensors; offsets assigned by liveness (see manifest layers)")
            out.line(f"static float {plan.arena_symbol}[{plan.arena_size}];")
            out.line()
        ctx = _Ctx(out, graph, plan)
        out.open_part()
        for number, node in enumerate(graph.nodes):
            if number:
                out.line()
            note = f": {node.note}" if node.note else ""
            if node.op == "View":
                note = ": copy of the input" if node.attrs.get("copy") else ": reinterpretation of its input, no code"
            start, first_part = out.comment(f"layer {number}: {node.name} ({node.kind}) from {graph.source}{note}"), \
                out.part
            WRITERS[node.op](ctx, node)
            if node.act is not None and node.act.kind == "softmax":
                softmax(ctx, node.output, graph.tensors[node.output].shape[-1])
            layers.append({"index": number, "name": node.name, "op": node.kind, "function": first_part,
                           "lines": [start, out.line_number], "input_shapes": [list(s) for s in node.input_shapes],
                           "output_shape": list(node.output_shape), "loops": []})
        out.close_part()
        out.line(f"{signature} {{")
        out.depth += 1
        out.lines([f"{part}(input, output);" for part in out.parts])
        out.depth -= 1
        out.line("}")
    return layers, entry, signature, out.parts
