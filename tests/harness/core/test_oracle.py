"""The oracle implements Definition 15 and never mistakes NaN for a small error."""

import numpy as np
import pytest

from harness.core import oracle
from harness.core.oracle import FAIL, PASS, compare, recheck


@pytest.mark.tor("TOR-SEM-001")
def test_infinity_norm_is_the_largest_absolute_difference_per_input():
    expected = np.zeros((3, 4), np.float32)
    outputs = expected.copy()
    outputs[1, 2] = -3e-6
    outputs[2, 0] = 1e-6
    errors = oracle.infinity_norm_errors(outputs, expected)
    np.testing.assert_allclose(errors, [0.0, 3e-6, 1e-6], rtol=1e-6)


@pytest.mark.tor("TOR-SEM-002")
def test_verdict_pass_and_fail_around_the_tolerance():
    expected = np.ones((5, 2), np.float32)
    close = expected + np.float32(4e-6)
    far = expected.copy()
    far[3, 1] += np.float32(2e-5)
    ok = oracle.compare(close, expected, 1e-5)
    assert ok.verdict == oracle.PASS and ok.cause is None
    bad = oracle.compare(far, expected, 1e-5)
    assert bad.verdict == oracle.FAIL
    assert bad.index_of_worst_input == 3
    assert "input #3" in bad.cause and bad.max_abs_error > 1e-5


@pytest.mark.tor("TOR-SEM-003")
def test_nan_in_generated_outputs_is_an_error_naming_the_input():
    expected = np.zeros((4, 3), np.float32)
    outputs = expected.copy()
    outputs[2, 1] = np.nan
    result = oracle.compare(outputs, expected, 1.0)
    assert result.verdict == oracle.ERROR
    assert "generated code produced NaN for input #2" in result.cause


@pytest.mark.tor("TOR-SEM-003")
def test_inf_in_reference_is_reported_as_the_reference():
    expected = np.zeros((2, 3), np.float32)
    expected[0, 0] = np.inf
    result = oracle.compare(np.zeros((2, 3), np.float32), expected, 1.0)
    assert result.verdict == oracle.ERROR and result.cause.startswith("reference produced Inf")


@pytest.mark.tor("TOR-SEM-006")
def test_shape_mismatch_is_an_error():
    result = oracle.compare(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32), 1.0)
    assert result.verdict == oracle.ERROR and "shape" in result.cause


def test_derived_verdict_against_the_bound_output_by_output():
    exact = np.array([[1.0, -2.0], [0.5, 3.0]])
    step = 2.0 ** -20  # offsets and sums exact in float64
    bound = np.array([[step, 2 ** -10], [step, step]])
    inside = oracle.compare_to_bound(exact + np.array([[step / 2, -2 ** -11], [0.0, step]]), exact, bound)
    assert inside.verdict == oracle.PASS and inside.cause is None
    assert inside.c_distance == 2 ** -11 and inside.bound == 2 ** -10
    assert inside.tightness == 1.0  # the output at (1, 1) uses its whole bound
    outside = oracle.compare_to_bound(exact + np.array([[2 * step, 0.0], [0.0, 0.0]]), exact, bound)
    assert outside.verdict == oracle.FAIL and "input #0, output 0" in outside.cause
    assert "1 inputs outside the bound" in outside.cause
    assert oracle.compare_to_bound(exact, exact, bound).tightness == np.inf


def test_derived_verdict_never_passes_nan():
    exact = np.zeros((2, 2))
    got = np.array([[0.0, 0.0], [np.nan, 0.0]])
    check = oracle.compare_to_bound(got, exact, np.full((2, 2), np.inf))
    assert check.verdict == oracle.ERROR and check.cause.startswith("generated code produced NaN for input #1")


@pytest.mark.tor("TOR-EVD-011")
def test_recheck_finds_a_verdict_its_own_figures_do_not_give():
    """The figures a record keeps bound the element-wise rule: a pass needs max |C - r| <= atol + rtol max |r|, a fail
    max |C - r| > atol; under the derived rule, the derived figures decide. The verdicts compare() gives always
    recheck."""
    rng = np.random.default_rng(3)
    reference = rng.normal(size=(20, 5)).astype(np.float32)
    for shift, verdict in ((1e-7, PASS), (1e-3, FAIL)):
        c = compare(reference + np.float32(shift), reference, 1e-5, 5e-6)
        record = {"verdict": c.verdict, "max_abs_error": c.max_abs_error, "tolerance": 1e-5, "rtol": 5e-6,
                  "max_abs_reference": c.max_abs_reference, "cause": c.cause}
        assert c.verdict == verdict and recheck(record) is None
    passing = {"verdict": PASS, "max_abs_error": 2.4e-7, "tolerance": 1e-5, "rtol": 5e-6, "max_abs_reference": 0.64}
    assert recheck(passing) is None
    assert recheck({**passing, "max_abs_error": 1e-3}) == ("pass with max |C - reference| = 1.0000e-03 above atol + "
                                                           "rtol x max |reference| = 1.3200e-05")
    assert recheck({**passing, "verdict": FAIL}) == "fail with max |C - reference| = 2.4000e-07 within atol 1e-05"
    assert "without finite figures" in recheck({k: v for k, v in passing.items() if k != "max_abs_reference"})
    assert "without finite figures" in recheck({**passing, "max_abs_error": float("nan")})
    derived = {**passing, "max_abs_error": 1e-3, "derived": {"verdict": PASS, "c_distance": 1e-6, "bound": 2e-6}}
    assert recheck({**derived, "review": "above the fixed tolerance"}) is None  # the derived rule decided
    assert recheck(derived) == ("pass with max |C - reference| = 1.0000e-03 above atol + rtol x max |reference| = "
                                "1.3200e-05 and no review line")  # the second opinion's failure must be shown
    derived = {**derived, "review": "above the fixed tolerance"}
    assert recheck({**derived, "derived": {**derived["derived"], "c_distance": 3e-6}}) == \
        "pass with |C - float64| = 3.0000e-06 above the derived bound 2.0000e-06"
    assert recheck({**derived, "verdict": FAIL}) == "verdict fail, its derived figures give pass"
    assert recheck({"verdict": "error", "cause": "generated code produced NaN"}) is None
    assert recheck({"verdict": "error", "cause": None}) == "verdict error with no cause"


