"""The model zoo: named benchmarks (shapes, parameters, determinism, cache) and user files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from harness import references
from harness.models import zoo
from harness.errors import ModelError
from harness.references import keras_ref
from harness.models import cache, paper
from harness.models.tf_runtime import keras, save_keras

PAPER_ORDER = ["acas-reg50", "acas-reg100", "acas-reg200", "acas-decr128", "acas-decr256", "lenet5", "cifarnet",
               "alexnet", "vgg16"]
TRAINED = ["digits-cnn", "digits-mlp", "tabular-ae"]  # harness.models.trained, after the paper's
MULTICORE = ["lenet5-split", "inception-mini"]  # the multi-core paper's Figures 2 and 10, after the ECRTS ones
TINY = ["resnet8", "mobilenet-vww", "ds-cnn", "fc-autoencoder"]  # MLPerf Tiny (harness.models.tiny)
INT8 = [f"{name}-int8{form}" for form in ("", "-tflite") for name in TINY]  # quantized (harness.models.int8), last
ACAS = [name for name in PAPER_ORDER if name.startswith("acas-")]
HIDDEN = {"acas-reg50": (50,) * 7, "acas-reg100": (100,) * 7, "acas-reg200": (200,) * 7,
          "acas-decr128": (128, 128, 64, 32, 16), "acas-decr256": (256, 256, 128, 64, 32, 16)}


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory):
    """One cache for the session (shared with the other test modules through the same base directory)."""
    return tmp_path_factory.getbasetemp() / "zoo-cache"


@pytest.fixture(scope="session")
def built(zoo_cache):
    return {name: zoo.load(name, cache_dir=zoo_cache) for name in zoo.names("default")}


def _inputs(model, n=64, seed=0):
    return np.random.default_rng(seed).uniform(*model.input_domain, (n, *model.input_shape)).astype(np.float32)


# --- the catalogue ------------------------------------------------------------


def test_entries_in_paper_order():
    assert [entry.name for entry in zoo.entries()] == PAPER_ORDER + MULTICORE + TRAINED + TINY + INT8
    assert zoo.names() == PAPER_ORDER + MULTICORE + TRAINED + TINY + INT8
    assert zoo.names("trained") == TRAINED
    assert zoo.names("default") == PAPER_ORDER[:7] + MULTICORE
    assert zoo.names("full") == ["alexnet", "vgg16"]
    assert all(entry.tolerance == 1e-5 for entry in zoo.entries() if entry.tier == "default")
    with pytest.raises(ModelError, match="unknown zoo tier 'huge'"):
        zoo.names("huge")


def test_parameter_counts_from_the_architecture():
    counts = {name: paper.parameter_count(name) for name in PAPER_ORDER}
    assert counts["lenet5"] == 44_426
    assert 120_000 <= counts["cifarnet"] <= 125_000
    assert 60_000_000 <= counts["alexnet"] <= 62_000_000
    assert counts["vgg16"] == 138_357_544
    for name, hidden in HIDDEN.items():
        sizes = (5, *hidden, 5)
        assert counts[name] == sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:]))


# --- default-tier benchmarks ----------------------------------------------------


@pytest.mark.parametrize("name", zoo.names("default"))
def test_benchmark_record(name, built):
    model = built[name]
    entry = zoo.entry(name)
    assert model.name == name and model.tier == "default"
    assert model.input_domain == entry.input_domain and model.tolerance == entry.tolerance
    assert set(model.files) == {"keras", "onnx"} and all(path.is_file() for path in model.files.values())
    assert model.output_layout == "C"
    if name in ACAS:
        assert (model.input_shape, model.output_shape, model.layout) == ((5,), (5,), "C")
        assert model.file_layouts == {"keras": ("C", "C"), "onnx": ("C", "C")}
        assert model.input_domain == (-0.5, 0.5)
    else:
        assert model.layout == "HWC"
        assert model.file_layouts == {"keras": ("HWC", "C"), "onnx": ("CHW", "C")}
        assert model.input_shape == {"lenet5": (28, 28, 1), "cifarnet": (32, 32, 3), "lenet5-split": (28, 28, 1),
                                     "inception-mini": (32, 32, 3)}[name]
        assert model.output_shape == (10,)
        assert model.input_domain == (0.0, 1.0)


@pytest.mark.parametrize("name", zoo.names("default"))
def test_parameters_counted_on_the_built_model(name, built, zoo_cache):
    keras_model = keras_ref.load(built[name].file("keras"))
    count = keras_model.count_params()
    assert count == paper.parameter_count(name)
    assert cache.read_record(zoo_cache / f"{name}-s0")["parameters"] == count
    if name == "lenet5":
        assert count == 44_426
    if name == "cifarnet":
        assert 120_000 <= count <= 125_000


def _layers(keras_model):
    return [layer for layer in keras_model.layers if type(layer).__name__ != "InputLayer"]


def test_lenet5_is_example_13(built):
    keras_model = keras_ref.load(built["lenet5"].file("keras"))
    layers = [(type(layer).__name__, tuple(layer.output.shape[1:])) for layer in _layers(keras_model)]
    assert layers == [("Conv2D", (24, 24, 6)), ("AveragePooling2D", (12, 12, 6)), ("Conv2D", (8, 8, 16)),
                      ("AveragePooling2D", (4, 4, 16)), ("Flatten", (256,)), ("Dense", (120,)), ("Dense", (84,)),
                      ("Dense", (10,))]
    activations = [layer.activation.__name__ for layer in keras_model.layers if hasattr(layer, "activation")]
    assert activations == ["tanh", "tanh", "tanh", "tanh", "softmax"]


def test_cifarnet_is_figure_5(built):
    keras_model = keras_ref.load(built["cifarnet"].file("keras"))
    shapes = [tuple(layer.output.shape[1:]) for layer in _layers(keras_model)]
    assert shapes == [(34, 34, 3), (30, 30, 32), (15, 15, 32), (13, 13, 64), (6, 6, 64), (4, 4, 64), (1024,), (64,),
                      (10,)]


def _parents(keras_model) -> dict[str, list[str]]:
    """Layer name -> the names of the layers it reads (the model's DAG)."""
    return {layer.name: sorted(node.operation.name for node in _inbound(layer)) for layer in _layers(keras_model)}


def _inbound(layer):
    tensors = layer.input if isinstance(layer.input, list) else [layer.input]
    return [tensor._keras_history for tensor in tensors]


def test_lenet5_split_is_figure_2(built):
    keras_model = keras_ref.load(built["lenet5-split"].file("keras"))
    parents = _parents(keras_model)
    assert parents["split_a1_conv"] == parents["split_b1_conv"] == ["input"]
    assert parents["split_concat"] == ["split_a1_avgpool", "split_b1_avgpool"]
    assert tuple(keras_model.get_layer("split_concat").output.shape[1:]) == (12, 12, 6)
    assert parents["conv1"] == ["split_concat"]
    assert paper.parameter_count("lenet5-split") == paper.parameter_count("lenet5")


def test_inception_mini_is_figure_10(built):
    keras_model = keras_ref.load(built["inception-mini"].file("keras"))
    parents = _parents(keras_model)
    for module, channels in (("inception1", 28), ("inception2", 44)):
        assert len(parents[f"{module}_concat"]) == 4  # four branches
        assert tuple(keras_model.get_layer(f"{module}_concat").output.shape[1:]) == (8, 8, channels)
    assert parents["inception2_a1_conv"] == ["inception1_concat"]
    assert parents["inception1_d1_conv"] == ["inception1_d1_maxpool"]
    assert keras_model.count_params() == paper.parameter_count("inception-mini")


@pytest.mark.parametrize("name", ACAS)
def test_acas_structure(name, built):
    keras_model = keras_ref.load(built[name].file("keras"))
    dense = [layer for layer in keras_model.layers if type(layer).__name__ == "Dense"]
    assert tuple(layer.units for layer in dense) == (*HIDDEN[name], 5)
    assert [layer.activation.__name__ for layer in dense] == ["relu"] * len(HIDDEN[name]) + ["linear"]


@pytest.mark.parametrize("name", zoo.names("default"))
def test_biases_are_nonzero_and_outputs_order_one(name, built):
    model = built[name]
    keras_model = keras_ref.load(model.file("keras"))
    for layer in keras_model.layers:
        if layer.weights:
            bias = layer.bias.numpy()
            assert np.count_nonzero(bias) == bias.size and np.max(np.abs(bias)) <= 0.1
    outputs = references.get("keras").run(model, _inputs(model))
    assert np.all(np.isfinite(outputs))
    assert 1e-3 <= np.max(np.abs(outputs)) <= 100
    assert np.ptp(outputs, axis=0).max() > 0  # the inputs matter


def _weights(model):
    return [w for layer in keras_ref.load(model.file("keras")).layers for w in layer.get_weights()]


@pytest.mark.parametrize("name", zoo.names("default"))
def test_builds_are_deterministic(name, built, tmp_path):
    again = zoo.load(name, cache_dir=tmp_path / "again", seed=0)
    other = zoo.load(name, cache_dir=tmp_path / "other", seed=1)
    assert again.files["keras"] != built[name].files["keras"]
    first, second, different = _weights(built[name]), _weights(again), _weights(other)
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(first, different, strict=True))


