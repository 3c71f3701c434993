"""A support module (no tests): the two-dense-layer network the layer-local verdict is tested on, as an ONNX file
and as hand-written C in a ``dir:`` folder whose ``assay.json`` names both layers' output buffers.

fc1 (Gemm and ReLU into ``h``) reads 8 inputs, fc2 (Gemm into ``y``) 64. fc2's bias is 2^24 (ulp 2) and its
products are in [0, 1): the any-order end-to-end bound, about gamma_65 x 2^24 (about 65), hides any change of the
first layer's output below about 100, and an accumulator started from the bias loses every product (about 10 in
all), which only the declared order's local bound (about 1) sees. Used by the semantic stage's layer-local judge
(``tests/harness/core/test_layerlocal.py``) and by the mutation stage's (``tests/harness/stages/mutate``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Weights = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def weights() -> Weights:
    """w1, b1, w2, b2, seeded."""
    rng = np.random.default_rng(40)
    w1, b1 = rng.standard_normal((64, 8)).astype(np.float32), np.zeros(64, np.float32)
    w2, b2 = rng.uniform(0, 0.3, (3, 64)).astype(np.float32), np.full(3, 2.0 ** 24, np.float32)
    return w1, b1, w2, b2


def onnx_file(path: Path, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> Path:
    """The network as an ONNX file at ``path``."""
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["h"]),
             helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(a, n) for n, a in
                               (("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _array(name: str, values: np.ndarray) -> str:
    return f"static const float {name}[{values.size}] = {{{', '.join(f'{float(v)!r}f' for v in values.ravel())}}};"


def c_folder(root: Path, w1: np.ndarray, b1: np.ndarray, w2: np.ndarray, b2: np.ndarray, bias_first: bool = False,
             **manifest: object) -> Path:
    """The C of the network in ``root`` (made) with its ``assay.json`` (``manifest``: more keys of it); each layer's
    last line found by its marker. ``bias_first``: fc2 starts its accumulator from the bias instead of adding it
    last."""
    start = "b2[j]" if bias_first else "0.0f"
    end = "acc" if bias_first else "acc + b2[j]"
    source = "\n".join([
        _array("w1", w1), _array("b1", b1), _array("w2", w2), _array("b2", b2), "static float h[64];", "",
        "void net(const float *input, float *output)", "{",
        "    for (int j = 0; j < 64; j++) {  /* fc1 */",
        "        float acc = 0.0f;",
        "        for (int k = 0; k < 8; k++) acc += input[k] * w1[j * 8 + k];",
        "        acc += b1[j];",
        "        h[j] = acc > 0.0f ? acc : 0.0f;",
        "    }  /* end fc1 */",
        "    for (int j = 0; j < 3; j++) {  /* fc2 */",
        f"        float acc = {start};",
        "        for (int k = 0; k < 64; k++) acc += h[k] * w2[j * 64 + k];",
        f"        output[j] = {end};",
        "    }  /* end fc2 */",
        "}", ""])
    root.mkdir(parents=True)
    (root / "net.c").write_text(source)
    lines = source.splitlines()
    last = {name: next(n for n, line in enumerate(lines, 1) if f"end {name}" in line) for name in ("fc1", "fc2")}
    layers = [{"index": 0, "name": "fc1", "file": "net.c", "lines": [last["fc1"] - 5, last["fc1"]],
               "output": {"tensor": "h", "symbol": "h", "offset": 0, "size": 64, "shape": [64], "layout": "C"}},
              {"index": 1, "name": "fc2", "file": "net.c", "lines": [last["fc2"] - 4, last["fc2"]],
               "output": {"tensor": "y", "symbol": "output", "offset": 0, "size": 3, "shape": [3], "layout": "C"}}]
    (root / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 8, "output_size": 3,
                                                 "sources": ["net.c"], "layers": layers, **manifest}))
    return root
