"""The sidecar settings file ``<model>.assay.toml``: domain per input, atol, rtol; validation; cache fingerprint."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from harness.core.inputs import make_inputs
from harness.errors import ModelError
from harness.models import zoo
from harness.models.model import FLOAT_COUNTERPART

from test_nnet import SMALL


def _onnx_file(path, dims):
    """A Relu network with one input and one output of the declared ``dims``."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _with_sidecar(path, text):
    (path.parent / (path.name + ".assay.toml")).write_text(text)
    return path


def test_no_sidecar_keeps_the_defaults(tmp_path):
    model = zoo.load(_onnx_file(tmp_path / "net.onnx", ["N", 5]), cache_dir=tmp_path / "cache")
    assert model.input_domain == (-1.0, 1.0) and model.tolerance == 1e-5 and model.rtol == 5e-6


def test_domain_for_all_and_tolerances(tmp_path):
    path = _with_sidecar(_onnx_file(tmp_path / "net.onnx", ["N", 5]), "atol = 1e-4\nrtol = 0\ndomain = [0, 2.5]\n")
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert (model.tolerance, model.rtol, model.input_domain) == (1e-4, 0.0, (0.0, 2.5))
    assert "net.onnx.assay.toml" in model.description
    x = make_inputs(model, 1000, seed=0)
    assert x.min() >= 0.0 and x.max() <= 2.5 and x.max() > 2.4


def test_domain_per_feature_of_a_vector(tmp_path):
    path = _with_sidecar(_onnx_file(tmp_path / "acas.onnx", ["N", 5]),
                         "low = [0.0, -3.141593, -3.141593, 100.0, 0.0]\n"
                         "high = [60760.0, 3.141593, 3.141593, 1200.0, 1200.0]\n")
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert model.domain_json() == [[0.0, -3.141593, -3.141593, 100.0, 0.0], [60760.0, 3.141593, 3.141593, 1200.0,
                                                                              1200.0]]
    x = make_inputs(model, 2000, seed=0)
    assert np.all(np.abs(x[:, 1:3]) <= np.float32(3.141593)) and x[:, 0].max() > 50000.0


def test_domain_per_channel_and_per_element_of_a_chw_image(tmp_path):
    path = _with_sidecar(_onnx_file(tmp_path / "img.onnx", ["N", 3, 2, 2]), "low = [0, 10, 100]\nhigh = [1, 11, 101]\n")
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert model.layout == "CHW"
    x = make_inputs(model, 200, seed=0)
    for channel, low in enumerate((0, 10, 100)):
        assert np.all((x[:, channel] >= low) & (x[:, channel] <= low + 1))
    elements = list(range(12))
    _with_sidecar(path, f"low = {elements}\nhigh = {[e + 0.5 for e in elements]}\n")
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    low, _ = model.domain_bounds()
    np.testing.assert_array_equal(low, np.arange(12.0).reshape(3, 2, 2))  # in the file's own CHW order
    x = make_inputs(model, 100, seed=0)
    assert np.all(x >= low.astype(np.float32)) and np.all(x <= (low + 0.5).astype(np.float32))


