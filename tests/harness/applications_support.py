"""A support module (no tests): real architectures as ``keras.applications`` builds them, with trained-looking
parameters. A fresh network's batch normalisations are the identity and its biases zero, which hides what real
statistics do to the rounding (the NaN bound of issue 40 appeared only with them), so every batch normalisation's
statistics and every bias are drawn from a seeded generator."""

from __future__ import annotations

import numpy as np

from harness.models.tf_runtime import keras


def perturbed(network, seed: int):
    """``network`` with every batch normalisation's statistics and every bias drawn from ``seed``."""
    k = keras()
    rng = np.random.default_rng(seed)
    for layer in network.layers:
        weights = layer.get_weights()
        if isinstance(layer, k.layers.BatchNormalization):
            g, b, m, v = weights
            layer.set_weights([g * rng.uniform(0.5, 1.5, g.shape), b + rng.normal(0, 0.1, b.shape),
                               rng.normal(0, 0.5, m.shape), rng.uniform(0.5, 2.0, v.shape)])
        elif getattr(layer, "use_bias", False) and weights:
            layer.set_weights([*weights[:-1], weights[-1] + rng.normal(0, 0.1, weights[-1].shape)])
    return network
