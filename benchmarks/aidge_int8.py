"""Benchmark: Eclipse Aidge's int8 path (its own PTQ and its int8 C++ export) measured beside Assay's integer
arbiter, for docs/peers.md, "The int8 path". Not a test: it asserts nothing, and it is not under the oracle (Aidge
cannot write the quantized graph as ONNX, so Assay has no independent model of it; docs/peers.md, I7).

Aidge's part runs in a scratch environment that holds ``aidge-quantization`` (the ``aidge`` peer environment does
not), given by ``--aidge-python``: it quantizes the model as ``ExportConfig(dtype="int8")`` does
(``quantize_graph``: int8 activations and weights, int32 biases, ``Clipping.MAX``, one power-of-two shift per
layer), runs the quantized graph on Aidge's CPU backend, exports it (``model_prequantized=True``) and reads the
output's LSB from the same PTQ with ``dequantize=True``. This process then compiles the export with g++, runs it,
and compares its int8 outputs with Aidge's graph, with an independent numpy model of the export's arithmetic (its
parameters read from the generated sources), layer by layer with the integer arbiter's two rules on the same
accumulators, and with ONNX Runtime on the float model (the quantization error).

    python3.11 -m venv /tmp/aidgeq && /tmp/aidgeq/bin/pip install aidge-core==0.10.1 aidge-onnx==0.10.1 \\
        aidge-backend-cpu==0.10.1 aidge-export-cpp==0.10.1 aidge-quantization==0.10.1
    python benchmarks/aidge_int8.py --aidge-python /tmp/aidgeq/bin/python [--model acas-reg50] [--inputs 1000]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime

from harness.core.plan import Settings, load_model
from harness.references.integer import multiply_by_quantized_multiplier, quantize_multiplier
from harness.references.onnxruntime_ref import session_options

AIDGE = """
import json, sys, numpy as np, aidge_core, aidge_onnx, aidge_backend_cpu, aidge_export_cpp, aidge_quantization as aq
from aidge_core.export_utils.config import ExportConfig
from aidge_core.export_utils.export import quantize_graph, quantize_inputs
aidge_core.Log.set_console_level(aidge_core.Level.Fatal)
model, out, shape, lo, hi, calibration = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), float(sys.argv[4]), \\
    float(sys.argv[5]), int(sys.argv[6])
rng = np.random.default_rng(0)
calib = [aidge_core.Tensor(rng.uniform(lo, hi, [1] + shape).astype(np.float32)) for _ in range(calibration)]
inputs = np.load(out + "/inputs_q.npy")

def quantized(**extra):
    graph = aidge_onnx.load_onnx(model)
    graph.set_backend("cpu")
    for t in calib:
        t.set_backend("cpu")
    aidge_core.expand_metaops(graph, name_format="{0}_{1}_{2}")
    if extra:
        aq.auto_assign_node_precision(graph, aidge_core.dtype.int8, aidge_core.dtype.int8, aidge_core.dtype.int32)
        aq.quantize_network(graph, calib, clipping_mode=aq.Clipping.MAX, single_shift=True, **extra)
    else:
        quantize_graph(graph, calib)
    for node, index in graph.get_ordered_inputs():
        node.get_operator().get_input(index).to_dtype(aidge_core.dtype.int8)
    return graph

def run(graph):
    scheduler, rows = aidge_core.SequentialScheduler(graph), []
    for q in inputs:
        tensor = aidge_core.Tensor(q.reshape([1] + shape).astype(np.int8))
        tensor.set_backend("cpu")
        scheduler.forward(True, [tensor])
        rows.append(np.array(graph.get_ordered_outputs()[0][0].get_operator().get_output(0)).ravel().copy())
    return np.array(rows)

graph = quantized()
np.save(out + "/aidge_cpu.npy", run(graph.clone()))
real = run(quantized(dequantize=True))
np.save(out + "/aidge_dequantized.npy", real)
aidge_core.export_utils.export(graph, ExportConfig(target="host", export_folder=out + "/export", dtype="int8",
    dformat="nc", compile=False, cuda=False, model_prequantized=True), quantize_inputs(calib[:1], "int8"))
"""

MAIN = """#include <stdio.h>
#include <stdint.h>
void model_forward(const int8_t *in, int8_t **out);
int main(void) { int8_t x[%(n_in)d]; int8_t *y; FILE *f = fopen("in.bin", "rb"), *g = fopen("out.bin", "wb");
  while (fread(x, 1, %(n_in)d, f) == %(n_in)d) { model_forward(x, &y); fwrite(y, 1, %(n_out)d, g); }
  fclose(g); return 0; }