def _layers(verdict: str, distance: float, bound: float = 1e-7) -> dict:
    return {"rule": "layer-local", "judged": True, "verdict": verdict, "cause": f"layer d2 {verdict}",
            "layers": [{"layer": "d1", "judged": True, "c_distance": 5e-8, "bound": 1e-7},
                       {"layer": "d2", "judged": True, "c_distance": distance, "bound": bound},
                       {"layer": "flatten", "judged": False, "reason": "flattened in another order"}]}


def test_the_layer_local_verdict_fails_a_record_the_end_to_end_bound_passes():
    """Issue 40, item 1: a layer outside its local bound fails the record; an end-to-end fail or error stands; a
    layer-local bound that is no number makes a pass an error; figures that do not give their verdict are found."""
    assert oracle.with_layers(PASS, None, _layers(FAIL, 3e-6)) == (FAIL, "layer d2 fail")
    assert oracle.with_layers(FAIL, "end", _layers(FAIL, 3e-6)) == (FAIL, "end; layer d2 fail")
    assert oracle.with_layers("error", "NaN", _layers(FAIL, 3e-6)) == ("error", "NaN")
    assert oracle.with_layers(PASS, None, {**_layers(PASS, 0), "verdict": "error", "cause": "no bound"}) == \
        ("error", "no bound")
    assert oracle.with_layers(FAIL, "end", _layers(PASS, 5e-8)) == (FAIL, "end")
    assert oracle.with_layers(PASS, None, {"judged": False, "reason": "no layer buffers"}) == (PASS, None)
    end_to_end = {"max_abs_error": 2.4e-7, "tolerance": 1e-5, "rtol": 5e-6, "max_abs_reference": 1.0,
                  "derived": {"verdict": PASS, "c_distance": 1e-6, "bound": 2e-6}}
    failed = {**end_to_end, "verdict": FAIL, "layer_local": _layers(FAIL, 3e-6)}
    assert recheck(failed) is None
    assert recheck({**failed, "verdict": PASS}) == "verdict pass, its derived figures give fail"
    assert recheck({**failed, "layer_local": _layers(FAIL, 5e-8)}) == \
        "layer-local fail with every layer within its bound"
    assert recheck({**end_to_end, "verdict": PASS, "layer_local": _layers(PASS, 3e-6)}) == \
        "layer-local pass with layer d2 outside its bound"
    assert "finite bound" in recheck({**failed, "layer_local": _layers(FAIL, 3e-6, float("nan"))})
    assert recheck({**failed, "layer_local": _layers(FAIL, float("inf"))}) is None  # the C's NaN: outside any bound


def test_where_the_end_to_end_bound_is_no_number_the_layers_decide_if_they_reach_the_output():
    """Issue 40, item 4: a deep network's end-to-end bound overflows (a named error), but a layer-local verdict that
    judged every layer through the model's output decides, pass or fail; without the output judged, or on NaN
    outputs (an end-to-end error with a finite bound), the error stands; ``recheck`` replays the same rule."""
    whole = {**_layers(PASS, 5e-8), "cause": None, "covers_output": True}
    assert oracle.with_layers("error", "derived tolerance: no finite bound", whole, None) == (PASS, None)
    assert oracle.with_layers("error", "broken", {**_layers(FAIL, 3e-6), "covers_output": True}, None) == \
        (FAIL, "layer d2 fail")
    assert oracle.with_layers("error", "broken", _layers(PASS, 5e-8), None) == ("error", "broken")
    assert oracle.with_layers("error", "NaN", whole, 1e-5) == ("error", "NaN")
    broken = {"derived": {"verdict": "error", "c_distance": 1e-9, "bound": None}, "layer_local": whole}
    assert recheck({**broken, "verdict": PASS}) is None
    assert recheck({**broken, "verdict": FAIL}) == "verdict fail, its derived figures give pass"
    assert recheck({**broken, "verdict": PASS, "layer_local": _layers(PASS, 5e-8)}) == \
        "verdict pass, its derived figures give error"
