"""ACETONE JSON model files: conversion checked against a numpy oracle, end to end, and malformed files.

The files are written here from numpy weights in ACETONE's layout (image shapes
[batch, C, H, W], Conv2D weights (C, kh, kw, filters)), and the oracle computes
the network the way ACETONE describes it: on C×H×W tensors, flattening in
H, W, C order for ``channels_last`` and C, H, W order for ``channels_first``.
It shares no code with the converter, so an axis mix-up on either side shows.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from harness import references
from harness.models import zoo
from harness.errors import ModelError
from harness.core.results import ResultStore

# --- the oracle: ACETONE's network semantics on C×H×W tensors ------------------------------


def _activation(x: np.ndarray, name: str) -> np.ndarray:
    if name == "relu":
        return np.maximum(x, 0.0)
    if name == "tanh":
        return np.tanh(x)
    if name == "sigmoid":
        return 1.0 / (1.0 + np.exp(-x))
    if name == "leaky_relu":
        return np.where(x >= 0, x, 0.2 * x)
    if name == "softmax":
        e = np.exp(x - x.max())
        return e / e.sum()
    assert name == "linear"
    return x


def _same_pads(n: int, k: int, s: int) -> tuple[int, int]:
    total = max((math.ceil(n / s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _pads(layer: dict, h: int, w: int, kh: int, kw: int, s: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right)"""
    if layer["padding"] == "valid":
        return 0, 0, 0, 0
    if layer["padding"] == "same":
        (top, bottom), (left, right) = _same_pads(h, kh, s), _same_pads(w, kw, s)
        return top, left, bottom, right
    return tuple(layer["padding"])


def _step(layer: dict, x: np.ndarray, data_format: str) -> np.ndarray:
    kind = layer["class_name"]
    if kind == "Dense":
        return _activation(x @ layer["weights"].reshape(x.size, -1) + layer["biases"], layer["activation"])
    if kind == "Flatten":
        return x.transpose(1, 2, 0).ravel() if data_format == "channels_last" else x.ravel()
    if kind == "Dropout":
        return x
    c, h, w = x.shape
    if kind == "Conv2D":
        weights = layer["weights"]  # (C, kh, kw, F)
        _, kh, kw, filters = weights.shape
        s = layer["strides"]
        top, left, bottom, right = _pads(layer, h, w, kh, kw, s)
        padded = np.pad(x, ((0, 0), (top, bottom), (left, right)))
        ho, wo = (padded.shape[1] - kh) // s + 1, (padded.shape[2] - kw) // s + 1
        out = np.empty((filters, ho, wo))
        for f in range(filters):
            for i in range(ho):
                for j in range(wo):
                    window = padded[:, i * s:i * s + kh, j * s:j * s + kw]
                    out[f, i, j] = np.sum(window * weights[:, :, :, f]) + layer["biases"][f]
        return _activation(out, layer["activation"])
    assert kind in ("MaxPooling2D", "AveragePooling2D") and layer["padding"] == "valid"
    k, s = layer["pool_size"], layer["strides"]
    ho, wo = (h - k) // s + 1, (w - k) // s + 1
    reduce = np.max if kind == "MaxPooling2D" else np.mean
    return np.array([[[reduce(x[ch, i * s:i * s + k, j * s:j * s + k]) for j in range(wo)] for i in range(ho)]
                     for ch in range(c)])


def _oracle(layers: list[dict], x_chw: np.ndarray, data_format: str) -> np.ndarray:
    for layer in layers:
        x_chw = _step(layer, x_chw, data_format)
    return x_chw


# --- the writer: ACETONE's JSON layout ----------------------------------------------------


def _write(path, input_chw: tuple[int, ...], layers: list[dict], data_format: str = "channels_last") -> None:
    """An ACETONE JSON file of ``layers`` (shapes come from running the oracle on zeros)."""
    x = np.zeros(input_chw)
    entries = [{"class_name": "InputLayer",
                "config": {"name": "input_1", "dtype": "float32", "size": x.size, "input_shape": [None, *x.shape]}}]
    for index, layer in enumerate(layers, 1):
        y = _step(layer, x, data_format)
        config = {"name": f"{layer['class_name'].lower()}_{index}", "idx": index, "prev_layer_idx": [index - 1],
                  "size": y.size, "input_shape": [None, *x.shape], "output_shape": [None, *y.shape]}
        entry = {"class_name": layer["class_name"], "config": config}
        for key, value in layer.items():
            if key in ("weights", "biases"):
                entry[key] = value.tolist()
            elif key != "class_name":
                config[key] = [value, value] if key in ("strides", "pool_size", "dilation_rate") else value
        if layer["class_name"] == "Conv2D":
            config["kernel_size"] = list(layer["weights"].shape[1:3])
            config["filters"] = layer["weights"].shape[3]
            config.setdefault("dilation_rate", [1, 1])
        if layer["class_name"] == "Dense":
            config["units"] = layer["biases"].size
        entries.append(entry)
        x = y
    document = {"class_name": "Sequential", "config": {"name": "test", "layers": entries, "data_format": data_format}}
    path.write_text(json.dumps(document))


