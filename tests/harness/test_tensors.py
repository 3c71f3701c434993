import numpy as np
import pytest

from harness import tensors as layout


def test_convert_hwc_to_chw_and_back():
    batch = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)  # N, H, W, C
    chw = layout.convert(batch, "HWC", "CHW")
    assert chw.shape == (2, 5, 3, 4)
    assert chw[1, 4, 2, 3] == batch[1, 2, 3, 4]
    np.testing.assert_array_equal(layout.convert(chw, "CHW", "HWC"), batch)
    assert layout.shape_in((3, 4, 5), "HWC", "CHW") == (5, 3, 4)


def test_convert_refuses_mismatched_layouts():
    with pytest.raises(ValueError):
        layout.convert(np.zeros((1, 2, 3)), "HWC", "CHW")
