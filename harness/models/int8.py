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

``<tiny name>-int8-tflite`` is the same network as MLPerf Tiny's reference itself quantizes it (``to_tflite``):
the float Keras model, its final softmax made linear (logits, as above), converted by TensorFlow's
``TFLiteConverter`` full-integer (int8 input and output, ``TFLITE_BUILTINS_INT8``; the converter folds the batch
norms) on the same representative set as the QDQ form, then loaded through the ``.tflite`` model format
(``harness.models.tflite``: the file and its ONNX QOperator conversion). Its input and output are int8 integers
(docs/quantized.md, "Integer graph inputs and outputs"), so it has no float counterpart: a quantization error in
real units would need the input's real values, which the integer ABI does not carry.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import warnings
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
TFLITE_SUFFIX = f"{SUFFIX}-tflite"
TFLITE_NAMES = tuple(f"{name}{TFLITE_SUFFIX}" for name in tiny.NAMES)


def float_name(name: str) -> str:
    """The tiny-tier model that ``name`` quantizes (either form)."""
    return name.removesuffix(TFLITE_SUFFIX).removesuffix(SUFFIX)


def is_tflite(name: str) -> bool:
    """Whether ``name`` is the TensorFlow Lite form (``to_tflite``), else the ONNX QDQ one (``quantize``)."""
    return name.endswith(TFLITE_SUFFIX)


def fingerprint(name: str, seed: int) -> str:
    """A digest of everything that determines the int8 files of (name, seed): the float model's fingerprint, this
    module's source and the versions of the quantizer (ONNX Runtime; for the TFLite form TensorFlow and Keras, and
    the source of the ``.tflite`` conversion) and of ``onnx``; imports none of them."""
    from importlib.metadata import version

    sources = [Path(__file__)] + ([Path(__file__).with_name("tflite.py")] if is_tflite(name) else [])
    packages = ("tensorflow-cpu", "keras", "onnx") if is_tflite(name) else ("onnxruntime", "onnx")
    spec = {"name": name, "seed": seed, "builder": BUILDER_VERSION, "float": tiny.fingerprint(float_name(name), seed),
            "source": [hashlib.sha256(source.read_bytes()).hexdigest() for source in sources],
            "versions": [version(package) for package in packages]}
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


def to_tflite(name: str, seed: int, float_model: Model, path: Path) -> Path:
    """Write ``path``: ``float_model``'s Keras model with a final softmax made linear (the Dense keeps its weights:
    logits), converted by ``TFLiteConverter`` full-integer as MLPerf Tiny's reference does (``Optimize.DEFAULT``,
    the representative set of ``calibration_set``, ``TFLITE_BUILTINS_INT8``, int8 input and output)."""
    from harness.models.tf_runtime import keras, tensorflow

    k, tf = keras(), tensorflow()
    network = k.saving.load_model(str(float_model.file("keras")), compile=False)
    last = network.layers[-1]
    if getattr(last, "activation", None) is k.activations.softmax:
        last.activation = k.activations.linear  # read at call time: the converter's trace gives the logits
    calibration = calibration_set(name, seed, float_model, "keras")
    converter = tf.lite.TFLiteConverter.from_keras_model(network)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = lambda: ([sample[np.newaxis]] for sample in calibration)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    converter.inference_input_type = tf.int8
    converter.inference_output_type = tf.int8
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():  # Keras's export prints the saved
        warnings.simplefilter("ignore", UserWarning)  # model's signatures, the converter asks for input statistics
        path.write_bytes(converter.convert())
    return path


def calibration_set(name: str, seed: int, float_model: Model, fmt: str = "onnx") -> np.ndarray:
    """``CALIBRATION`` inputs, each element uniform in its interval of ``float_model``'s input domain (as the
    semantic campaign draws them), from a generator seeded by the QDQ form's name and seed (not the float model's
    weight stream; both forms of a network get the same set, so they differ by their quantizer alone), in the
    layout of ``float_model``'s ``fmt`` file."""
    from harness import tensors

    low, high = float_model.domain_bounds()
    rng = np.random.default_rng([seed, zlib.crc32(f"{float_name(name)}{SUFFIX}".encode())])
    batch = rng.uniform(low, high, (CALIBRATION, *low.shape)).astype(np.float32)
    return tensors.convert(batch, float_model.layout, float_model.layouts_of(fmt)[0])


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