def _dense_layers(rng) -> list[dict]:
    def dense(n_in, n_out, activation, rank4=False):
        """``rank4``: ACETONE's writer stores Dense weights as (1, 1, in, out); older files as (in, out)."""
        w = rng.normal(0, 0.5, (n_in, n_out))
        return {"class_name": "Dense", "activation": activation,
                "weights": w.reshape(1, 1, n_in, n_out) if rank4 else w, "biases": rng.normal(0, 0.1, n_out)}

    return [dense(5, 12, "relu"), dense(12, 8, "tanh", rank4=True), dense(8, 6, "leaky_relu"),
            dense(6, 4, "softmax")]


def _conv_layers(rng) -> list[dict]:
    """Conv (same, stride 2, non-square kernel), max pool, conv (explicit pads), average pool, flatten, dense."""
    def conv(c, kh, kw, f, **options):
        return {"class_name": "Conv2D", "weights": rng.normal(0, 0.4, (c, kh, kw, f)),
                "biases": rng.normal(0, 0.1, f), **options}

    return [conv(3, 3, 2, 4, strides=2, padding="same", activation="relu"),
            {"class_name": "MaxPooling2D", "pool_size": 2, "strides": 1, "padding": "valid"},
            conv(4, 2, 2, 5, strides=1, padding=[1, 0, 0, 2], activation="tanh"),
            {"class_name": "AveragePooling2D", "pool_size": 2, "strides": 2, "padding": "valid"},
            {"class_name": "Flatten"},
            {"class_name": "Dropout", "rate": 0.5},
            {"class_name": "Dense", "activation": "sigmoid", "weights": rng.normal(0, 0.5, (20, 7)),
             "biases": rng.normal(0, 0.1, 7)},
            {"class_name": "Dense", "activation": "linear", "weights": rng.normal(0, 0.5, (7, 3)),
             "biases": rng.normal(0, 0.1, 3)}]


CONV_INPUT = (3, 11, 9)  # C, H, W: non-square so that an H/W swap changes shapes


def _check_against_oracle(model, layers, data_format, rng):
    n = 8
    x_chw = rng.uniform(-1, 1, (n, *(CONV_INPUT if len(model.input_shape) == 3 else model.input_shape)))
    x_chw = x_chw.astype(np.float32)
    x = x_chw.transpose(0, 2, 3, 1) if x_chw.ndim == 4 else x_chw  # the model's canonical layout, HWC
    expected = np.stack([_oracle(layers, sample.astype(np.float64), data_format) for sample in x_chw])
    for name in ("keras", "onnxruntime"):
        got = references.get(name).run(model, x)
        assert got.shape == expected.shape
        assert np.max(np.abs(got - expected)) <= 1e-5, name
    return expected


# --- conversion ---------------------------------------------------------------------------


def test_dense_net_matches_numpy(tmp_path):
    rng = np.random.default_rng(0)
    layers = _dense_layers(rng)
    path = tmp_path / "mlp.json"
    _write(path, (5,), layers)
    model = zoo.load(path, cache_dir=tmp_path / "cache", seed=0)
    assert (model.name, model.input_shape, model.output_shape, model.layout) == ("mlp", (5,), (4,), "C")
    assert set(model.files) == {"keras", "onnx"} and model.tier == "user"
    assert model.description == "ACETONE JSON file mlp.json"
    _check_against_oracle(model, layers, "channels_last", rng)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_conv_pool_net_matches_numpy(data_format, tmp_path):
    rng = np.random.default_rng(1)
    layers = _conv_layers(rng)
    path = tmp_path / f"cnn_{data_format}.json"
    _write(path, CONV_INPUT, layers, data_format)
    model = zoo.load(path, cache_dir=tmp_path / "cache", seed=0)
    assert (model.input_shape, model.output_shape, model.layout) == ((11, 9, 3), (3,), "HWC")
    assert model.file_layouts == {"keras": ("HWC", "C"), "onnx": ("CHW", "C")}
    expected = _check_against_oracle(model, layers, data_format, np.random.default_rng(2))
    # the data format matters: the other flatten order gives other outputs on the same inputs
    other = "channels_first" if data_format == "channels_last" else "channels_last"
    x_chw = np.random.default_rng(2).uniform(-1, 1, (8, *CONV_INPUT)).astype(np.float32).astype(np.float64)
    assert np.max(np.abs(expected - np.stack([_oracle(layers, x, other) for x in x_chw]))) > 1e-3


