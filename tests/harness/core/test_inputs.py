import numpy as np

from harness.core.inputs import make_inputs
from harness.models.model import Model


def model(domain=(-0.5, 0.5)):
    return Model(name="m", files={}, input_shape=(4, 3, 2), output_shape=(5,), layout="HWC",
                 output_layout="C", input_domain=domain)


def test_inputs_are_seeded_float32_and_inside_the_domain():
    first = make_inputs(model(), 200, seed=7)
    assert first.shape == (200, 4, 3, 2) and first.dtype == np.float32
    np.testing.assert_array_equal(first, make_inputs(model(), 200, seed=7))
    assert not np.array_equal(first, make_inputs(model(), 200, seed=8))
    assert first.min() >= -0.5 and first.max() <= 0.5
    assert first.min() < -0.45 and first.max() > 0.45  # the whole domain is used
