"""Reference runtimes: the registry, layout handling and determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

from harness import references
from harness.models import zoo
from harness.errors import ConfigError
from harness.references import Reference, float64, integer_ref, keras_ref, litert_ref, onnxruntime_ref
from harness.models.tf_runtime import keras, save_keras


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "zoo-cache"


@pytest.fixture(scope="session")
def lenet5(zoo_cache):
    return zoo.load("lenet5", cache_dir=zoo_cache)


@pytest.fixture(scope="session")
def cifarnet(zoo_cache):
    return zoo.load("cifarnet", cache_dir=zoo_cache)


def _inputs(model, n=32, seed=0):
    return np.random.default_rng(seed).uniform(*model.input_domain, (n, *model.input_shape)).astype(np.float32)


# --- registry ------------------------------------------------------------------


def test_registry_holds_the_builtin_references():
    assert references.names() == ["float64", "integer-fixed-point", "integer-litert", "integer-onnxruntime", "keras",
                                  "litert", "onnxruntime"]
    classes = {"float64": float64.Float64Reference, "keras": keras_ref.KerasReference,
               "onnxruntime": onnxruntime_ref.OnnxRuntimeReference, "litert": litert_ref.LiteRtReference,
               "integer-fixed-point": integer_ref.FixedPointReference,
               "integer-litert": integer_ref.LiteRtRuleReference,
               "integer-onnxruntime": integer_ref.OnnxRuntimeRuleReference}
    for name in references.names():
        reference = references.get(name)
        assert isinstance(reference, Reference) and reference.name == name and type(reference) is classes[name]
        assert references.get(name) is reference


@pytest.mark.tor("TOR-CLI-002")
def test_unknown_reference_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown reference 'tflite' \(known: float64, integer-fixed-point, "
                                            r"integer-litert, integer-onnxruntime, keras, litert, onnxruntime\)"):
        references.get("tflite")


# A new reference installed from a package of its own: tests/harness/test_registry.py.


def test_supports_needs_the_file(lenet5):
    onnx_only = dataclasses.replace(lenet5, files={"onnx": lenet5.files["onnx"]})
    assert references.get("keras").supports(lenet5) and references.get("onnxruntime").supports(lenet5)
    assert not references.get("keras").supports(onnx_only)
    assert [ref.name for ref in references.supporting(onnx_only)] == ["float64", "onnxruntime"]


# --- layouts -----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["lenet5", "cifarnet"])
def test_chw_onnx_file_fed_canonical_hwc_inputs(fixture, request):
    model = request.getfixturevalue(fixture)
    x = _inputs(model)
    from_keras = references.get("keras").run(model, x)
    from_onnx = references.get("onnxruntime").run(model, x)
    assert from_keras.shape == from_onnx.shape == (len(x), *model.output_shape)
    assert from_keras.dtype == from_onnx.dtype == np.float32
    assert np.max(np.abs(from_keras - from_onnx)) <= model.tolerance
    # The ONNX file itself wants NCHW: feeding it the HWC batch untransposed would be wrong.
    direct = onnxruntime_ref.session(model.file("onnx")).run(None, {"input": x.transpose(0, 3, 1, 2)})[0]
    assert np.array_equal(direct, from_onnx)


def test_image_outputs_are_returned_in_the_canonical_layout(tmp_path):
    k = keras()
    keras_model = k.Sequential([k.Input((6, 5, 2)), k.layers.Conv2D(3, 3, padding="same", activation="tanh")])
    rng = np.random.default_rng(4)
    for layer in keras_model.layers:
        layer.set_weights([rng.uniform(-1, 1, w.shape).astype(np.float32) for w in layer.get_weights()])
    save_keras(keras_model, tmp_path / "conv.keras")
    model = zoo.load(tmp_path / "conv.keras", cache_dir=tmp_path / "cache")
    assert (model.output_shape, model.output_layout, model.layouts_of("onnx")) == ((6, 5, 3), "HWC", ("CHW", "CHW"))
    x = _inputs(model, 8)
    from_keras = references.get("keras").run(model, x)
    assert np.array_equal(from_keras, keras_model(x, training=False).numpy())
    assert np.max(np.abs(references.get("onnxruntime").run(model, x) - from_keras)) <= 1e-5


def test_fixed_batch_onnx_file(lenet5, tmp_path):
    proto = onnx.load(str(lenet5.file("onnx")))
    for value in (proto.graph.input[0], proto.graph.output[0]):
        value.type.tensor_type.shape.dim[0].dim_value = 4
    path = tmp_path / "fixed.onnx"
    onnx.save(proto, str(path))
    fixed = dataclasses.replace(lenet5, files={"onnx": path})
    x = _inputs(lenet5, 10)
    assert np.max(np.abs(references.get("onnxruntime").run(fixed, x) - references.get("onnxruntime").run(lenet5, x))) \
        <= 1e-6


def test_wrong_input_shape_is_refused(lenet5):
    with pytest.raises(ValueError, match=r"inputs have shape \(1, 28, 28\)"):
        references.get("onnxruntime").run(lenet5, np.zeros((2, 1, 28, 28), np.float32))


@pytest.mark.parametrize("name", ["keras", "onnxruntime"])
def test_empty_batch(name, lenet5):
    assert references.get(name).run(lenet5, np.zeros((0, 28, 28, 1), np.float32)).shape == (0, 10)


# --- determinism -------------------------------------------------------------------------


@pytest.mark.tor("TOR-SEM-009")
@pytest.mark.parametrize("name", ["keras", "onnxruntime"])
@pytest.mark.parametrize("fixture", ["lenet5", "cifarnet"])
def test_two_runs_are_bit_identical(name, fixture, request):
    model = request.getfixturevalue(fixture)
    x = _inputs(model, 300)  # more than one batch of 256
    first = references.get(name).run(model, x)
    second = references.get(name).run(model, x.copy())
    assert first.tobytes() == second.tobytes()


def test_keras_model_is_loaded_once(lenet5):
    assert keras_ref.load(lenet5.file("keras")) is keras_ref.load(lenet5.file("keras"))
    assert onnxruntime_ref.session(lenet5.file("onnx")) is onnxruntime_ref.session(lenet5.file("onnx"))


@pytest.mark.tor("TOR-SEM-009")
def test_onnxruntime_session_settings(lenet5):
    import onnxruntime as ort

    session = onnxruntime_ref.session(lenet5.file("onnx"))
    assert session.get_providers() == ["CPUExecutionProvider"]
    options = session.get_session_options()
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)
    assert options.execution_mode == ort.ExecutionMode.ORT_SEQUENTIAL