@pytest.mark.slow
def test_semantic_campaign_passes_on_a_json_model(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "small_cnn.json"
    _write(path, CONV_INPUT, _conv_layers(rng))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", str(path), "--inputs", "20",
                             "--quiet", "--out", str(out), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    records = ResultStore(out / "results.json").records()
    # the generator reads the converted Keras file and its ONNX export; each is checked against both references
    assert sorted((r["variant"], r["reference"]) for r in records) == [
        ("keras", "keras"), ("keras", "onnxruntime"), ("onnx", "keras"), ("onnx", "onnxruntime")]
    assert all(record["verdict"] == "pass" and record["n_inputs"] == 20 for record in records)


# --- malformed files ----------------------------------------------------------------------


def _small_layers() -> list[dict]:
    rng = np.random.default_rng(4)
    layers = [{"class_name": "Conv2D", "weights": rng.normal(size=(1, 2, 2, 2)), "biases": np.zeros(2),
               "strides": 1, "padding": "valid", "activation": "relu"},
              {"class_name": "Flatten"},
              {"class_name": "Dense", "activation": "linear", "weights": rng.normal(size=(18, 2)),
               "biases": np.zeros(2)}]
    return layers


def _bad_file(tmp_path, change):
    path = tmp_path / "bad.json"
    _write(path, (1, 4, 4), _small_layers())
    document = json.loads(path.read_text())
    change(document, document["config"]["layers"])
    path.write_text(json.dumps(document))
    return path


def _set(target: dict, key: str, value) -> None:
    target[key] = value


@pytest.mark.parametrize(
    ("change", "cause"),
    [
        (lambda d, layers: _set(layers[2], "class_name", "LSTM"),
         "layer 2 'flatten_2' (LSTM): unsupported layer type 'LSTM'"),
        (lambda d, layers: _set(layers[3], "weights", np.zeros((17, 2)).tolist()),
         "layer 3 'dense_3' (Dense): weight shape mismatch: expected (18, 2) or (1, 1, 18, 2), found (17, 2)"),
        (lambda d, layers: _set(layers[1], "weights", np.zeros((2, 2, 2, 1)).tolist()),
         "layer 1 'conv2d_1' (Conv2D): weight shape mismatch: expected (in_channels, kh, kw, filters)"),
        (lambda d, layers: _set(layers[3], "biases", [0.0]),
         "layer 3 'dense_3' (Dense): bias shape mismatch: expected (2,), found (1,)"),
        (lambda d, layers: layers[1]["weights"][0][0][0].__setitem__(0, float("nan")),
         "layer 1 'conv2d_1' (Conv2D): weights: non-finite values"),
        (lambda d, layers: _set(layers[3], "weights", [[1.0, 2.0], [3.0]]),
         "layer 3 'dense_3' (Dense): weights is not a rectangular array of numbers"),
        (lambda d, layers: layers[3]["config"].pop("units"), "layer 3 'dense_3' (Dense): missing key 'units'"),
        (lambda d, layers: layers[1].pop("biases"), "layer 1 'conv2d_1' (Conv2D): missing key 'biases'"),
        (lambda d, layers: _set(layers[1]["config"], "output_shape", [None, 2, 4, 4]),
         "layer 1 'conv2d_1' (Conv2D): shape mismatch: output_shape is [None, 2, 4, 4], the layers before give "
         "[None, 2, 3, 3]"),
        (lambda d, layers: _set(layers[1]["config"], "strides", [1, 2]),
         "strides [1, 2] differ; ACETONE reads only the first value"),
        (lambda d, layers: _set(layers[1]["config"], "activation", "gelu"), "activation 'gelu' is not supported"),
        (lambda d, layers: _set(layers[3]["config"], "prev_layer_idx", [1, 2]),
         "only sequential networks are supported"),
        (lambda d, layers: _set(layers[0]["config"], "dtype", "int"), "layer 0 (the input): dtype 'int'"),
        (lambda d, layers: _set(layers[0], "class_name", "Dense"),
         "layer 0 (the input): expected class_name InputLayer, found 'Dense'"),
        (lambda d, layers: d["config"].pop("data_format"), "missing key 'data_format'"),
        (lambda d, layers: d.pop("config"), "not an ACETONE model description (no 'config' object)"),
    ],
)
def test_malformed_files_are_one_line_model_errors(change, cause, tmp_path):
    path = _bad_file(tmp_path, change)
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert message.startswith(f"{path}: ") and cause in message and "\n" not in message


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        ('{"config": {"layers": [', "not valid JSON (line 1 column 24: Expecting value)"),
        ("[1, 2, 3]", "not an ACETONE model description"),
        ('{"config": {"layers": [], "data_format": "channels_last"}}', "no 'config.layers' list"),
    ],
)
def test_invalid_json_is_a_one_line_model_error(content, cause, tmp_path):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert message.startswith(f"{path}: ") and cause in message and "\n" not in message


def test_binary_file_named_json(tmp_path):
    path = tmp_path / "blob.json"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ModelError, match=r"blob\.json: not a JSON text file"):
        zoo.load(path, cache_dir=tmp_path / "cache")
