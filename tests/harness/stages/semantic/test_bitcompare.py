"""Bit-for-bit comparison of float32 arrays, with hand-computed ULP distances."""

import numpy as np
import pytest

from harness.stages.semantic import bitcompare

F = np.float32
TINY = np.float32(1e-45)  # smallest subnormal, bits 0x00000001
MAX = np.finfo(np.float32).max  # bits 0x7f7fffff


def compare(a, b):
    return bitcompare.compare(np.array(a, dtype=np.float32), np.array(b, dtype=np.float32))


@pytest.mark.tor("TOR-SEM-008")
def test_identical_arrays_have_no_difference():
    result = compare([[1.0, -2.5], [3.0, 0.0]], [[1.0, -2.5], [3.0, 0.0]])
    assert result == bitcompare.BitComparison(values=4, differing_values=0, differing_rows=0, max_ulp=0,
                                              nan_mismatches=0, index_of_max_ulp=None)
    assert result.identical


@pytest.mark.parametrize("a,b,ulp", [
    (F(1.0), np.nextafter(F(1.0), F(2.0)), 1),  # the next float up
    (F(1.0), np.nextafter(F(1.0), F(0.0)), 1),  # the next float down (half the spacing, still 1 ULP)
    (F(1.0), F(2.0), 2 ** 23),  # one binade: 2^23 floats
    (F(-1.0), F(1.0), 2 * 0x3F800000),  # across zero: both distances to 0 added
    (F(0.0), TINY, 1),  # zero to the smallest subnormal
    (-TINY, TINY, 2),  # -tiny, (+/-)0, +tiny
    (F(-0.0), TINY, 1),  # -0 sits with +0
    (MAX, F(np.inf), 1),  # the largest finite float to infinity
    (F(-np.inf), F(np.inf), 2 * 0x7F800000),
])
@pytest.mark.tor("TOR-SEM-008")
def test_ulp_distance_by_hand(a, b, ulp):
    assert int(bitcompare.ulp_distance(np.array([a]), np.array([b]))[0]) == ulp
    assert int(bitcompare.ulp_distance(np.array([b]), np.array([a]))[0]) == ulp
    assert compare([a], [b]).max_ulp == ulp


@pytest.mark.tor("TOR-SEM-008")
def test_signed_zeros_differ_in_bits_but_not_in_ulp():
    result = compare([0.0], [-0.0])
    assert (result.differing_values, result.max_ulp, result.index_of_max_ulp) == (1, 0, None)
    assert not result.identical


@pytest.mark.tor("TOR-SEM-008")
def test_nans_match_whatever_their_sign_and_payload():
    quiet, negative, payload = (np.array([bits], np.uint32).view(np.float32)[0]
                                for bits in (0x7FC00000, 0xFFC00000, 0x7FC01234))
    result = compare([quiet, negative, payload], [negative, payload, quiet])
    assert result.identical and result.nan_mismatches == 0


@pytest.mark.tor("TOR-SEM-008")
def test_nan_against_a_number_is_a_difference_without_ulp():
    result = compare([np.nan, 1.0, 2.0], [1.0, np.nan, 2.0])
    assert (result.differing_values, result.nan_mismatches, result.max_ulp) == (2, 2, 0)


@pytest.mark.tor("TOR-SEM-008")
def test_rows_and_the_worst_position_are_reported():
    a = np.zeros((4, 3), np.float32)
    b = a.copy()
    b[1, 2] = np.nextafter(F(0.0), F(1.0))  # 1 ULP
    b[3, 0] = 3 * TINY  # 3 ULP
    b[3, 1] = TINY
    result = bitcompare.compare(a, b)
    assert (result.values, result.differing_values, result.differing_rows) == (12, 3, 2)
    assert (result.max_ulp, result.index_of_max_ulp) == (3, (3, 0))


def test_empty_and_scalar_arrays():
    assert compare(np.zeros((0, 5)), np.zeros((0, 5))) == bitcompare.BitComparison(0, 0, 0, 0, 0, None)
    assert compare(1.0, np.nextafter(F(1.0), F(2.0))).differing_rows == 1


@pytest.mark.tor("TOR-SEM-006")
def test_shapes_and_dtypes_must_match():
    with pytest.raises(ValueError, match="shapes differ"):
        compare([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="float32 arrays expected"):
        bitcompare.compare(np.zeros(2, np.float64), np.zeros(2, np.float32))
