"""Fixtures the stage tests share."""

import numpy as np
import pytest

# Dense(3 -> 2): hand-written C for it is in the tests that use it
DENSE_WEIGHTS = np.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.125]], np.float32)
DENSE_BIAS = np.array([0.1, -0.2], np.float32)


@pytest.fixture(scope="module")
def dense_keras_model(tmp_path_factory) -> str:
    """A real Keras file: 3 inputs -> Dense(2) with DENSE_WEIGHTS and DENSE_BIAS."""
    import keras

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([DENSE_WEIGHTS, DENSE_BIAS])
    model.save(path)
    return str(path)
