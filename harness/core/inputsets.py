"""Test input sets beyond uniform sampling, each seeded and reproducible.

Uniform inputs leave parts of a network's behaviour unexercised: a ReLU6 clip never reached, a neuron
never off, the arg-max of a softmax always the same class. The sets here are drawn from the model's input
domain (``Model.domain_bounds``) with NumPy's PCG64 generator seeded by ``seed``:

- ``uniform``: ``harness.core.inputs.make_inputs`` (every stage's inputs);
- ``corners``: the domain's extreme points: every element at its low bound, at its high bound, at the
  middle, then every corner when there are few (2^d <= count), else seeded corners (each element at its
  low or high bound) and seeded edge points (a uniform point with a random subset of its elements moved
  to a bound), alternately;
- ``thresholds``: points on activation boundaries: pairs of uniform inputs; for each pair, one
  activation state that differs between its ends (an element of a layer output positive on one side and
  not on the other - a ReLU's or a tanh's zero, a clip's knee as its output leaves 0 - or the arg-max
  class) is chosen at random, and the segment is bisected on that state (``BISECTIONS`` halvings) to the
  point just across the boundary;
- ``coverage``: coverage-directed: candidates drawn in batches (uniform with new seeds, corners,
  thresholds) are kept, in order, when they reach an activation state no kept input reached (an element of
  a layer output seen positive, or seen not positive, for the first time; an arg-max class for the first
  time), until a batch adds nothing (the coverage stops increasing), ``count`` inputs are kept or
  ``MAX_ROUNDS`` batches were drawn. The states are finer than the branch outcomes of the code (a ReLU
  select's two outcomes are reached once any one element takes both states), so a set that covers the states
  covers those branches; the code's statement, branch and MC/DC coverage of every set is measured after.

The activation states come from a function the caller supplies (``States``: inputs -> a boolean (N, S)
array); the evidence stage computes them with the reference's intermediate outputs, never with the code
under test.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from harness.core.inputs import make_inputs
from harness.models.model import Model

SETS = ("uniform", "corners", "thresholds", "coverage")
BISECTIONS = 16  # halvings of a segment: the point is within 2^-16 of its length from the boundary
MAX_ROUNDS = 8  # candidate batches the coverage-directed search draws at most
States = Callable[[np.ndarray], np.ndarray]  # inputs (N, *input_shape) -> activation states, bool (N, S)


def make_set(kind: str, model: Model, count: int, seed: int, states: States | None = None) -> np.ndarray:
    """``count`` inputs (at most; ``coverage`` may keep fewer) of set ``kind``, float32, canonical layout."""
    if kind == "uniform":
        return make_inputs(model, count, seed)
    if kind == "corners":
        return corners(model, count, seed)
    if states is None:
        raise ValueError(f"input set {kind} needs the activation states of the reference")
    if kind == "thresholds":
        return thresholds(model, count, seed, states)
    if kind == "coverage":
        return coverage_directed(model, count, seed, states)
    raise ValueError(f"unknown input set {kind!r} (known: {', '.join(SETS)})")


def corners(model: Model, count: int, seed: int) -> np.ndarray:
    low, high = model.domain_bounds()
    points = [low, high, (low + high) / 2]
    size = low.size
    if size < 30 and 2 ** size <= count - len(points):
        for bits in itertools.product((False, True), repeat=size):
            points.append(np.where(np.reshape(bits, low.shape), high, low))
    rng = np.random.default_rng(seed)
    while len(points) < count:
        if len(points) % 2:
            points.append(np.where(rng.random(low.shape) < 0.5, high, low))
        else:
            point = low + (high - low) * rng.random(low.shape)
            moved = rng.random(low.shape) < rng.random()
            points.append(np.where(moved, np.where(rng.random(low.shape) < 0.5, high, low), point))
    return _inside(model, np.asarray(points[:count]))


def thresholds(model: Model, count: int, seed: int, states: States) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = make_inputs(model, count, seed).astype(np.float64)
    b = make_inputs(model, count, seed + 1).astype(np.float64)
    start, end = states(a.astype(np.float32)), states(b.astype(np.float32))
    rows = np.arange(count)
    columns = np.zeros(count, dtype=int)
    split = np.zeros(count, dtype=bool)
    for i in rows:
        differing = np.flatnonzero(start[i] != end[i])
        if differing.size:
            columns[i], split[i] = rng.choice(differing), True
    lo, hi = np.zeros(count), np.ones(count)
    shape = (count,) + (1,) * (a.ndim - 1)
    for _ in range(BISECTIONS):
        middle = (lo + hi) / 2
        state = states(_inside(model, a + middle.reshape(shape) * (b - a)))[rows, columns]
        same = state == start[rows, columns]
        lo, hi = np.where(split & same, middle, lo), np.where(split & ~same, middle, hi)
    return _inside(model, a + np.where(split, hi, 0.0).reshape(shape) * (b - a))


def coverage_directed(model: Model, count: int, seed: int, states: States) -> np.ndarray:
    kept: list[np.ndarray] = []
    seen_on = seen_off = None
    for round_ in range(MAX_ROUNDS):
        kind = ("uniform", "corners", "thresholds")[round_ % 3] if round_ < 3 else "uniform"
        batch = make_set(kind, model, count, seed + 1000 * (round_ + 1), states)
        on = states(batch)
        if seen_on is None:
            seen_on, seen_off = np.zeros(on.shape[1], bool), np.zeros(on.shape[1], bool)
        added = 0
        for x, state in zip(batch, on):
            if len(kept) == count:
                break
            if (state & ~seen_on).any() or (~state & ~seen_off).any():
                kept.append(x)
                seen_on |= state
                seen_off |= ~state
                added += 1
        if not added or len(kept) == count:
            break
    return np.asarray(kept, dtype=np.float32)


def state_coverage(states_of_set: np.ndarray) -> dict:
    """How many activation states a set reaches: (element, positive) and (element, not positive) pairs."""
    on, off = states_of_set.any(axis=0), (~states_of_set).any(axis=0)
    total = 2 * states_of_set.shape[1]
    return {"states": total, "reached": int(on.sum() + off.sum()),
            "percent": round(100.0 * float(on.sum() + off.sum()) / total, 2) if total else 100.0}


def _inside(model: Model, values: np.ndarray) -> np.ndarray:
    """``values`` as float32 clamped into the domain (float32 rounding may step just outside a bound)."""
    low, high = model.domain_bounds()
    return np.clip(values.astype(np.float32), low.astype(np.float32), high.astype(np.float32))