@pytest.mark.parametrize(("text", "key", "cause"), [
    ("tolerance = 1e-4\n", "tolerance", "unknown key 'tolerance' (known: atol, rtol, domain, low, high, float_model)"),
    ("low = [0, 0, 0]\nhigh = [1, 1, 1]\n", "low", "wrong length: 3 values, expected 5 (one per input feature)"),
    ("low = [0, 0, 0, 0, 0]\nhigh = [1, 1, 1, 1, 1, 1]\n", "high", "wrong length: 6 values, expected 5"),
    ("low = [0, 0, 2, 0, 0]\nhigh = 1\n", "low", "low 2 is above high 1 at index [2]"),
    ("domain = [1, 0]\n", "domain", "low 1 is above high 0"),
    ("domain = [0, inf]\n", "domain", "value inf is not a finite float32 number"),
    ("low = [0, nan, 0, 0, 0]\nhigh = 1\n", "low", "value nan at position 1 is not a finite float32 number"),
    ("domain = [0, 1e39]\n", "domain", "not a finite float32 number"),
    ("atol = -1e-5\n", "atol", "tolerance -1e-05 is negative"),
    ("rtol = 'small'\n", "rtol", "expected a number, got 'small'"),
    ("domain = [0, 1]\nlow = 0\n", "domain", "give either domain = [low, high] or low and high, not both"),
    ("low = 0\n", "high", "is missing (low and high go together)"),
    ("domain = [0, 1, 2]\n", "domain", "expected [low, high], two numbers"),
    ("low = [0, 'a', 0, 0, 0]\nhigh = 1\n", "low", "expected a list of numbers"),
    ("float_model = 3\n", "float_model", "expected the path of an ONNX file, got 3"),
    ("float_model = 'absent.onnx'\n", "float_model", "absent.onnx"),
    ("float_model = 'wide.onnx'\n", "float_model", "wide.onnx has input [6] and output [6], the model [5] and [5]: "
                                                   "not the same network"),
    ("float_model = 'junk.onnx'\n", "float_model", "not a valid ONNX file"),
])
@pytest.mark.tor("TOR-CLI-001")
def test_bad_sidecars_are_one_line_naming_the_file_and_key(tmp_path, text, key, cause):
    _onnx_file(tmp_path / "wide.onnx", ["N", 6])
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf")
    path = _with_sidecar(_onnx_file(tmp_path / "net.onnx", ["N", 5]), text)
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    message = str(info.value)
    assert message.startswith((f"{path}.assay.toml: key '{key}'", f"{path}.assay.toml: unknown key '{key}'"))
    assert cause in message and "\n" not in message


def test_a_float_model_becomes_the_float_counterpart_and_keys_the_model(tmp_path):
    """The quantization error's float network (docs/quantized.md) is one of the model's files: its content is part
    of the model's hashes, so records about it are never served for another float network."""
    path = _with_sidecar(_onnx_file(tmp_path / "net.onnx", ["N", 5]), "float_model = 'float.onnx'\n")
    _onnx_file(tmp_path / "float.onnx", ["N", 5])
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert model.files[FLOAT_COUNTERPART] == (tmp_path / "float.onnx").resolve() and "onnx" in model.files
    before = model.sha256()
    _onnx_file(tmp_path / "float.onnx", [1, 5])
    assert zoo.load(path, cache_dir=tmp_path / "cache").sha256()[FLOAT_COUNTERPART] != before[FLOAT_COUNTERPART]


def test_invalid_toml_names_the_file(tmp_path):
    path = _with_sidecar(_onnx_file(tmp_path / "net.onnx", ["N", 5]), "atol = = 1\n")
    with pytest.raises(ModelError, match=r"net\.onnx\.assay\.toml: invalid TOML \(.*line 1") as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    assert "\n" not in str(info.value)


@pytest.mark.tor("TOR-RES-001")
def test_an_edited_sidecar_is_never_stale(tmp_path):
    """A converted model is cached (model.json); the sidecar's content is part of its fingerprint."""
    path = tmp_path / "small.nnet"
    path.write_text(SMALL)
    cache = tmp_path / "cache"
    first = zoo.load(path, cache_dir=cache)
    assert first.tolerance == 1e-5
    _with_sidecar(path, "atol = 3e-4\ndomain = [-0.25, 0.25]\n")
    second = zoo.load(path, cache_dir=cache)
    assert (second.tolerance, second.input_domain) == (3e-4, (-0.25, 0.25))
    _with_sidecar(path, "atol = 7e-4\nlow = [-0.1, -0.2]\nhigh = [0.1, 0.2]\n")
    third = zoo.load(path, cache_dir=cache)
    assert (third.tolerance, third.input_domain) == (7e-4, ((-0.1, -0.2), (0.1, 0.2)))
    (records,) = [json.loads(p.read_text()) for p in (cache / "user").glob("*/model.json")]
    assert records["model"]["tolerance"] == 7e-4 and records["schema"] == "assay-zoo/3"
    (path.parent / (path.name + ".assay.toml")).unlink()
    assert zoo.load(path, cache_dir=cache).tolerance == 1e-5
