"""The generation manifest (schema ``assay-manifest/1``, docs/manifest.md)."""

from __future__ import annotations

import json
from pathlib import Path

from codegen.ir import Graph

SCHEMA = "assay-manifest/1"
FILE_NAME = "manifest.json"


def tensor_record(graph: Graph, tensor: str, name: str,
                  packed: list[tuple[str, tuple[int, ...], int]] | None = None) -> dict:
    """A buffer of the entry; a packed one (several inputs or outputs) lists its tensors and their offsets."""
    t = graph.tensors[tensor]
    record = {"name": name, "shape": list(t.shape), "layout": t.layout, "size": t.size, "dtype": "float32"}
    if packed:
        record["tensors"] = [{"name": source, "shape": list(shape), "offset": offset}
                             for source, shape, offset in packed]
    return record


def accumulation(graph: Graph, strategy: str) -> dict:
    """The order in which the code sums every dot product, for an oracle that bounds its rounding
    (docs/manifest.md): one float32 accumulator from 0.0, the products added one by one in ascending order of
    the contracted index (no fused multiply-add: targets compile with ``-ffp-contract=off``), the bias added
    last; a convolution's taps nested in ``conv_taps`` order (V1's library loops kh, kw, then the channel; V2
    and V3 follow the kernel's layout), a flattened image read in its layout's order (``flatten``)."""
    taps = {"HWI" if strategy == "v1" else node.attrs["kernel_layout"].replace("O", "")
            for node in graph.nodes if node.op == "Conv2D" and len(node.attrs["kernel_layout"]) == 4}
    flatten = {graph.tensors[node.inputs[0]].layout for node in graph.nodes
               if node.op == "View" and graph.tensors[node.inputs[0]].layout in ("HWC", "CHW")
               and len(graph.tensors[node.output].shape) == 1}
    return {"rule": "sequential", "conv_taps": sorted(taps), "flatten": sorted(flatten)}


def build(*, generator: dict, model: dict, prefix: str, entry: str, signature: str, c_file: str,
          graph: Graph, sources: list[str], headers: list[str], code_symbols: list[str],
          data_symbols: list[str], layers: list[dict], indirect_calls: list[dict] | None = None,
          accumulation: dict | None = None) -> dict:
    result = {
        "schema": SCHEMA,
        "generator": generator,
        "model": model,
        "prefix": prefix,
        "entry": {"symbol": entry, "signature": signature, "file": c_file},
        "inputs": [tensor_record(graph, graph.input, graph.input_name, graph.packed_inputs)],
        "outputs": [tensor_record(graph, graph.output, graph.output_name, graph.packed_outputs)],
        "sources": sources,
        "headers": headers,
        "symbols": {"code": code_symbols, "data": data_symbols},
        "layers": [_layer(record, c_file) for record in layers],
    }
    if accumulation:
        result["accumulation"] = accumulation
    if graph.quantization:
        result["quantization"] = {"rule": "fixed-point", **graph.quantization}
    if indirect_calls:
        result["indirect_calls"] = indirect_calls
    return result


def _layer(record: dict, c_file: str) -> dict:
    """The record in the documented key order; ``file`` defaults to the entry's file, extra keys follow."""
    keys = ("index", "name", "op", "function")
    out = {key: record[key] for key in keys}
    out["file"] = record.get("file", c_file)
    fixed = ("lines", "input_shapes", "output_shape", "loops")
    out.update({key: record[key] for key in fixed})
    out.update({key: value for key, value in record.items() if key not in out})
    return out


def write(manifest: dict, out_dir: Path) -> Path:
    path = Path(out_dir) / FILE_NAME
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path
