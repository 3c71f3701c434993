"""The float64 arbiter: attribution on hand-built arrays, then on a net whose float32 references are visibly noisy."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from harness import references
from harness.models import zoo
from harness.core.arbiter import Attribution, arbitrate, closest, error, format_error
from harness.models.tf_runtime import keras, save_keras

# --- hand-built arrays ------------------------------------------------------------------------

EXACT = np.array([[1.0, 2.0], [3.0, -4.0]])


@pytest.mark.tor("TOR-SEM-007")
def test_c_closer():
    c = EXACT + [[1.2e-6, 0], [0, -1e-7]]
    ref = EXACT + [[0, 5.9e-3], [1e-4, 0]]
    result = arbitrate(c, ref, EXACT, "keras")
    assert result.closer == "C"
    assert result.text == "C closer to float64 than keras (C 1.2e-6, keras 5.9e-3)"
    assert result.c_error == pytest.approx(1.2e-6) and result.reference_error == pytest.approx(5.9e-3)
    assert result.n_inputs == 2 and result.reference == "keras"


@pytest.mark.tor("TOR-SEM-007")
def test_reference_closer():
    c = EXACT + [[0, 0], [0.5, 0]]
    ref = EXACT + 1e-7
    result = arbitrate(c, ref, EXACT, "onnxruntime")
    assert result.closer == "onnxruntime"
    assert result.text == "onnxruntime closer to float64 than C (C 5.0e-1, onnxruntime 1.0e-7)"


@pytest.mark.tor("TOR-SEM-007")
def test_tie_when_both_are_equally_far_or_exact():
    assert arbitrate(EXACT, EXACT, EXACT, "keras").text == "C and keras equally close to float64 (C 0, keras 0)"
    assert arbitrate(EXACT + 1, EXACT - 1, EXACT, "keras").closer == "tie"


@pytest.mark.tor("TOR-SEM-007")
def test_nan_and_infinities():
    c = EXACT.copy()
    c[1, 0] = np.nan
    result = arbitrate(c, EXACT + 1e-3, EXACT, "keras")
    assert result.c_error == np.inf and result.closer == "keras"
    assert result.text == "keras closer to float64 than C (C inf, keras 1.0e-3)"
    exact = np.array([[np.inf, 1.0]])
    assert error(np.array([[np.inf, 1.0]]), exact).tolist() == [0.0]  # the same infinity is no error
    assert error(np.array([[-np.inf, 1.0]]), exact).tolist() == [np.inf]
    assert error(np.array([[1e300, 1.0]]), exact).tolist() == [np.inf]


@pytest.mark.tor("TOR-SEM-001")
def test_error_is_the_infinity_norm_per_input():
    exact = np.zeros((3, 2, 2, 1))
    outputs = exact.copy()
    outputs[1, 0, 1, 0] = -0.25
    outputs[2, 1, 1, 0] = 0.125
    outputs[2, 0, 0, 0] = -0.0625
    assert error(outputs, exact).tolist() == [0.0, 0.25, 0.125]
    assert error(np.zeros((0, 4)), np.zeros((0, 4))).shape == (0,)
    assert arbitrate(np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((0, 4))).closer == "tie"


@pytest.mark.tor("TOR-SEM-006")
def test_shapes_must_match():
    with pytest.raises(ValueError, match=r"outputs have shape \(2, 3\), the float64 outputs \(2, 2\)"):
        arbitrate(np.zeros((2, 3)), EXACT, EXACT)


def test_figures_of_a_record():
    result = arbitrate(EXACT + 1e-6, EXACT, EXACT, "keras")
    assert isinstance(result, Attribution)
    assert result.as_dict() == {"reference": "keras", "n_inputs": 2, "c_error": result.c_error,
                                "reference_error": 0.0, "closer": "keras", "text": result.text}


def test_closest_of_several_references():
    c = EXACT + [[0, 2e-7], [0, 0]]
    ort = EXACT + [[0, 0], [-1.2e-6, 0]]
    expected = EXACT + [[6e-8, 0], [0, 0]]
    ranking = closest(c, {"onnxruntime": ort, "expected": expected}, EXACT)
    assert ranking.closer == "expected" and ranking.n_inputs == 2
    assert ranking.errors == {"C": pytest.approx(2e-7), "onnxruntime": pytest.approx(1.2e-6),
                              "expected": pytest.approx(6e-8)}
    assert ranking.text == "expected closer to float64 than C and onnxruntime (C 2.0e-7, onnxruntime 1.2e-6, " \
                           "expected 6.0e-8)"


def test_closest_names_every_one_equally_close():
    ranking = closest(EXACT, {"onnxruntime": EXACT, "expected": EXACT + 1e-3}, EXACT)
    assert ranking.closer == "tie"
    assert ranking.text == "C and onnxruntime equally close to float64, closer than expected (C 0, onnxruntime 0, " \
                           "expected 1.0e-3)"
    assert closest(EXACT, {"a": EXACT, "b": EXACT}, EXACT).text == "C, a and b equally close to float64 (C 0, a 0, " \
                                                                  "b 0)"


@pytest.mark.parametrize("value, text", [(1.2e-6, "1.2e-6"), (5.94e-3, "5.9e-3"), (0.0, "0"), (12345.0, "1.2e4"),
                                         (1.0, "1.0e0"), (np.inf, "inf"), (np.nan, "inf")])
def test_format_error(value, text):
    assert format_error(value) == text


# --- a real net: outputs around 1e4, float32 noise around 1e-3 ----------------------------------


@pytest.fixture(scope="module")
def large_dense(tmp_path_factory):
    """8 -> 16 ReLU -> 4, weights up to 40 in magnitude: outputs in the thousands."""
    k = keras()
    keras_model = k.Sequential([k.Input((8,)), k.layers.Dense(16, activation="relu"), k.layers.Dense(4)])
    rng = np.random.default_rng(2)
    for layer in keras_model.layers:
        layer.set_weights([rng.uniform(-40, 40, w.shape).astype(np.float32) for w in layer.get_weights()])
    directory = tmp_path_factory.mktemp("large-dense")
    save_keras(keras_model, directory / "large.keras")
    model = zoo.load(directory / "large.keras", cache_dir=directory / "cache")
    return keras_model, model


def _exact(keras_model, x):
    """The net's outputs in exact rational arithmetic on the float32 weights and inputs, rounded to float64."""
    def rational(array):
        return [[Fraction(float(v)) for v in row] for row in np.atleast_2d(array)]

    (w1, b1), (w2, b2) = ([rational(w) for w in layer.get_weights()] for layer in keras_model.layers)
    b1, b2 = b1[0], b2[0]
    outputs = []
    for row in x:
        xs = [Fraction(float(v)) for v in row]
        hidden = [max(Fraction(0), sum(xs[i] * w1[i][j] for i in range(len(xs))) + b1[j]) for j in range(len(b1))]
        outputs.append([float(sum(hidden[j] * w2[j][k] for j in range(len(hidden))) + b2[k]) for k in range(len(b2))])
    return np.array(outputs)


