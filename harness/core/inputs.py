"""Seeded test inputs over each model's documented input domain.

Inputs are drawn uniformly from ``model.input_domain`` with NumPy's PCG64
generator seeded by ``seed`` alone, in the model's canonical layout, so the
same (model shape, count, seed) always gives the same inputs on any machine.
"""

from __future__ import annotations

import numpy as np

from harness.models.model import Model


def make_inputs(model: Model, count: int, seed: int) -> np.ndarray:
    """``count`` inputs of shape ``model.input_shape``, float32."""
    if count < 1:
        raise ValueError("at least one input is needed")
    low, high = model.input_domain
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=(count, *model.input_shape)).astype(np.float32)