"""


def parameters(export: Path, name: str) -> np.ndarray:
    """The integers of one parameter array of the export (``src/parameters/<name>.cpp``)."""
    text = (export / "dnn" / "src" / "parameters" / f"{name}.cpp").read_text()
    return np.array([int(v) for v in re.findall(r"-?\d+", text[text.index("{", text.index("=")) + 1:
                                                             text.rindex("}")])], np.int64)


def layers(export: Path) -> list[tuple[str, int, bool]]:
    """(name, shift S, ReLU) of each fully-connected layer in order, from the layer headers; refuses another kernel,
    as the numpy model below knows only this one."""
    found = []
    for header in sorted((export / "dnn" / "include" / "layers").glob("*.h"), key=lambda p: int(p.stem.split("_")[1])):
        text = header.read_text()
        if "_RESCALING" not in text:
            continue
        if not re.match(r"_\d+_(FCAct|QFC)_\d+$", header.stem):
            raise SystemExit(f"{header.name}: not a fully-connected layer; the numpy model knows only those")
        found.append((header.stem, int(re.search(r"SingleShiftScaling<(-?\d+)>", text).group(1)),
                      "Rectifier" in text))
    return found


def compare(export: Path, x: np.ndarray, c: np.ndarray) -> dict:
    """The export's arithmetic in int64 from its parameters (round half up, Aidge's ``SingleShiftScaling``), and,
    layer by layer from that model's own integer input, the arbiter's two rules on the same accumulators."""
    differ = {"fixed-point": 0, "onnxruntime": 0}
    count = 0
    found = layers(export)
    for name, shift, relu in found:
        bias = parameters(export, name + "_biases")
        acc = x @ parameters(export, name + "_weights").reshape(len(bias), -1).T + bias
        acc = np.maximum(acc, 0) if relu else acc
        aidge = np.clip((acc + (1 << (shift - 1))) >> shift, -128, 127)
        m0, exponent = quantize_multiplier(2.0 ** -shift)
        fixed = np.clip(multiply_by_quantized_multiplier(acc, m0, exponent), -128, 127)
        ort = np.clip(np.rint(acc.astype(np.float32) * np.float32(2.0 ** -shift)).astype(np.int64), -128, 127)
        differ["fixed-point"] += int((fixed != aidge).sum())
        differ["onnxruntime"] += int((ort != aidge).sum())
        count += acc.size
        x = aidge
    return {"numpy model vs C (values differing)": int((x != c).sum()),
            "shifts S (ReLU)": [f"{shift} ({'ReLU' if relu else 'linear'})" for _, shift, relu in found],
            "layer-local requantizations": count, "of them differing from the rule": differ}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aidge-python", required=True, help="a Python with aidge-quantization 0.10.1 and Aidge")
    parser.add_argument("--model", default="acas-reg50")
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--calibration", type=int, default=100, help="seeded calibration inputs (Aidge's NB_CALIB)")
    parser.add_argument("--keep", type=Path, help="copy Aidge's export folder here, for reading or cross-compiling")
    args = parser.parse_args()
    model = load_model(args.model, Settings())
    if len(model.input_shape) != 1 or not model.domain_is_uniform():
        raise SystemExit(f"{args.model}: a vector input on one interval is what this script (its numpy model of the "
                         "fully-connected kernel, Aidge's input scale 127) takes")
    low, high = (float(b) for b in model.input_domain)
    xs = np.random.default_rng(1).uniform(low, high, [args.inputs, *model.input_shape]).astype(np.float32)
    q = np.clip(np.round(xs * 127), -128, 127).astype(np.int8)  # Aidge's quantize_inputs
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        np.save(out / "inputs_q.npy", q)
        subprocess.run([args.aidge_python, "-c", AIDGE, str(model.file("onnx").resolve()), str(out),
                        json.dumps(list(model.input_shape)), str(low), str(high), str(args.calibration)],
                       cwd=out, check=True, stdout=subprocess.DEVNULL)  # Aidge writes a graph file where it runs
        export = out / "export"
        n_out = model.output_size
        (out / "main.c").write_text(MAIN % {"n_in": model.input_size, "n_out": n_out})
        subprocess.run(["g++", "-O0", "-std=c++17", "-ffp-contract=off", "-fno-exceptions", "-fno-rtti",
                        f"-I{export / 'dnn' / 'include'}", *map(str, (export / "dnn" / "src").rglob("*.cpp")),
                        "-x", "c", "main.c", "-o", "run"], cwd=out, check=True, capture_output=True)
        q.tofile(out / "in.bin")
        subprocess.run(["./run"], cwd=out, check=True)
        c = np.fromfile(out / "out.bin", np.int8).reshape(args.inputs, n_out).astype(np.int64)
        if args.keep:
            shutil.copytree(export, args.keep, dirs_exist_ok=True)
        graph = np.load(out / "aidge_cpu.npy").astype(np.int64)
        real = np.load(out / "aidge_dequantized.npy").astype(np.float64)
        figures = {"C vs Aidge's CPU backend (values differing)": int((c != graph).sum()), "values": int(c.size),
                   **compare(export, q.reshape(args.inputs, -1).astype(np.int64), c)}
    nonzero = c != 0
    lsb = float(np.median(real[nonzero] / c[nonzero]))
    session = onnxruntime.InferenceSession(str(model.file("onnx")), session_options())
    floats = session.run(None, {session.get_inputs()[0].name: xs})[0].reshape(args.inputs, -1)
    error = np.abs(c * lsb - floats) / lsb
    saturated = (c == 127) | (c == -128)
    figures.update({"output LSB": lsb, "quantization error, largest (LSB)": float(error.max()),
                    "saturated outputs": int(saturated.sum()),
                    "unsaturated: largest, median, 99th percentile (LSB)":
                        [float(error[~saturated].max()), float(np.median(error)), float(np.percentile(error, 99))],
                    "largest output agrees (inputs)": int((c.argmax(1) == floats.argmax(1)).sum())})
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
