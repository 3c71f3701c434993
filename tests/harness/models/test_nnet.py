"""The ACAS-Xu .nnet format: parsing, writing, and conversion to Keras + ONNX."""

from __future__ import annotations

import numpy as np
import pytest

from harness import references
from harness.models import zoo
from harness.errors import ModelError
from harness.references import keras_ref
from harness.models import nnet

# 2 inputs -> 3 ReLU -> 1 linear, with normalisation data that must NOT be applied.
SMALL = """\
// A tiny network for tests
// second comment line
2,2,1,3,
2,3,1,
0,
-1.0,0.0,
1.0,10.0,
0.0,5.0,0.0,
2.0,10.0,1.0,
1.0,-2.0,
0.5,0.25,
-1.0,1.0,
0.1,
-0.2,
0.3,
1.0,2.0,-1.0,
0.05,
"""


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "zoo-cache"


def _forward(x):
    w1 = np.array([[1.0, -2.0], [0.5, 0.25], [-1.0, 1.0]])
    b1 = np.array([0.1, -0.2, 0.3])
    w2, b2 = np.array([[1.0, 2.0, -1.0]]), np.array([0.05])
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def test_read_small_file(tmp_path):
    path = tmp_path / "small.nnet"
    path.write_text(SMALL)
    net = nnet.read(path)
    assert net.sizes == [2, 3, 1]
    assert net.weights[0].shape == (3, 2) and net.biases[1].tolist() == [0.05]
    assert net.input_min.tolist() == [-1.0, 0.0] and net.ranges.tolist() == [2.0, 10.0, 1.0]
    assert net.normalized_domain() == ((-0.5, -0.5), (0.5, 0.5))  # per input: (min - mean) / range ..


def test_small_file_runs_without_normalisation(tmp_path):
    path = tmp_path / "small.nnet"
    path.write_text(SMALL)
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert (model.name, model.input_shape, model.output_shape, model.layout) == ("small", (2,), (1,), "C")
    assert set(model.files) == {"keras", "onnx"} and model.input_domain == ((-0.5, -0.5), (0.5, 0.5))
    assert "normalisation is not applied" in model.description
    x = np.random.default_rng(0).uniform(-0.5, 0.5, (20, 2)).astype(np.float32)
    for name in ("keras", "onnxruntime"):
        assert np.max(np.abs(references.get(name).run(model, x) - _forward(x.astype(np.float64)))) <= 1e-6


def test_zoo_acas_round_trip(zoo_cache, tmp_path):
    source = zoo.load("acas-reg50", cache_dir=zoo_cache)
    net = nnet.from_keras(keras_ref.load(source.file("keras")), source.input_domain)
    path = tmp_path / "reg50.nnet"
    nnet.write(path, net)
    again = nnet.read(path)
    assert again.sizes == [5, *(50,) * 7, 5]
    assert all(np.array_equal(a.astype(np.float32), b.astype(np.float32))  # 9 digits: float32-exact
               for a, b in zip(again.weights, net.weights, strict=True))
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert all(np.array_equal(a, b) for a, b in zip(model.domain_bounds(), source.domain_bounds(), strict=True))
    assert [w.shape for w in keras_ref.load(model.file("keras")).get_weights()] == \
        [w.shape for w in keras_ref.load(source.file("keras")).get_weights()]
    x = np.random.default_rng(1).uniform(-0.5, 0.5, (100, 5)).astype(np.float32)
    expected = references.get("keras").run(source, x)
    assert np.array_equal(references.get("keras").run(model, x), expected)
    assert np.max(np.abs(references.get("onnxruntime").run(model, x) - expected)) <= 1e-6


# The input bounds of the ACAS-Xu networks (ACASXU_run2a_*.nnet): range to intruder (ft), angle to intruder
# and heading of the intruder (rad), own and intruder speed (ft/s).
ACAS_MIN = [0.0, -3.141593, -3.141593, 100.0, 0.0]
ACAS_MAX = [60760.0, 3.141593, 3.141593, 1200.0, 1200.0]
ACAS_MEANS = [1.9791091e04, 0.0, 0.0, 650.0, 600.0, 7.5188840201005975]
ACAS_RANGES = [60261.0, 6.28318530718, 6.28318530718, 1100.0, 1200.0, 373.94992]


