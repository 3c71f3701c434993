"""Bit-for-bit comparison of two float32 arrays, with the distance in ULP.

Used to compare the same generated code run on two targets (e.g. host and an
ARM target): IEEE arithmetic (+, -, *, /, sqrt) with -ffp-contract=off must
agree bit for bit; library functions (expf, tanhf) may differ by a few ULP.

ULP distance: float32 bit patterns are mapped onto one monotonic integer line
(negative floats below positive ones, +0 and -0 both at 0), so the distance
between two floats is the number of representable floats between them plus one
(nextafter gives 1; the largest finite float and infinity are 1 apart).
``differing_values`` counts differing bits, so +0 against -0 is a difference
at 0 ULP.

NaN: two NaNs are equal whatever their sign and payload (x86 makes negative
default NaNs, ARM positive ones); a NaN against a number is counted in
``nan_mismatches`` and in ``differing_values`` but has no ULP distance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class BitComparison:
    """How two float32 arrays of the same shape differ."""

    values: int  # number of values compared
    differing_values: int  # values whose bits differ (NaN vs NaN excluded, see module doc)
    differing_rows: int  # rows (first axis: one per input) with at least one differing value
    max_ulp: int  # largest ULP distance between two non-NaN values (0 if none differ)
    nan_mismatches: int  # values that are NaN on one side only
    index_of_max_ulp: tuple[int, ...] | None  # where max_ulp is reached (None if max_ulp == 0)

    @property
    def identical(self) -> bool:
        return self.differing_values == 0


def ordered(values: np.ndarray) -> np.ndarray:
    """float32 -> int64 on a monotonic line: +0 and -0 map to 0, neighbours differ by 1."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFFFFFF), bits)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise ULP distance (int64) between float32 arrays; meaningless where either is NaN."""
    return np.abs(ordered(a) - ordered(b))


def compare(a: np.ndarray, b: np.ndarray) -> BitComparison:
    """Compare ``a`` and ``b`` (same shape, float32) bit for bit."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if a.dtype != np.float32 or b.dtype != np.float32:
        raise ValueError(f"float32 arrays expected, got {a.dtype} and {b.dtype}")
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    both_nan = nan_a & nan_b
    one_nan = nan_a ^ nan_b
    numbers = ~(nan_a | nan_b)
    differs = (a.view(np.int32) != b.view(np.int32)) & ~both_nan
    distance = np.where(numbers, ulp_distance(a, b), 0)
    max_ulp = int(distance.max()) if distance.size else 0
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(distance)), distance.shape)) if max_ulp else None
    if differs.ndim and differs.size:
        rows = int(differs.reshape(differs.shape[0], -1).any(axis=1).sum())
    else:
        rows = int(differs.sum())
    return BitComparison(values=int(a.size), differing_values=int(differs.sum()), differing_rows=rows,
                         max_ulp=max_ulp, nan_mismatches=int(one_nan.sum()), index_of_max_ulp=where)
