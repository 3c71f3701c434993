"""The MLPerf Tiny networks quantized to int8 (tier ``int8``), as MLPerf Tiny's reference deploys them:
post-training, full-integer, calibrated on a seeded representative set drawn from the model's input domain.

``<tiny name>-int8`` starts from the zoo's float model of the same seed (``harness.models.tiny``, built and
cached by ``zoo.load`` like any benchmark) and its ONNX export, then:

1. folds every ``BatchNormalization`` into the ``Conv`` or ``Gemm`` that feeds it, in float64 (TFLite's
   converter does the same; ONNX Runtime's ``quant_pre_process`` folds Conv + BN but not Gemm + BN, which would
   leave the autoencoder's nine batch norms as float ops between the integer layers);
2. removes the final ``Softmax``: the integer softmax has no common rule (TFLite uses a fixed-point lookup
   table, ONNX Runtime its own kernel), so the int8 model outputs the last Dense layer's logits (quantized, then
   ``DequantizeLinear``), which both define the same way;
3. quantizes with ONNX Runtime's ``quantize_static``: QDQ format, per-channel symmetric int8 weights, int8
   activations, int32 biases, MinMax calibration over ``CALIBRATION`` inputs uniform in the model's input domain
   from a generator seeded by the name and seed.

The graph keeps the float model's ABI: float32 inputs in the same domain (a ``QuantizeLinear`` inside) and
float32 outputs. The model has one ONNX file that generators and references read: the Keras model computes the
float network, not this one. The float network without its softmax is kept beside it as the model's
``FLOAT_COUNTERPART``, read only to report the quantization error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import numpy as np

from harness.models import tiny
from harness.models.model import Model

if TYPE_CHECKING:  # a cached load imports no onnx
    import onnx

BUILDER_VERSION = 2  # 2: the float counterpart (float.onnx) beside the int8 file
CALIBRATION = 64  # representative inputs whose activation ranges fix the activation scales (MinMax)
SUFFIX = "-int8"
NAMES = tuple(f"{name}{SUFFIX}" for name in tiny.NAMES)


def float_name(name: str) -> str:
    """The tiny-tier model that ``name`` quantizes."""
    return name.removesuffix(SUFFIX)


def fingerprint(name: str, seed: int) -> str:
    """A digest of everything that determines the int8 file of (name, seed): the float model's fingerprint, this
    module's source and the versions of the quantizer (ONNX Runtime) and of ``onnx``; imports neither."""
    from importlib.metadata import version

    spec = {"name": name, "seed": seed, "builder": BUILDER_VERSION, "float": tiny.fingerprint(float_name(name), seed),
            "source": hashlib.sha256(Path(__file__).read_bytes()).hexdigest(),
            "versions": [version(package) for package in ("onnxruntime", "onnx")]}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def quantize(name: str, seed: int, float_model: Model, path: Path, float_path: Path) -> Path:
    """Write ``path``: ``float_model``'s ONNX file with its batch norms folded, without its final softmax,
    quantized by ``quantize_static`` on the representative set of (name, seed) (``calibration_set``); and
    ``float_path``: the float network the int8 one stands for, ``float_model`` without its softmax and nothing
    folded (the model's ``FLOAT_COUNTERPART``, for its quantization error)."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    calibration = calibration_set(name, seed, float_model)
    graph = onnx.load(str(float_model.file("onnx")))
    drop_final_softmax(graph.graph)
    onnx.save(graph, str(float_path))
    fold_batch_norms(graph.graph)
    feed = graph.graph.input[0].name

    class Representative(CalibrationDataReader):
        """The whole representative set as one batch: MinMax keeps the extremes over it either way."""

        def __init__(self) -> None:
            self.batches = iter([{feed: calibration}])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.batches, None)

    with quiet_quantizer():
        quantize_static(graph, str(path), Representative(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        calibrate_method=CalibrationMethod.MinMax)
    return path


def calibration_set(name: str, seed: int, float_model: Model) -> np.ndarray:
    """``CALIBRATION`` inputs, each element uniform in its interval of ``float_model``'s input domain (as the
    semantic campaign draws them), from a generator seeded by the name and seed (not the float model's weight
    stream), in the ONNX file's layout."""
    from harness import tensors

    low, high = float_model.domain_bounds()
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    batch = rng.uniform(low, high, (CALIBRATION, *low.shape)).astype(np.float32)
    return tensors.convert(batch, float_model.layout, float_model.layouts_of("onnx")[0])


def fold_batch_norms(graph: onnx.GraphProto) -> None:
    """Fold each ``BatchNormalization`` into the ``Conv`` or ``Gemm`` (``transB=1``, as the exporter writes it) whose
    output only it reads: ``w' = w g``, ``b' = (b - mean) g + beta`` with ``g = scale / sqrt(var + epsilon)`` per
    output channel, computed in float64 and rounded once to float32."""
    from onnx import numpy_helper

    weights = {tensor.name: tensor for tensor in graph.initializer}
    producers = {output: node for node in graph.node for output in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    for bn in [node for node in graph.node if node.op_type == "BatchNormalization"]:
        layer = producers.get(bn.input[0])
        if layer is None or layer.op_type not in ("Conv", "Gemm") or readers[bn.input[0]] != 1 or len(layer.input) < 3:
            continue
        scale, beta, mean, variance = (numpy_helper.to_array(weights[name]).astype(np.float64) for name in bn.input[1:])
        epsilon = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        gain = scale / np.sqrt(variance + epsilon)
        kernel, bias = (numpy_helper.to_array(weights[name]).astype(np.float64) for name in layer.input[1:3])
        kernel = kernel * gain.reshape(-1, *(1,) * (kernel.ndim - 1))  # output channels first (Conv, Gemm transB=1)
        for name, value in ((layer.input[1], kernel), (layer.input[2], (bias - mean) * gain + beta)):
            weights[name].CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))
        layer.output[0] = bn.output[0]
        graph.node.remove(bn)
    used = {name for node in graph.node for name in node.input}
    for tensor in [t for t in graph.initializer if t.name not in used]:
        graph.initializer.remove(tensor)


def drop_final_softmax(graph: onnx.GraphProto) -> None:
    """Remove a ``Softmax`` that writes the graph's output: its input becomes the output (same name and shape)."""
    output = graph.output[0].name
    last = next(node for node in graph.node if output in node.output)
    if last.op_type != "Softmax":
        return
    producer = next(node for node in graph.node if last.input[0] in node.output)
    producer.output[list(producer.output).index(last.input[0])] = output
    graph.node.remove(last)


@contextlib.contextmanager
def quiet_quantizer() -> Iterator[None]:
    """The quantizer logs its advice (run ``quant_pre_process`` first) through the root logger: not for a zoo build."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)