# --- the cache --------------------------------------------------------------------


def test_cache_is_reused(built, zoo_cache):
    model = built["lenet5"]
    stamps = {fmt: path.stat().st_mtime_ns for fmt, path in model.files.items()}
    again = zoo.load("lenet5", cache_dir=zoo_cache)
    assert again == model
    assert {fmt: path.stat().st_mtime_ns for fmt, path in again.files.items()} == stamps
    record = json.loads((zoo_cache / "lenet5-s0" / "model.json").read_text())
    assert record["schema"] == cache.CACHE_SCHEMA and record["seed"] == 0
    assert record["model"]["files"] == {"keras": "model.keras", "onnx": "model.onnx"}


def test_cached_load_does_not_import_tensorflow(built, zoo_cache):
    code = ("import sys; from harness.models import zoo; "
            f"m = zoo.load('acas-reg50', cache_dir={str(zoo_cache)!r}); "
            "print(m.input_shape, 'tensorflow' in sys.modules, 'keras' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            cwd=Path(__file__).resolve().parents[3])
    assert result.stdout.split() == ["(5,)", "False", "False"]


def test_stale_or_broken_cache_is_rebuilt(tmp_path):
    model = zoo.load("acas-decr128", cache_dir=tmp_path)
    record_path = tmp_path / "acas-decr128-s0" / "model.json"
    record = json.loads(record_path.read_text())
    record["fingerprint"] = "stale"
    record_path.write_text(json.dumps(record))
    assert zoo.load("acas-decr128", cache_dir=tmp_path) == model
    assert json.loads(record_path.read_text())["fingerprint"] != "stale"
    model.files["onnx"].unlink()
    assert zoo.load("acas-decr128", cache_dir=tmp_path).files["onnx"].is_file()
    record_path.write_text("{not json")
    assert zoo.load("acas-decr128", cache_dir=tmp_path) == model


# --- user files ----------------------------------------------------------------------


def _small_cnn():
    k = keras()
    x = k.Input((10, 10, 2))
    y = k.layers.Conv2D(3, 3, activation="relu")(x)
    y = k.layers.MaxPooling2D(2)(y)
    y = k.layers.Dense(4)(k.layers.Flatten()(y))
    model = k.Model(x, y)
    rng = np.random.default_rng(3)
    for layer in model.layers:
        layer.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in layer.get_weights()])
    return model


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_user_keras_file(suffix, tmp_path):
    keras_model = _small_cnn()
    path = tmp_path / f"small{suffix}"
    save_keras(keras_model, path)
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert (model.name, model.tier, model.input_shape, model.output_shape) == ("small", "user", (10, 10, 2), (4,))
    assert (model.layout, model.output_layout) == ("HWC", "C")
    assert model.files["keras"] == path.resolve()
    assert model.file_layouts == {"keras": ("HWC", "C"), "onnx": ("CHW", "C")}
    x = _inputs(model, 16)
    expected = keras_model(x, training=False).numpy()
    assert np.array_equal(references.get("keras").run(model, x), expected)
    assert np.max(np.abs(references.get("onnxruntime").run(model, x) - expected)) <= 1e-5
    assert zoo.load(str(path), cache_dir=tmp_path / "cache") == model  # cached by content


