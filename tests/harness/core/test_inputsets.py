"""Input sets beyond uniform sampling: seeded, inside the domain, and doing what each promises (corners at the
bounds, threshold points on the boundary of a state, coverage-directed sets keeping only inputs that add a
state) - with a known state function standing for the reference's activations."""

import numpy as np
import pytest

from harness.core import inputsets
from harness.models.model import Model

MODEL = Model(name="box", files={}, input_shape=(3,), output_shape=(1,), layout="C", output_layout="C",
              input_domain=((-1.0, 0.0, 2.0), (1.0, 0.5, 6.0)))


def states(inputs: np.ndarray) -> np.ndarray:
    """Two 'neurons': x0 > 0.3 and x0 + x2 > 4."""
    return np.stack([inputs[:, 0] > 0.3, inputs[:, 0] + inputs[:, 2] > 4.0], axis=1)


@pytest.mark.tor("TOR-SEM-010", "TOR-EVD-009")
@pytest.mark.parametrize("kind", inputsets.SETS)
def test_every_set_is_seeded_and_inside_the_domain(kind):
    first = inputsets.make_set(kind, MODEL, 40, 7, states)
    again = inputsets.make_set(kind, MODEL, 40, 7, states)
    other = inputsets.make_set(kind, MODEL, 40, 8, states)
    low, high = (np.asarray(b, np.float32) for b in MODEL.input_domain)
    assert first.dtype == np.float32 and np.array_equal(first, again) and not np.array_equal(first, other)
    assert ((first >= low) & (first <= high)).all() and 0 < len(first) <= 40


def test_corners_are_the_bounds_the_middle_and_every_corner_when_they_are_few():
    points = inputsets.corners(MODEL, 11, 0)
    low, high = (np.asarray(b, np.float32) for b in MODEL.input_domain)
    assert np.array_equal(points[0], low) and np.array_equal(points[1], high)
    assert np.allclose(points[2], (low + high) / 2)
    assert {tuple(p) for p in points[3:11]} == {tuple(np.where(bits, high, low)) for bits in np.ndindex(2, 2, 2)}


def test_threshold_points_sit_on_the_boundary_of_a_state():
    points = inputsets.thresholds(MODEL, 60, 0, states)
    near = (np.abs(points[:, 0] - 0.3) < 1e-3) | (np.abs(points[:, 0] + points[:, 2] - 4.0) < 1e-3)
    assert near.mean() > 0.5  # every pair whose ends differ in a state (the others keep their first end)
    uniform = inputsets.make_set("uniform", MODEL, 60, 0)
    assert ((np.abs(uniform[:, 0] - 0.3) < 1e-3) | (np.abs(uniform[:, 0] + uniform[:, 2] - 4.0) < 1e-3)).mean() < 0.1


def test_the_coverage_directed_set_keeps_only_inputs_that_reach_a_new_state():
    kept = inputsets.coverage_directed(MODEL, 50, 0, states)
    reached = states(kept)
    assert inputsets.state_coverage(reached) == {"states": 4, "reached": 4, "percent": 100.0}
    assert len(kept) <= 4  # each kept input added at least one of the four (neuron, on/off) states
    for k in range(1, len(kept)):
        before = reached[:k]
        assert ((reached[k] & ~before.any(axis=0)) | (~reached[k] & ~(~before).any(axis=0))).any()