def test_float64_is_closer_to_exact_than_float32_references(large_dense):
    keras_model, model = large_dense
    x = np.random.default_rng(0).uniform(-1, 1, (24, 8)).astype(np.float32)
    exact = _exact(keras_model, x)
    assert np.max(np.abs(exact)) > 5e3
    from_float64 = references.get("float64").run(model, x)
    f64_error = np.max(np.abs(from_float64 - exact))
    assert f64_error <= 1e-12 * np.max(np.abs(exact))
    for name in ("keras", "onnxruntime"):
        f32_error = np.max(np.abs(references.get(name).run(model, x) - exact))
        assert f32_error > 1e-5  # float32 noise, far above the float64 error
        assert f64_error < f32_error / 1e6


def test_arbiter_on_the_large_net(large_dense):
    keras_model, model = large_dense
    x = np.random.default_rng(0).uniform(-1, 1, (24, 8)).astype(np.float32)
    exact = references.get("float64").run(model, x)
    from_keras = references.get("keras").run(model, x)

    # A faithful generator: every output the float32 nearest to the true value.
    faithful = arbitrate(exact.astype(np.float32), from_keras, exact, "keras")
    assert faithful.closer == "C" and faithful.text.startswith("C closer to float64 than keras (C ")
    assert faithful.c_error < faithful.reference_error

    # A defective generator: one output off by 0.05 (a relative 1e-5 of its value).
    defective = exact.astype(np.float32)
    defective[5, 2] += np.float32(0.05)
    verdict = arbitrate(defective, from_keras, exact, "keras")
    assert verdict.closer == "keras" and verdict.text.startswith("keras closer to float64 than C")
    assert verdict.c_error > 0.04

    # C bit-identical to the reference: a tie.
    assert arbitrate(from_keras, from_keras, exact, "keras").closer == "tie"