def test_user_onnx_file_keeps_its_own_layout(built, tmp_path):
    source = built["cifarnet"]
    path = tmp_path / "cifar.onnx"
    path.write_bytes(source.file("onnx").read_bytes())
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert (model.name, model.input_shape, model.output_shape) == ("cifar", (3, 32, 32), (10,))
    assert (model.layout, model.output_layout, set(model.files)) == ("CHW", "C", {"onnx"})
    x = _inputs(source, 8)
    got = references.get("onnxruntime").run(model, x.transpose(0, 3, 1, 2))
    assert np.max(np.abs(got - references.get("keras").run(source, x))) <= 1e-5
    assert not (tmp_path / "cache").exists()  # nothing to convert


def _onnx_file(path: Path, nodes, input_shape, output_shape, inits=()) -> Path:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
                              [numpy_helper.from_array(value, name) for name, value in inits])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("unbatched, batched, nodes, out, inits", [
    ([5], ["N", 5], [("MatMul", ["x", "w"], ["y"])], ([3], ["N", 3]),
     {"w": np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)}),
    ([1, 6, 6], ["N", 1, 6, 6], [("Unsqueeze", ["x", "zero"], ["x4"]), ("Conv", ["x4", "w"], ["y4"]),
                                 ("Squeeze", ["y4", "zero"], ["y"])], ([2, 5, 5], ["N", 2, 5, 5]),
     {"w": np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 1, 2, 2), "zero": np.array([0], np.int64)}),
], ids=["vector", "image"])
def test_user_onnx_file_without_batch_axis(tmp_path, unbatched, batched, nodes, out, inits):
    """[5] and [1, 6, 6] are one sample (docs/zoo.md); the reference feeds them one at a time."""
    from onnx import helper

    graph_nodes = [helper.make_node(*node) for node in nodes]
    single = _onnx_file(tmp_path / "single.onnx", graph_nodes, unbatched, out[0], inits.items())
    # The same computation with a batch axis: no Unsqueeze/Squeeze around the Conv.
    plain = [helper.make_node(nodes[0][0], ["x", "w"], ["y"])] if len(nodes) == 1 else \
        [helper.make_node("Conv", ["x", "w"], ["y"])]
    many = _onnx_file(tmp_path / "many.onnx", plain, batched, out[1], [("w", inits["w"])])
    model, reference = (zoo.load(path, cache_dir=tmp_path / "cache") for path in (single, many))
    assert (model.input_shape, model.output_shape) == (tuple(unbatched), tuple(out[0]))
    assert (model.input_shape, model.output_shape) == (reference.input_shape, reference.output_shape)
    x = np.random.default_rng(0).uniform(-1, 1, (5, *unbatched)).astype(np.float32)
    got = references.get("onnxruntime").run(model, x)
    assert got.shape == (5, *out[0])
    assert np.array_equal(got, references.get("onnxruntime").run(reference, x))


