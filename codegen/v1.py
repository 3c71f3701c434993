"""Strategy V1 (§3.2, Listings 1-2): a generic inference loop over an array of layer structs.

What is written:

* ``assay_v1_lib.h`` / ``assay_v1_lib.c``: the C library shared by every
  model (the same text whatever the model): ``struct assay_v1_layer`` and one
  function per layer type and per activation. Their loop bounds are fields of
  the struct (``layer->out_h``...), read at run time.
* ``<prefix>net.h``: the model as data, ``static const struct assay_v1_layer
  <prefix>net[N]`` with designated initialisers (Listing 1): ``layer_type``
  and ``actv_function`` are pointers to library functions, the other fields
  sizes, strides and pointers to the weights (``<prefix>params.c``, as V2).
* ``<prefix>inference.c``: the generic inference function (Listing 2): copy
  the input, then ``for`` every layer call ``net[i].layer_type`` and copy
  ``output_cur`` to ``output_pre``, then copy the result out. Two static
  buffers, sized for the largest tensor; no other memory.

Each layer function ends by calling ``layer->actv_function`` on the values it
wrote: the second kind of indirect call (the activation of Definition 14).

V1's loop passes one tensor from layer to layer, so it takes sequential
models only (every layer reads the previous one's output); Add, Concatenate
and Gather are refused with one line. Views (Flatten, Reshape...) have no
entry in ``net``: the buffers are contiguous, so they need no code.

The manifest describes the dispatch exactly (docs/manifest.md): for each call
through a pointer, its targets and ``sequence`` (the callee of the k-th
execution of that call site in one inference), and for each library loop,
per layer, the value its run-time bound takes in that call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from codegen.activations import EXPRESSIONS, hard_sigmoid
from codegen.cwriter import CWriter, Loop, c_float
from codegen.errors import UnsupportedModel
from codegen.ir import CONTRACTED, FUSED_OP, VIEW_OPS, Graph, Node, Tensor, row_major_strides
from codegen.layers import broadcast_strides, padded_counts

LIB = "assay_v1_lib"
STRUCT = "assay_v1_layer"
CALL_LAYER = "layer_type"
CALL_ACTIVATION = "actv_function"

# name, C type, comment: the struct's fields after the two pointers and before the weights
INT_FIELDS = (
    ("layer_size", "values the layer writes to output_cur (the copy loop's bound)"),
    ("out_h", "output axes; rank < 3 tensors get leading axes of 1 (Dense: rows, rows, outputs)"),
    ("out_w", None), ("out_c", None),
    ("in_h", "input axes (Conv2D, pooling: the spatial guards; Pad: the source)"),
    ("in_w", None), ("in_c", None),
    ("k_h", "window (Conv2D, pooling)"), ("k_w", None),
    ("k_n", "dot-product length (Dense), input channels per group (Conv2D)"),
    ("groups", "Conv2D: channel groups (1 without groups)"),
    ("group_out", "Conv2D: output channels per group (out_c without groups)"),
    ("stride_h", "window stride and dilation"), ("stride_w", None), ("dilation_h", None), ("dilation_w", None),
    ("count_pad", "average pooling: 1 divides by the window size, 0 by the cells inside the input"),
    ("softmax_outer", "softmax: blocks of softmax_stride groups of softmax_inner values softmax_stride apart, "
                      "each group normalised together"),
    ("softmax_inner", None), ("softmax_stride", None),
    ("x_k_stride", "Dense: input stride of the summed axis"),
)
ARRAY_FIELDS = (
    ("pad", 3, "Conv2D, pooling: top, left; Pad: first index per axis (negative crops)"),
    ("x_stride", 3, "input strides: per output axis (Dense, Transpose), per H, W, C (Conv2D, pooling)"),
    ("y_stride", 3, "output strides per H, W, C (Conv2D, pooling)"),
    ("w_stride", 4, "kernel strides: per output axis + summed axis (Dense), kh, kw, ic, oc (Conv2D); "
                    "per axis, broadcast (BatchNorm scale and shift)"),
    ("b_stride", 3, "bias strides per output axis (0: broadcast)"),
)
FLOAT_FIELDS = (("alpha", "Dense: alpha * sum + beta * bias"), ("beta", None),
                ("pad_value", "Pad: value of the cells outside the input"))


@dataclass
class LibFunction:
    name: str
    lines: tuple[int, int]
    loops: list[Loop]
    activation_call: int | None = None  # line of ``layer->actv_function(...)``, for layer functions


@dataclass
class Library:
    header: str
    source: str
    functions: dict[str, LibFunction] = field(default_factory=dict)


# ------------------------------------------------------------------ library

def _axis_nest(w: CWriter):
    return w.nest([("a", "layer->out_h"), ("b", "layer->out_w"), ("c", "layer->out_c")])


def _window(w: CWriter, body: list[str], inner=None) -> None:
    """Window loops of output (oh, ow) with padding guards; ``inner`` opens more loops around ``body``."""
    with w.loop("kh", "layer->k_h"):
        w.line("const int ih = oh * layer->stride_h + kh * layer->dilation_h - layer->pad[0];")
        with w.block("if (ih >= 0 && ih < layer->in_h)"):
            with w.loop("kw", "layer->k_w"):
                w.line("const int iw = ow * layer->stride_w + kw * layer->dilation_w - layer->pad[1];")
                with w.block("if (iw >= 0 && iw < layer->in_w)"):
                    if inner:
                        with inner():
                            for line in body:
                                w.line(line)
                    else:
                        for line in body:
                            w.line(line)


def _spatial_nest(w: CWriter):
    return w.nest([("oh", "layer->out_h"), ("ow", "layer->out_w"), ("oc", "layer->out_c")])


Y_SPATIAL = "output_cur[oh * layer->y_stride[0] + ow * layer->y_stride[1] + oc * layer->y_stride[2]]"
X_SPATIAL = "output_pre[ih * layer->x_stride[0] + iw * layer->x_stride[1] + {c} * layer->x_stride[2]]"
SIGNATURE = "void {name}(const struct assay_v1_layer *layer, const float *output_pre, float *output_cur)"
ACT_SIGNATURE = "void {name}(const struct assay_v1_layer *layer, float *values)"


def _layer_functions() -> dict[str, callable]:
    """Body writers of the layer functions, by name (each ends with the activation call)."""

    def dense(w: CWriter) -> None:
        with _axis_nest(w):
            w.line("const float *x = output_pre + a * layer->x_stride[0] + b * layer->x_stride[1] "
                   "+ c * layer->x_stride[2];")
            w.line("const float *k = layer->weights + a * layer->w_stride[0] + b * layer->w_stride[1] "
                   "+ c * layer->w_stride[2];")
            w.line("float acc = 0.0f;")
            with w.loop("i", "layer->k_n"):
                w.line("acc += x[i * layer->x_k_stride] * k[i * layer->w_stride[3]];")
            w.line("acc = layer->alpha * acc;")
            with w.block("if (layer->biases)"):
                w.line("acc = acc + layer->beta * layer->biases[a * layer->b_stride[0] + b * layer->b_stride[1] "
                       "+ c * layer->b_stride[2]];")
            w.line("output_cur[(a * layer->out_w + b) * layer->out_c + c] = acc;")

    def conv2d(w: CWriter) -> None:
        # output channel oc = g * group_out + j reads input channels g * k_n + ic: no division (a call on ARMv4)
        with w.nest([("oh", "layer->out_h"), ("ow", "layer->out_w"), ("g", "layer->groups"),
                     ("j", "layer->group_out")]):
            w.line("const int oc = g * layer->group_out + j;")
            w.line("const int gc = g * layer->k_n;")
            w.line("float acc = 0.0f;")
            _window(w, [f"acc += {X_SPATIAL.format(c='(gc + ic)')} * layer->weights[kh * layer->w_stride[0] + "
                        "kw * layer->w_stride[1] + ic * layer->w_stride[2] + oc * layer->w_stride[3]];"],
                    inner=lambda: w.loop("ic", "layer->k_n"))
            with w.block("if (layer->biases)"):
                w.line("acc = acc + layer->biases[oc];")
            w.line(f"{Y_SPATIAL} = acc;")

    def max_pool(w: CWriter) -> None:
        with _spatial_nest(w):
            w.line("float acc = -INFINITY;")
            _window(w, [f"const float v = {X_SPATIAL.format(c='oc')};", "acc = v > acc ? v : acc;"])
            w.line(f"{Y_SPATIAL} = acc;")

    def avg_pool(w: CWriter) -> None:
        with _spatial_nest(w):
            w.line("float acc = 0.0f;")
            w.line("float n = 0.0f;")
            _window(w, [f"acc += {X_SPATIAL.format(c='oc')};", "n += 1.0f;"])
            w.line(f"{Y_SPATIAL} = acc / (layer->count_pad ? (float)(layer->k_h * layer->k_w) : n);")

    def global_pool(kind: str):
        def body(w: CWriter) -> None:
            with w.loop("c", "layer->out_c"):
                w.line("float acc = -INFINITY;" if kind == "max" else "float acc = 0.0f;")
                with w.nest([("ih", "layer->in_h"), ("iw", "layer->in_w")]):
                    w.line(f"const float v = {X_SPATIAL.format(c='c')};")
                    w.line("acc = v > acc ? v : acc;" if kind == "max" else "acc += v;")
                w.line("output_cur[c] = " + ("acc;" if kind == "max"
                                             else "acc / (float)(layer->in_h * layer->in_w);"))
        return body

    def batch_norm(w: CWriter) -> None:
        with _axis_nest(w):
            w.line("const int e = (a * layer->out_w + b) * layer->out_c + c;")
            w.line("const int s = a * layer->w_stride[0] + b * layer->w_stride[1] + c * layer->w_stride[2];")
            w.line("output_cur[e] = output_pre[e] * layer->weights[s] + layer->biases[s];")

    def copy(w: CWriter) -> None:
        with w.loop("i", "layer->layer_size"):
            w.line("output_cur[i] = output_pre[i];")

    def pad(w: CWriter) -> None:
        with _axis_nest(w):
            w.line("const int i0 = a - layer->pad[0];")
            w.line("const int i1 = b - layer->pad[1];")
            w.line("const int i2 = c - layer->pad[2];")
            w.line("const int inside = i0 >= 0 && i0 < layer->in_h && i1 >= 0 && i1 < layer->in_w "
                   "&& i2 >= 0 && i2 < layer->in_c;")
            w.line("output_cur[(a * layer->out_w + b) * layer->out_c + c] = inside ? "
                   "output_pre[(i0 * layer->in_w + i1) * layer->in_c + i2] : layer->pad_value;")

    def transpose(w: CWriter) -> None:
        with _axis_nest(w):
            w.line("output_cur[(a * layer->out_w + b) * layer->out_c + c] = output_pre[a * layer->x_stride[0] "
                   "+ b * layer->x_stride[1] + c * layer->x_stride[2]];")

    return {"assay_v1_dense": dense, "assay_v1_conv2d": conv2d, "assay_v1_max_pool": max_pool,
            "assay_v1_avg_pool": avg_pool, "assay_v1_global_max_pool": global_pool("max"),
            "assay_v1_global_avg_pool": global_pool("avg"), "assay_v1_batch_norm": batch_norm,
            "assay_v1_activation": copy, "assay_v1_copy": copy, "assay_v1_pad": pad,
            "assay_v1_transpose": transpose}


P0, P1, P2 = "layer->act_params[0]", "layer->act_params[1]", "layer->act_params[2]"
# Activations whose expression reads parameters: the library reads them from act_params.
PARAMETRISED = {
    "clip": f"(v < {P0} ? ({P0} > {P1} ? {P1} : {P0}) : (v > {P1} ? {P1} : v))",
    "hard_sigmoid": hard_sigmoid("v", P0, P1),
    "hard_swish": f"v * {hard_sigmoid('v', P0, P1)}",
    "leaky_relu": f"(v > 0.0f ? v : {P0} * v)",
    "keras_relu": f"(v > {P2} ? (v > {P1} ? {P1} : (v > 0.0f ? v : 0.0f)) : {P0} * (v - {P2}))",
    "elu": f"(v > 0.0f ? v : {P0} * expm1f(v))",
    "selu": f"(v > 0.0f ? {P1} * v : {P1} * ({P0} * expm1f(v)))",
}
# Activations served by another library function with fixed parameters.
ALIASES = {"relu6": ("clip", (0.0, 6.0))}
PLAIN = ("relu", "tanh", "sigmoid", "softplus", "softsign", "silu", "exponential", "keras_hard_sigmoid",
         "keras_hard_silu", "log", "sqrt", "neg", "abs", "reciprocal", "gelu", "gelu_tanh")


def activation_function(kind: str) -> str:
    return f"assay_v1_{ALIASES.get(kind, (kind,))[0]}"


def library() -> Library:
    """The shared C library, written with line and loop records (the same text for every model)."""
    w = CWriter()
    banner = "assay-v1 layer library (ACETONE strategy V1, shared by every model); generated, do not edit."
    w.comment(banner)
    w.line("#include <math.h>")
    w.line(f'#include "{LIB}.h"')
    functions: dict[str, LibFunction] = {}

    def function(name: str, signature: str, body, activation: bool) -> None:
        w.line()
        start = w.line(f"{signature.format(name=name)} {{")
        w.depth += 1
        first = len(w.loops)
        body(w)
        call = w.line(f"layer->{CALL_ACTIVATION}(layer, output_cur);") if activation else None
        w.depth -= 1
        end = w.line("}")
        functions[name] = LibFunction(name, (start, end), w.loops[first:], call)

    for name, body in _layer_functions().items():
        function(name, SIGNATURE, body, activation=name != "assay_v1_copy")

    def elementwise(expression: str):
        def body(w: CWriter) -> None:
            with w.loop("i", "layer->layer_size"):
                w.line("const float v = values[i];")
                w.line(f"values[i] = {expression};")
        return body

    def linear(w: CWriter) -> None:
        w.line("(void)layer;")
        w.line("(void)values;")

    def softmax(log: bool):
        def body(w: CWriter) -> None:
            with w.nest([("r", "layer->softmax_outer"), ("q", "layer->softmax_stride")]):
                w.line("float *block = values + r * layer->softmax_inner * layer->softmax_stride + q;")
                w.line("float m = -INFINITY;")
                w.line("float s = 0.0f;")
                at = "block[k * layer->softmax_stride]"
                with w.loop("k", "layer->softmax_inner"):
                    w.line(f"m = {at} > m ? {at} : m;")
                with w.loop("k", "layer->softmax_inner"):
                    w.line(f"const float e = expf({at} - m);")
                    if not log:
                        w.line(f"{at} = e;")
                    w.line("s += e;")
                with w.loop("k", "layer->softmax_inner"):
                    w.line(f"{at} = ({at} - m) - logf(s);" if log else f"{at} = {at} / s;")
        return body

    activations = {"assay_v1_linear": linear, "assay_v1_softmax": softmax(False),
                   "assay_v1_log_softmax": softmax(True)}
    activations.update({f"assay_v1_{kind}": elementwise(EXPRESSIONS[kind]("v", ())) for kind in PLAIN})
    activations.update({f"assay_v1_{kind}": elementwise(expr) for kind, expr in PARAMETRISED.items()})
    for name, body in activations.items():
        function(name, ACT_SIGNATURE, body, activation=False)
    return Library(_header(functions), w.text(), functions)


def _header(functions: dict[str, LibFunction]) -> str:
    guard = "ASSAY_V1_LIB_H"
    lines = ["/* assay-v1 layer library: the layer struct (Listing 1) and the functions it points to. */",
             f"#ifndef {guard}", f"#define {guard}", "", f"struct {STRUCT} {{",
             f"    void (*{CALL_LAYER})(const struct {STRUCT} *layer, const float *output_pre, float *output_cur);",
             f"    void (*{CALL_ACTIVATION})(const struct {STRUCT} *layer, float *values);"]
    for name, comment in INT_FIELDS:
        lines.append(f"    int {name};" + (f" /* {comment} */" if comment else ""))
    for name, size, comment in ARRAY_FIELDS:
        lines.append(f"    int {name}[{size}]; /* {comment} */")
    for name, comment in FLOAT_FIELDS:
        lines.append(f"    float {name};" + (f" /* {comment} */" if comment else ""))
    lines += ["    float act_params[3]; /* activation parameters (slope, bounds, alpha...) */",
              "    const float *weights; /* kernel, or BatchNorm scale */",
              "    const float *biases; /* bias, or BatchNorm shift; NULL when none */",
              "};", ""]
    for name in functions:
        signature = ACT_SIGNATURE if name in _activation_names() else SIGNATURE
        lines.append(f"{signature.format(name=name)};")
    lines += ["", f"#endif /* {guard} */", ""]
    return "\n".join(lines)


def _activation_names() -> set[str]:
    return {"assay_v1_linear", "assay_v1_softmax", "assay_v1_log_softmax",
            *(f"assay_v1_{k}" for k in (*PLAIN, *PARAMETRISED))}


# ---------------------------------------------------------------- the model

def _pad3(values, fill) -> list:
    values = list(values)
    return [fill] * (3 - len(values)) + values


def _fields(graph: Graph, node: Node) -> tuple[str, dict]:
    """The library function of ``node`` and the struct fields it reads."""
    y = graph.tensors[node.output]
    x = graph.tensors[node.inputs[0]] if node.inputs else None
    out3 = _pad3(y.shape, 1)
    fields: dict = {"layer_size": y.size, "out_h": out3[0], "out_w": out3[1], "out_c": out3[2]}
    if node.op == "Dense":
        return "assay_v1_dense", {**fields, **_dense_fields(x, y, node)}
    if node.op in ("Conv2D", "Pool2D"):
        a = node.attrs
        fields.update(out_h=y.dim("H"), out_w=y.dim("W"), out_c=y.dim("C"), in_h=x.dim("H"), in_w=x.dim("W"),
                      k_h=a["kernel"][0], k_w=a["kernel"][1], stride_h=a["strides"][0], stride_w=a["strides"][1],
                      dilation_h=a["dilations"][0], dilation_w=a["dilations"][1], pad=[a["pads"][0], a["pads"][1], 0],
                      x_stride=[x.strides[x.axis(k)] for k in "HWC"], y_stride=[y.strides[y.axis(k)] for k in "HWC"])
        if node.op == "Conv2D":
            layout, group = a["kernel_layout"], a.get("group", 1)
            dims = {"H": a["kernel"][0], "W": a["kernel"][1], "I": x.dim("C") // group, "O": y.dim("C")}
            strides = row_major_strides(tuple(dims[k] for k in layout))
            fields.update(k_n=dims["I"], groups=group, group_out=y.dim("C") // group,
                          w_stride=[strides[layout.index(k)] for k in "HWIO"],
                          weights=("kernel",), biases=("bias",) if "bias" in node.params else None)
            return "assay_v1_conv2d", fields
        if a["kind"] == "max":
            return "assay_v1_max_pool", fields
        count = any(lo or hi for lo, hi in _reach(node, x, y)) and not a.get("count_include_pad", False)
        if not count and any(n < k for counts, k in zip(padded_counts(node, x, y).values(), a["kernel"])
                             for n in counts):
            raise UnsupportedModel(f"{graph.source}: layer '{node.name}' ({node.kind}) counts the padding "
                                   "(count_include_pad) with ceil_mode windows past it, which assay-v1's layer "
                                   "struct cannot describe; use assay-v2 or assay-v3")
        return "assay_v1_avg_pool", {**fields, "count_pad": 0 if count else 1}
    if node.op == "GlobalPool2D":
        fields.update(out_c=x.dim("C"), in_h=x.dim("H"), in_w=x.dim("W"),
                      x_stride=[x.strides[x.axis(k)] for k in "HWC"])
        return f"assay_v1_global_{node.attrs['kind']}_pool", fields
    if node.op == "BatchNorm":
        channel = [0] * 3
        channel[3 - len(y.shape) + y.axis("C")] = 1
        return "assay_v1_batch_norm", {**fields, "w_stride": channel + [0], "weights": ("scale",),
                                       "biases": ("shift",)}
    if node.op in ("Activation", "Softmax"):
        return "assay_v1_activation", fields
    if node.op == "View":
        return "assay_v1_copy", fields
    if node.op == "Pad":
        begins = [begin for begin, _ in node.attrs["pads"]]
        in3 = _pad3(x.shape, 1)
        return "assay_v1_pad", {**fields, "in_h": in3[0], "in_w": in3[1], "in_c": in3[2],
                                "pad": _pad3(begins, 0), "pad_value": node.attrs["value"]}
    if node.op == "Transpose":
        return "assay_v1_transpose", {**fields, "x_stride": _pad3([x.strides[p] for p in node.attrs["perm"]], 0)}
    raise KeyError(node.op)


def _reach(node: Node, x: Tensor, y: Tensor):
    from codegen.layers import _reach as reach

    return reach(node, x, y).values()


def _dense_fields(x: Tensor, y: Tensor, node: Node) -> dict:
    kernel = node.params["kernel"]
    lead = 3 - len(y.shape)
    x_stride, w_stride, x_k, w_k = [0, 0, 0], [0, 0, 0], 0, 0
    for axis, stride in zip(node.attrs["x_axes"], x.strides):
        if axis == CONTRACTED:
            x_k = stride
        elif axis is not None:
            x_stride[lead + axis] = stride
    for axis, stride in zip(node.attrs["w_axes"], row_major_strides(kernel.shape)):
        if axis == CONTRACTED:
            w_k = stride
        elif axis is not None:
            w_stride[lead + axis] = stride
    fields = {"k_n": kernel.shape[node.attrs["w_axes"].index(CONTRACTED)], "x_stride": x_stride, "x_k_stride": x_k,
              "w_stride": w_stride + [w_k], "alpha": node.attrs.get("alpha", 1.0),
              "beta": node.attrs.get("beta", 1.0), "weights": ("kernel",), "biases": None}
    if "bias" in node.params:
        fields["biases"] = ("bias",)
        fields["b_stride"] = _pad3(broadcast_strides(node.params["bias"].shape, y.shape), 0)
    return fields


def _activation_fields(node: Node, y: Tensor) -> tuple[str, dict]:
    """The ``actv_function`` of ``node`` and its parameters (softmax: over the last axis, or ``inner``)."""
    act = node.attrs["act"] if node.op == "Activation" else node.act
    if node.op == "Softmax":
        inner, stride = node.attrs["inner"], node.attrs.get("stride", 1)
        function = "assay_v1_log_softmax" if node.attrs.get("log") else "assay_v1_softmax"
        return function, {"softmax_inner": inner, "softmax_outer": y.size // (inner * stride), "softmax_stride": stride}
    if act is None or act.kind == "linear":
        return "assay_v1_linear", {}
    if act.kind == "softmax":
        inner = y.shape[-1]
        return "assay_v1_softmax", {"softmax_inner": inner, "softmax_outer": y.size // inner, "softmax_stride": 1}
    kind, params = ALIASES.get(act.kind, (act.kind, act.params))
    if act.kind == "keras_relu":
        slope, high, threshold = act.params
        params = (slope, float("inf") if high is None else high, threshold)
    return f"assay_v1_{kind}", {"act_params": list(params)} if params else {}


@dataclass(frozen=True)
class V1Layer:
    node: Node
    function: str
    activation: str
    fields: dict


def sequence(graph: Graph) -> list[V1Layer]:
    """The layers of ``net`` in order, or ``UnsupportedModel`` when the graph is not a chain."""
    views = {n.output: n.inputs[0] for n in graph.nodes if n.op in VIEW_OPS}

    def root(tensor: str) -> str:
        while tensor in views:
            tensor = views[tensor]
        return tensor

    if graph.packed_inputs or graph.packed_outputs:
        raise UnsupportedModel(f"{graph.source}: the model has {len(graph.packed_inputs)} inputs and "
                               f"{len(graph.packed_outputs)} outputs; assay-v1's layer chain reads one input and "
                               "writes one output; use assay-v2 or assay-v3")
    computing = [n for n in graph.nodes if n.op not in VIEW_OPS and n.op != FUSED_OP]
    if not computing:  # the output only reinterprets the input: its last view copies
        computing = [graph.producer(graph.output)]
        views.pop(graph.output)
    supported = set(_layer_functions_ops())
    current, layers = graph.input, []
    for node in computing:
        if node.op not in supported:
            raise UnsupportedModel(f"{graph.source}: layer '{node.name}' ({node.kind}) is not supported by "
                                   "assay-v1; use assay-v2 or assay-v3")
        if max(len(graph.tensors[t].shape) for t in [*node.inputs, node.output]) > 3:
            raise UnsupportedModel(f"{graph.source}: layer '{node.name}' ({node.kind}) has a tensor of rank above 3; "
                                   "assay-v1's layer struct describes at most 3 axes; use assay-v2 or assay-v3")
        if len(node.inputs) != 1 or root(node.inputs[0]) != current:
            raise UnsupportedModel(f"{graph.source}: layer '{node.name}' ({node.kind}) does not read the previous "
                                   "layer's output; assay-v1's inference loop (Listing 2) passes one tensor from "
                                   "layer to layer, so it takes sequential models only")
        function, fields = _fields(graph, node)
        activation, act_fields = _activation_fields(node, graph.tensors[node.output])
        layers.append(V1Layer(node, function, activation, {**fields, **act_fields}))
        current = node.output
    if root(graph.output) != current:
        raise UnsupportedModel(f"{graph.source}: the model's output is not the last layer's; assay-v1 takes "
                               "sequential models only")
    return layers


def _layer_functions_ops() -> tuple[str, ...]:
    return ("Dense", "Conv2D", "Pool2D", "GlobalPool2D", "BatchNorm", "Activation", "Softmax", "View", "Pad",
            "Transpose")


# ------------------------------------------------------------- the C files

@dataclass(frozen=True)
class V1Code:
    net_header: str
    inference: str
    layers: list[dict]  # manifest layer records
    indirect_calls: list[dict]
    code_symbols: list[str]
    data_symbols: list[str]


def _initialiser(fields: dict, param_symbols: dict, node: Node) -> list[str]:
    out = []
    for key, value in fields.items():
        if key in ("weights", "biases"):
            value = "0" if value is None else param_symbols[(id(node), value[0])]
        elif isinstance(value, (list, tuple)):
            value = "{" + ", ".join(_value(key, v) for v in value) + "}"
        else:
            value = _value(key, value)
        out.append(f".{key} = {value}")
    return out


def _value(key: str, value) -> str:
    floats = {name for name, _ in FLOAT_FIELDS} | {"act_params"}
    return c_float(value) if key in floats else str(int(value))


def write(graph: Graph, layers: list[V1Layer], prefix: str, lib: Library, param_symbols: dict, param_header: str,
          banner: str, c_file: str, h_file: str) -> V1Code:
    """The net table, the inference function and their manifest records for the chain ``layers``."""
    entry, net = f"{prefix}inference", f"{prefix}net"
    net_file = f"{prefix}net.h"

    # <prefix>net.h: Listing 1
    nh = CWriter()
    nh.comment(banner)
    nh.line(f"#ifndef {prefix.upper()}NET_H")
    nh.line(f"#define {prefix.upper()}NET_H")
    nh.line("#include <math.h>")
    nh.line(f'#include "{LIB}.h"')
    nh.line(f'#include "{param_header}"')
    nh.line()
    spans: dict[int, tuple[int, int]] = {}
    by_node = {id(layer.node): k for k, layer in enumerate(layers)}
    with nh.block(f"static const struct {STRUCT} {net}[{len(layers)}] ="):
        for number, node in enumerate(graph.nodes):
            note = f": {node.note}" if node.note else ""
            if id(node) not in by_node:
                note = note or ": reinterpretation of its input, no entry in net"
            start = nh.comment(f"layer {number}: {node.name} ({node.kind}) from {graph.source}{note}")
            if id(node) in by_node:
                k = by_node[id(node)]
                layer = layers[k]
                nh.line(f"[{k}] = {{")
                nh.depth += 1
                nh.line(f".{CALL_LAYER} = {layer.function},")
                nh.line(f".{CALL_ACTIVATION} = {layer.activation},")
                for item in _initialiser(layer.fields, param_symbols, node):
                    nh.line(item + ",")
                nh.depth -= 1
                nh.line("},")
            spans[number] = (start, nh.line_number)
    nh.lines[-1] += ";"
    nh.line()
    nh.line(f"#endif /* {prefix.upper()}NET_H */")

    # <prefix>inference.c: Listing 2
    x, y = graph.tensors[graph.input], graph.tensors[graph.output]
    biggest = max([x.size] + [layer.fields["layer_size"] for layer in layers])
    w = CWriter()
    w.comment(banner)
    w.line(f'#include "{h_file}"')
    w.line(f'#include "{net_file}"')
    w.line()
    w.comment("the two buffers of Listing 2, sized for the largest tensor")
    w.line(f"static float {prefix}output_pre[{biggest}];")
    w.line(f"static float {prefix}output_cur[{biggest}];")
    w.line()
    signature = f"void {entry}(const float *input, float *output)"
    pre, cur = f"{prefix}output_pre", f"{prefix}output_cur"
    with w.block(signature):
        start = w.line_number
        with w.loop("j", x.size):
            w.line(f"{pre}[j] = input[j];")
        with w.loop("i", len(layers)):
            call = w.line(f"{net}[i].{CALL_LAYER}(&{net}[i], {pre}, {cur});")
            with w.loop("j", f"{net}[i].layer_size") as copy_loop:
                w.line(f"{pre}[j] = {cur}[j];")
        with w.loop("j", y.size):
            w.line(f"output[j] = {pre}[j];")
    end = w.line_number
    sizes = [layer.fields["layer_size"] for layer in layers]
    entry_loops = []
    for loop in w.loops:
        record = loop.record()
        if loop is copy_loop:
            record.update(bound=max(sizes), bound_expr=loop.bound, bounds=sizes)
        entry_loops.append({**record, "function": entry, "file": c_file})

    # manifest: layers, dispatch
    records, next_id = [], [0]

    def renumber(loops: list[Loop], values: dict, function: str) -> list[dict]:
        ids = {}
        out = []
        for loop in loops:
            ids[loop.id] = f"L{next_id[0]}"
            next_id[0] += 1
            bound = _bound(loop.bound, values)
            out.append({"id": ids[loop.id], "var": loop.var, "bound": bound, "line": loop.line,
                        "parent": ids.get(loop.parent), "bound_expr": loop.bound, "function": function,
                        "file": f"{LIB}.c"})
        return out

    for number, node in enumerate(graph.nodes):
        record = {"index": number, "name": node.name, "op": node.kind,
                  "input_shapes": [list(s) for s in node.input_shapes], "output_shape": list(node.output_shape)}
        if id(node) in by_node:
            layer = layers[by_node[id(node)]]
            lib_fn, act_fn = lib.functions[layer.function], lib.functions[layer.activation]
            record.update(function=layer.function, file=f"{LIB}.c", lines=list(lib_fn.lines),
                          loops=renumber(lib_fn.loops, layer.fields, layer.function)
                          + renumber(act_fn.loops, layer.fields, layer.activation),
                          net_index=by_node[id(node)], layer_type=layer.function, actv_function=layer.activation,
                          net_lines=list(spans[number]), shared_code=True)
        else:
            record.update(function=entry, file=net_file, lines=list(spans[number]), loops=[])
        records.append(record)
    ids = {}
    for loop in entry_loops:
        ids[loop["id"]] = f"L{next_id[0]}"
        next_id[0] += 1
    for loop in entry_loops:
        loop["id"], loop["parent"] = ids[loop["id"]], ids.get(loop["parent"])
    records.append({"index": len(graph.nodes), "name": "(inference loop)", "op": "InferenceLoop",
                    "function": entry, "file": c_file, "lines": [start, end], "input_shapes": [list(x.shape)],
                    "output_shape": list(y.shape), "loops": entry_loops})

    calls = [{"function": entry, "file": c_file, "line": call, "expression": f"{net}[i].{CALL_LAYER}",
              "table": net, "targets": sorted({layer.function for layer in layers}),
              "sequence": [layer.function for layer in layers]}]
    for function in dict.fromkeys(layer.function for layer in layers):
        site = lib.functions[function].activation_call
        if site is None:
            continue
        acts = [layer.activation for layer in layers if layer.function == function]
        calls.append({"function": function, "file": f"{LIB}.c", "line": site,
                      "expression": f"layer->{CALL_ACTIVATION}", "targets": sorted(set(acts)), "sequence": acts})
    return V1Code(net_header=nh.text(), inference=w.text(), layers=records, indirect_calls=calls,
                  code_symbols=[entry, *lib.functions], data_symbols=[net, pre, cur])


def _bound(expression: str, values: dict) -> int:
    """The value of a library loop bound ``layer->field`` for one layer."""
    name = expression.removeprefix("layer->")
    return int(values.get(name, 0))
