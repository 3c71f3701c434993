"""Seeded test inputs over each model's documented input domain.

Every input element is drawn uniformly from its own interval of
``model.input_domain`` (one interval for all elements, or one per feature,
channel or element; ``Model.domain_bounds``) with NumPy's PCG64 generator
seeded by ``seed`` alone, in the model's canonical layout, so the same (model
shape, domain, count, seed) always gives the same inputs on any machine. A
domain that is one interval draws exactly what it drew before per-element
domains existed.

Every element takes exactly one 64-bit draw of the generator, so the inputs
``start .. start + count`` of a larger set are drawn alone by advancing the
generator past the elements before them: a shard of the inputs is the same
slice of the set an unsharded run draws (``harness.core.shards``), without
drawing the rest.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from harness.models.model import Model


def make_inputs(model: Model, count: int, seed: int, start: int = 0) -> np.ndarray:
    """``count`` inputs of shape ``model.input_shape``, float32, element ``i`` inside its own interval.

    ``start``: the first input's index in the seed's sequence; ``make_inputs(m, k, s, start=a)`` equals
    ``make_inputs(m, a + k, s)[a:]``.
    """
    if count < 1 or start < 0:
        raise ValueError("at least one input is needed, from a non-negative index")
    rng = np.random.default_rng(seed)
    rng.bit_generator.advance(start * int(np.prod(model.input_shape, dtype=np.int64)))
    if model.domain_is_uniform():
        low, high = (float(bound) for bound in model.input_domain)
        return rng.uniform(low, high, size=(count, *model.input_shape)).astype(np.float32)
    low, high = model.domain_bounds()
    # Same stream as the scalar case: one double in [0, 1) per element, in C order, scaled per element.
    unit = rng.random(size=(count, *model.input_shape))
    values = (low + (high - low) * unit).astype(np.float32)
    # float32 rounding may step just outside a bound: clamp it back in.
    return np.clip(values, low.astype(np.float32), high.astype(np.float32))


_DIGESTS: dict[tuple, str] = {}  # this process's input sets already hashed (a campaign asks once per shard)


def inputs_sha256(model: Model, count: int, seed: int) -> str:
    """SHA-256 of ``make_inputs(model, count, seed)``'s bytes: the inputs' part of a cache key.

    Remembered per process under what the draw depends on (input shape, domain, count, seed), so a key
    asked for by every shard and every reference costs one draw and one hash, not one per call.
    """
    key = (tuple(model.input_shape), json.dumps(model.domain_json()), count, seed)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(make_inputs(model, count, seed).tobytes()).hexdigest()
    return _DIGESTS[key]