@pytest.mark.parametrize("shape, cause", [
    ([1, 0, 5], "the input has shape [1, 0, 5], a dimension of size 0"),
    (["N", 3, "H", 4], "dimension 2 of x is undefined (H) (declared shape [N, 3, H, 4])"),
    ([2, 2, 2, 2, 2], "x has declared shape [2, 2, 2, 2, 2], read without a batch axis (docs/zoo.md), a sample of "
                      "rank 5; ranks 1 to 4 are supported"),
])
def test_user_onnx_shape_errors_state_the_declared_shape(tmp_path, shape, cause):
    from onnx import helper

    path = _onnx_file(tmp_path / "odd.onnx", [helper.make_node("Relu", ["x"], ["y"])], shape, shape)
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    assert cause in str(info.value) and "\n" not in str(info.value)


def test_onnx_checker_message_is_not_cut_off(tmp_path):
    from onnx import helper

    path = _onnx_file(tmp_path / "unsorted.onnx", [helper.make_node("Relu", ["q"], ["y"], name="r")], ["N", 5],
                      ["N", 5])
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    assert "input 'q' of node: name: r OpType: Relu is not output of any previous nodes" in str(info.value)


# --- bad inputs: one line naming the file and the cause ---------------------------------


def _bad_files(directory: Path, built) -> dict[str, tuple[Path | str, str]]:
    keras_bytes = built["lenet5"].file("keras").read_bytes()
    onnx_bytes = built["lenet5"].file("onnx").read_bytes()
    files = {
        "truncated.keras": keras_bytes[: len(keras_bytes) // 2],
        "truncated.onnx": onnx_bytes[: len(onnx_bytes) // 2],
        "text.onnx": b"this is a text file, not a model\n",
        "text.keras": b"this is a text file, not a model\n",
        "text.h5": b"this is a text file, not a model\n",
        "empty.onnx": b"",
        "weights.txt": b"1,2,3\n",
    }
    for name, content in files.items():
        (directory / name).write_bytes(content)
    return {
        "missing": (directory / "missing.keras", "no such file"),
        "truncated keras": (directory / "truncated.keras", "truncated or corrupt .keras file"),
        "truncated onnx": (directory / "truncated.onnx", "not a valid ONNX file"),
        "text as onnx": (directory / "text.onnx", "not a valid ONNX file"),
        "text as keras": (directory / "text.keras", "truncated or corrupt .keras file"),
        "text as h5": (directory / "text.h5", "truncated or corrupt HDF5 file"),
        "empty onnx": (directory / "empty.onnx", "empty file"),
        "unknown suffix": (directory / "weights.txt", "unsupported file type '.txt'"),
        "directory": (directory, "is a directory, not a model file"),
        "unknown name": ("lenet6", "unknown zoo model 'lenet6' (known: acas-reg50,"),
    }


def test_bad_inputs_raise_one_line_model_errors(built, tmp_path):
    for case, (target, cause) in _bad_files(tmp_path, built).items():
        with pytest.raises(ModelError) as info:
            zoo.load(target, cache_dir=tmp_path / "cache")
        message = str(info.value)
        assert "\n" not in message, case
        assert cause in message, (case, message)
        assert (target.name if isinstance(target, Path) else target) in message, (case, message)


@pytest.mark.parametrize("shape, layer, cause", [
    ((4,), lambda k: k.layers.ReLU(threshold=0.5), "unsupported option threshold=0.5 of layer type ReLU"),
    ((4, 3), lambda k: k.layers.LSTM(2), "unsupported layer type LSTM"),
])
def test_a_keras_model_the_exporter_refuses_loads_without_its_onnx_file(shape, layer, cause, tmp_path):
    """The exporter's refusal names the exporter and the layer, and costs the ONNX file alone: the Keras file
    still loads (the Keras-only path, ``--references keras``); asking for the ONNX file gives the refusal."""
    k = keras()
    path = tmp_path / "refused.keras"
    save_keras(k.Sequential([k.Input(shape), layer(k), k.layers.Dense(1)]), path)
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert set(model.files) == {"keras"} and model.file("keras") == path
    assert model.refusals["onnx"].startswith("the Keras->ONNX exporter (harness.models.onnx_export) refuses it: ")
    assert cause in model.refusals["onnx"]
    with pytest.raises(ModelError, match=r"no onnx file: the Keras->ONNX exporter .*" + cause.replace(".", r"\.")):
        model.file("onnx")
    assert not references.get("onnxruntime").supports(model) and references.get("keras").supports(model)


# --- full tier (on request) -------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names("full"))
def test_full_tier_benchmark(name, tmp_path_factory):
    """Builds AlexNet or VGG-16 (minutes, ~0.25/0.55 GB files): only with --run-slow."""
    model = zoo.load(name, cache_dir=tmp_path_factory.getbasetemp() / "zoo-cache")
    assert model.input_shape == {"alexnet": (228, 228, 3), "vgg16": (224, 224, 3)}[name]
    assert model.output_shape == (1000,)
    keras_model = keras_ref.load(model.file("keras"))
    assert keras_model.count_params() == paper.parameter_count(name)
    x = _inputs(model, 4)
    expected = references.get("keras").run(model, x)
    assert np.all(np.isfinite(expected)) and 1e-3 <= np.max(np.abs(expected)) <= 100
    assert np.max(np.abs(references.get("onnxruntime").run(model, x) - expected)) <= model.tolerance


def test_a_fixed_leading_1_of_a_rank_5_shape_is_a_batch_axis(tmp_path):
    """[1, C, D, H, W] is a batch of volumes (docs/zoo.md), read as [C, D, H, W] samples in layout CDHW."""
    from onnx import helper

    shape = [1, 2, 3, 4, 5]
    path = _onnx_file(tmp_path / "volume.onnx", [helper.make_node("Relu", ["x"], ["y"])], shape, shape)
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert (model.input_shape, model.output_shape, model.layout) == ((2, 3, 4, 5), (2, 3, 4, 5), "CDHW")
    x = np.random.default_rng(0).uniform(-1, 1, (3, 2, 3, 4, 5)).astype(np.float32)
    assert np.array_equal(references.get("onnxruntime").run(model, x), np.maximum(x, 0))
