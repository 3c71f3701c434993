"""The MLPerf Tiny networks quantized to int8 (tier ``int8``, ``harness.models.int8``): four ONNX QDQ models built
from the tiny tier's float models, deterministically, with int8 weights, batch norms folded and no softmax; the
fold and the softmax's removal keep the float network's meaning; the autoencoder's integer C passes the semantic
campaign bit for bit against the integer arbiter. The two large networks (ResNet-8, MobileNetV1) build their
float models first: ``--run-slow``. The TensorFlow Lite form (``<name>-int8-tflite``): TFLiteConverter's file, loaded
by the ``.tflite`` format, its ONNX conversion bit for bit with LiteRT under the arbiter's ``litert`` rule; DS-CNN's
in the default run (about 10 s after its float model), the other three ``--run-slow``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from harness import tensors
from harness.models import int8, tiny, zoo
from harness.models.model import FLOAT_COUNTERPART, file_sha256
from harness.references import integer
from harness.references.litert_ref import LiteRtReference

SMALL = ["fc-autoencoder-int8", "ds-cnn-int8"]
LARGE = [pytest.param(name, marks=pytest.mark.slow) for name in ("resnet8-int8", "mobilenet-vww-int8")]
TFLITE = ["ds-cnn-int8-tflite", *(pytest.param(name, marks=pytest.mark.slow) for name in int8.TFLITE_NAMES
                                  if name != "ds-cnn-int8-tflite")]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("int8-zoo")


def test_tier_lists_the_four_networks_quantized_in_both_forms():
    assert int8.NAMES == tuple(f"{name}-int8" for name in tiny.NAMES)
    assert int8.TFLITE_NAMES == tuple(f"{name}-int8-tflite" for name in tiny.NAMES)
    assert zoo.names("int8") == [*int8.NAMES, *int8.TFLITE_NAMES]
    assert all("without a softmax" in zoo.entry(name).description for name in zoo.names("int8"))
    assert {int8.float_name(name) for name in zoo.names("int8")} == set(tiny.NAMES)


@pytest.mark.parametrize("name", [*SMALL, *LARGE])
def test_qdq_graph_with_int8_weights_and_no_softmax(name, cache):
    model = zoo.load(name, cache_dir=cache)
    source = zoo.load(int8.float_name(name), cache_dir=cache)
    assert set(model.files) == {"onnx", FLOAT_COUNTERPART} and model.tier == "int8"
    assert (model.input_shape, model.output_shape, model.input_domain) == (source.input_shape, source.output_shape,
                                                                            source.input_domain)
    graph = onnx.load(str(model.file("onnx"))).graph
    ops = {node.op_type for node in graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops and not ops & {"Softmax", "BatchNormalization", "Relu"}
    float32 = onnx.TensorProto.FLOAT
    assert graph.input[0].type.tensor_type.elem_type == graph.output[0].type.tensor_type.elem_type == float32
    producers = {output: node for node in graph.node for output in node.output}
    initialisers = {tensor.name: numpy_helper.to_array(tensor) for tensor in graph.initializer}
    layers = [node for node in graph.node if node.op_type in ("Conv", "Gemm")]
    assert layers
    for layer in layers:  # weights: DequantizeLinear of int8 per output channel; bias: of int32
        weight, bias = (producers[name] for name in layer.input[1:3])
        assert weight.op_type == bias.op_type == "DequantizeLinear"
        assert initialisers[weight.input[0]].dtype == np.int8 and initialisers[weight.input[1]].size > 1
        assert initialisers[bias.input[0]].dtype == np.int32
    assert producers[graph.output[0].name].op_type == "DequantizeLinear"


@pytest.mark.parametrize("name", SMALL)
def test_same_bytes_from_two_builds(name, tmp_path):
    first = zoo.load(name, cache_dir=tmp_path / "first")
    second = zoo.load(name, cache_dir=tmp_path / "second")
    assert file_sha256(first.file("onnx")) == file_sha256(second.file("onnx"))
    other = zoo.load(name, cache_dir=tmp_path / "first", seed=1)
    assert file_sha256(other.file("onnx")) != file_sha256(first.file("onnx"))


def test_folding_and_dropping_the_softmax_keep_the_float_network(cache):
    """What is quantized computes what the float model computes: the same values before its softmax."""
    import onnxruntime

    source = zoo.load("ds-cnn", cache_dir=cache)
    graph = onnx.load(str(source.file("onnx")))
    int8.fold_batch_norms(graph.graph)
    int8.drop_final_softmax(graph.graph)
    assert {node.op_type for node in graph.graph.node}.isdisjoint({"BatchNormalization", "Softmax"})
    x = np.random.default_rng(4).uniform(*source.input_domain, (16, *source.input_shape)).astype(np.float32)
    x = tensors.convert(x, source.layout, source.layouts_of("onnx")[0])
    expected = onnxruntime.InferenceSession(str(source.file("onnx"))).run(None, {"input": x})[0]
    logits = onnxruntime.InferenceSession(graph.SerializeToString()).run(None, {"input": x})[0]
    softmax = np.exp(logits - logits.max(axis=1, keepdims=True))
    assert np.allclose(softmax / softmax.sum(axis=1, keepdims=True), expected, atol=1e-5)
    # the int8 model's float counterpart (its quantization error's yardstick) is the same float network
    counterpart = zoo.load("ds-cnn-int8", cache_dir=cache).file(FLOAT_COUNTERPART)
    assert {node.op_type for node in onnx.load(str(counterpart)).graph.node}.isdisjoint({"Softmax"})
    assert np.allclose(onnxruntime.InferenceSession(str(counterpart)).run(None, {"input": x})[0], logits, atol=1e-5)


@pytest.mark.slow  # 10 s; the semantic stage's quantized verdict is tested in test_quantized.py
def test_autoencoder_passes_the_semantic_campaign_bit_for_bit(tmp_path):
    done = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", "fc-autoencoder-int8",
                           "--references", "onnxruntime", "--inputs", "50", "--quiet", "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert len(records) == 1 and records[0]["verdict"] == "pass", records
    assert records[0]["derived"]["bound"] == 0 and records[0]["derived"]["c_distance"] == 0
    assert records[0]["quantized"]["rule"] == "fixed-point"


def test_cached_load_reads_model_json_only(cache):
    """Built once; a later load (another process) reads ``model.json`` and imports no TensorFlow, onnx or ONNX
    Runtime, like the tiers it is built from."""
    model = zoo.load("fc-autoencoder-int8", cache_dir=cache)
    code = ("import sys; from harness.models import zoo; "
            f"m = zoo.load('fc-autoencoder-int8', cache_dir={str(cache)!r}); "
            "print(m.file('onnx'), *(name in sys.modules for name in ('tensorflow', 'onnx', 'onnxruntime')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[3])
    assert result.stdout.split() == [str(model.file("onnx")), "False", "False", "False"]
    assert json.loads((cache / "fc-autoencoder-int8-s0" / "model.json").read_text())["model"]["files"] == {
        "onnx": "model.onnx", FLOAT_COUNTERPART: "float.onnx"}


@pytest.mark.parametrize("name", TFLITE)
def test_tflite_form_is_converted_and_equals_litert_bit_for_bit(name, cache):
    """TFLiteConverter's full-integer file, loaded by the ``.tflite`` format (the file and its ONNX QOperator
    conversion), without a softmax, the float model's shapes and the int8 range as its domain; LiteRT running the
    file equals the integer arbiter running the conversion under the ``litert`` rule on every output."""
    model = zoo.load(name, cache_dir=cache)
    source = zoo.load(int8.float_name(name), cache_dir=cache)
    assert set(model.files) == {"tflite", "onnx"} and model.tier == "int8"
    assert (model.input_shape, model.output_shape, model.input_domain) == (source.input_shape, source.output_shape,
                                                                            (-128.0, 127.0))
    ops = [node.op_type for node in onnx.load(str(model.file("onnx"))).graph.node]
    assert ops[-1] == "QGemm" and not set(ops) & {"Softmax", "BatchNormalization", "Relu"}
    inputs = np.random.default_rng(5).uniform(-128, 127, (100, *model.input_shape)).astype(np.float32)
    lite = LiteRtReference().run(model, inputs)
    graph_inputs = tensors.convert(np.rint(inputs), model.layout, model.layouts_of("onnx")[0])
    ours = integer.evaluate(model.file("onnx"), graph_inputs, integer.LITERT).outputs[0].astype(np.float32)
    assert np.unique(lite).size > 10 and np.array_equal(ours.reshape(lite.shape), lite)


@pytest.mark.slow  # two conversions of about 10 s each
def test_tflite_form_same_bytes_from_two_builds(tmp_path, cache):
    first = zoo.load("ds-cnn-int8-tflite", cache_dir=cache)
    second = zoo.load("ds-cnn-int8-tflite", cache_dir=tmp_path)
    assert file_sha256(first.file("tflite")) == file_sha256(second.file("tflite"))
    assert file_sha256(first.file("onnx")) == file_sha256(second.file("onnx"))
