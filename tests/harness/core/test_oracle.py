"""The oracle implements Definition 15 and never mistakes NaN for a small error."""

import numpy as np
import pytest

from harness.core import oracle


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