def _acas_like(path, means, ranges):
    rng = np.random.default_rng(3)
    net = nnet.NNet([rng.uniform(-0.5, 0.5, (4, 5)), rng.uniform(-0.5, 0.5, (5, 4))],
                    [rng.uniform(-0.1, 0.1, 4), rng.uniform(-0.1, 0.1, 5)],
                    np.array(ACAS_MIN), np.array(ACAS_MAX), np.array(means), np.array(ranges))
    nnet.write(path, net)
    return path


@pytest.mark.tor("TOR-SEM-010")
def test_each_input_is_drawn_from_its_own_interval(tmp_path):
    """A heading in ±π stays in ±π even when another input of the same file ranges up to 60760."""
    from harness.core.inputs import make_inputs

    path = _acas_like(tmp_path / "raw.nnet", [0.0] * 6, [1.0] * 6)  # identity normalisation: raw units
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    low, high = model.domain_bounds()
    np.testing.assert_allclose(low, ACAS_MIN) and np.testing.assert_allclose(high, ACAS_MAX)
    x = make_inputs(model, 2000, seed=0)
    assert np.all(np.abs(x[:, 1:3]) <= np.float32(3.141593))
    assert np.all((x[:, 3] >= 100.0) & (x[:, 3] <= 1200.0)) and x[:, 0].max() > 50000.0
    again = zoo.load(path, cache_dir=tmp_path / "cache")  # from the cache (model.json): same bounds
    assert again.input_domain == model.input_domain
    # The usual normalisation: each input's own normalised box, e.g. [-0.3284, 0.6799] for the range input.
    normalised = zoo.load(_acas_like(tmp_path / "norm.nnet", ACAS_MEANS, ACAS_RANGES), cache_dir=tmp_path / "cache")
    low, high = normalised.domain_bounds()
    np.testing.assert_allclose(low, [-0.328423, -0.5, -0.5, -0.5, -0.5], atol=1e-6)
    np.testing.assert_allclose(high, [0.679858, 0.5, 0.5, 0.5, 0.5], atol=1e-6)
    assert normalised.domain_json() == [list(low), list(high)]


def _broken(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("content", "cause"),
    [
        (SMALL[: SMALL.index("0.3,")], "truncated file: expected layer 0 bias 2"),
        (_broken(SMALL, "0.5,0.25,", "0.5,"), "line 11: shape mismatch: expected 2 values for layer 0 weight row 1"),
        (_broken(SMALL, "2,3,1,", "2,4,1,"), "shape mismatch: layer sizes [2, 4, 1] disagree"),
        (_broken(SMALL, "-1.0,1.0,", "-1.0,abc,"), "expected numbers for layer 0 weight row 2"),
        (SMALL + "7,\n", "shape mismatch: data after the last layer"),
        ("// only a comment\n", "truncated file: expected the header"),
        (_broken(SMALL, "0.5,0.25,", "nan,0.25,"), "layer 0: weights or biases contain NaN or infinity"),
        (_broken(SMALL, "1.0,10.0,", "inf,10.0,"), "the input maximums contain NaN or infinity"),
        (_broken(SMALL, "-1.0,0.0,", "2.0,0.0,"), "input 0: minimum 2 is above maximum 1"),
    ],
)
def test_bad_nnet_files(content, cause, tmp_path):
    path = tmp_path / "bad.nnet"
    path.write_text(content)
    with pytest.raises(ModelError) as info:
        zoo.load(path, cache_dir=tmp_path / "cache")
    assert str(info.value).startswith(f"{path}: ") and cause in str(info.value)
    assert "\n" not in str(info.value)


def test_binary_file_named_nnet(tmp_path):
    path = tmp_path / "blob.nnet"
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ModelError, match=r"blob\.nnet: not an NNet text file"):
        zoo.load(path, cache_dir=tmp_path / "cache")


def test_only_relu_dense_stacks_convert(zoo_cache):
    lenet = keras_ref.load(zoo.load("lenet5", cache_dir=zoo_cache).file("keras"))
    with pytest.raises(ModelError, match="NNet format holds ReLU Dense stacks"):
        nnet.from_keras(lenet)
