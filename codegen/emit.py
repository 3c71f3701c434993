"""The V2 inference function: every layer's code inlined, in order, in one C function.

Each layer's code opens with a comment naming its source layer; the span of
lines and the loops written for it become the layer's manifest record.
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.cwriter import CWriter
from codegen.ir import Graph, Node
from codegen.layers import EMITTERS, Context, softmax_in_place
from codegen.memory import MemoryPlan


@dataclass(frozen=True)
class Inference:
    text: str
    layers: list[dict]  # manifest layer records (without the file name)
    entry: str
    signature: str


def write_inference(graph: Graph, prefix: str, plan: MemoryPlan, param_symbols: dict,
                    headers: list[str], banner: str) -> Inference:
    entry = f"{prefix}inference"
    signature = f"void {entry}(const float *input, float *output)"
    w = CWriter()
    w.comment(banner)
    w.line("#include <math.h>")
    if graph.quantization:
        w.line("#include <stdint.h>")
    for header in headers:
        w.line(f'#include "{header}"')
    w.line()
    if plan.arena_size or plan.integer_arenas:
        w.comment("intermediate tensors; offsets assigned by liveness (see manifest layers)")
        for line in plan.declarations():
            w.line(line)
        w.line()
    ctx = Context(w, graph, plan.buffers, param_symbols)
    layers = []
    producers = {node.output: number for number, node in enumerate(graph.nodes) if node.output is not None}
    with w.block(signature):
        for number, node in enumerate(graph.nodes):
            if number:
                w.line()
            layers.append(write_layer(ctx, number, node, producers, entry))
    return Inference(w.text(), layers, entry, signature)


def write_layer(ctx: Context, number: int, node: Node, producers: dict[str, int], function: str) -> dict:
    """The code of one layer at the writer's position, and its manifest record (shared with ``parallel``)."""
    w, graph = ctx.w, ctx.graph
    note = f": {node.note}" if node.note else ""
    if node.op == "View":
        note = ": copy of the input" if node.attrs.get("copy") else ": reinterpretation of its input, no code"
    start = w.comment(f"layer {number}: {node.name} ({node.kind}) from {graph.source}{note}")
    first_loop = len(w.loops)
    EMITTERS[node.op](ctx, node)
    if node.act is not None and node.act.kind == "softmax":
        out = graph.tensors[node.output]
        softmax_in_place(ctx, out, ctx.buffers[out.name], out.shape[-1])
    return {
        "index": number,
        "name": node.name,
        "op": node.kind,
        "function": function,
        "lines": [start, w.line_number],
        "inputs": [producers.get(tensor) for tensor in node.inputs],
        "input_shapes": [list(shape) for shape in node.input_shapes],
        "output_shape": list(node.output_shape),
        "loops": [loop.record() for loop in w.loops[first_loop:]],
        **({"output": output_record(ctx, node.output)} if node.output is not None else {}),
    }


def output_record(ctx: Context, tensor: str) -> dict:
    """Where the layer's output tensor is once the layer has run: the source model's tensor name, the C
    array (``output``, ``input`` or the arena) and the offset and size in floats, in the tensor's layout.
    The harness reads a layer's intermediate output from there (per-layer error against the reference)
    and knows which arena floats no tensor ever uses (padding a write must not reach). A quantized tensor
    adds its ``dtype``, ``scale`` and ``zero_point`` (offset and size then count its int8 or uint8 values)."""
    buffer, t = ctx.buffers[tensor], ctx.graph.tensors[tensor]
    record = {"tensor": tensor, "symbol": buffer.symbol, "offset": buffer.offset, "size": t.size,
              "shape": list(t.shape), "layout": t.layout}
    if t.quantized:
        record.update(dtype=t.dtype, scale=t.scale, zero_point=t.zero_point)
    return record


def write_header(prefix: str, signature: str, graph: Graph, banner: str) -> str:
    guard = f"{prefix.upper()}INFERENCE_H"
    x, y = graph.tensors[graph.input], graph.tensors[graph.output]
    return "\n".join([
        f"/* {banner} */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f"/* input: {x.size} floats, shape {list(x.shape)} in layout {x.layout}; "
        f"output: {y.size} floats, shape {list(y.shape)} in layout {y.layout} */",
        f"#define {prefix.upper()}INPUT_SIZE {x.size}",
        f"#define {prefix.upper()}OUTPUT_SIZE {y.size}",
        "",
        f"{signature};",
        "",
        f"#endif /* {guard} */",
        "",
    ])
