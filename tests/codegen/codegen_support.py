"""Helpers for the code generator's tests: compile strictly, run, seed, draw inputs, references.

Generated C runs through the harness's host runner (``run_generated``); the
reference is the source framework itself (Keras ``model(x, training=False)``,
onnxruntime with graph optimisations off, one thread, fed one input at a time,
without a batch axis when the model's input has none). Inputs are uniform in
[-1, 1] from a fixed seed; the tolerance is 1e-5 absolute (keras2c's and
Assay's default).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

TOLERANCE = 1e-5
N_INPUTS = 16
SEED = 0
STRICT_FLAGS = ["-O0", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-ffp-contract=off"]


@dataclass
class Generated:
    manifest: dict
    directory: Path
    max_error: float
    outputs: np.ndarray

    def source(self, name: str | None = None) -> str:
        return (self.directory / (name or self.manifest["entry"]["file"])).read_text()


def run_c(directory: Path, inputs: np.ndarray) -> np.ndarray:
    from harness.runners.host import run_generated

    return run_generated(directory, inputs.reshape(len(inputs), -1))


def compile_strict(directory: Path, build: Path) -> list[Path]:
    """Compile every listed source warning-free (-Werror) with the manifest directory as cwd."""
    manifest = json.loads((directory / "manifest.json").read_text())
    build.mkdir(parents=True, exist_ok=True)
    objects = []
    for source in manifest["sources"]:
        obj = build / (Path(source).stem + ".o")
        result = subprocess.run(["gcc", *STRICT_FLAGS, "-fPIC", f"-I{directory}", "-c", source, "-o", str(obj)],
                                cwd=directory, capture_output=True, text=True, check=False)
        assert result.returncode == 0, f"{source}:\n{result.stderr}"
        objects.append(obj)
    return objects


def seed_weights(model, seed: int = SEED, scale: float = 0.5) -> None:
    """Non-zero weights and biases everywhere; positive, non-trivial variances for batch norm."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = []
        for weight in layer.weights:
            shape = tuple(weight.shape)
            if "variance" in weight.path:
                values.append(rng.uniform(0.5, 2.0, shape))
            elif "mean" in weight.path:
                values.append(rng.uniform(-0.5, 0.5, shape))
            else:
                values.append(rng.uniform(-scale, scale, shape))
        if values:
            layer.set_weights([v.astype(np.float32) for v in values])


def draw_inputs(shape: tuple[int, ...], n: int = N_INPUTS, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(SEED).uniform(low, high, (n, *shape)).astype(np.float32)


def onnx_reference(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    first = session.get_inputs()[0]
    unbatched = len(first.shape) == x.ndim - 1  # an input without a batch axis (docs/zoo.md)
    return np.concatenate([session.run(None, {first.name: x[k] if unbatched else x[k:k + 1]})[0].reshape(1, -1)
                           for k in range(len(x))])


def called_functions(c_text: str) -> set[str]:
    """Identifiers written as calls in C text, keywords and the entry's own definition excluded."""
    body = re.sub(r"/\*.*?\*/", "", c_text, flags=re.S)
    calls = set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", body))
    return calls - {"for", "if", "while", "switch", "return", "sizeof"}


# --- ONNX graphs for the ONNX front end's tests ---------------------------------------------------

OPSET = 17  # the opset of Net's models unless a test names another


class Net:
    """A tiny ONNX graph builder: input 'input' with a symbolic batch axis (or none), seeded initializers."""

    def __init__(self, input_shape, seed=0, batch=True):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.input_shape = ["N", *input_shape] if batch else list(input_shape)
        self.count = 0

    def param(self, shape, low=-0.5, high=0.5, values=None):
        self.count += 1
        name = f"p{self.count}"
        array = np.asarray(values) if values is not None else self.rng.uniform(low, high, shape).astype(np.float32)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.count += 1
        out = f"t{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"{op_type.lower()}_{self.count}",
                                           **attrs))
        return out

    def model(self, output, opset=OPSET):
        graph = helper.make_graph(
            self.nodes, "net",
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, self.input_shape)],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def conv(net, x, c_in, c_out, kernel, bias=True, **attrs):
    weight = net.param((c_out, c_in, *kernel))
    inputs = [x, weight] + ([net.param((c_out,))] if bias else [])
    return net.op("Conv", inputs, **attrs)


