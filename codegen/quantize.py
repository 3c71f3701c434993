"""Fixed-point requantization constants, computed at generation time (the int8 contract of issue 42).

The generated C never multiplies by a real scale: each output channel's real multiplier
M = s_x * s_w[c] / s_y (float32 scales widened to double, the product then the quotient, in double; times
``alpha`` after that for QGemm) is stored as an int32 ``m0`` and a power-of-two ``shift`` with
M ~= m0 * 2^(shift - 31), TFLite's ``QuantizeMultiplier``; the C applies TFLite's
``MultiplyByQuantizedMultiplier`` (``layers.requantize``). Doing this in Python, once, keeps the run-time code
integer-only and lets a reviewer check every constant against the scales in the manifest's model.
"""

from __future__ import annotations

import math

import numpy as np

# m0 * x is formed in 64 bits; a left shift above this would leave int64 (the C saturates to int32 after it).
MAX_SHIFT = 31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's ``QuantizeMultiplier``: (m0, shift) with m0 in [2^30, 2^31) and real ~= m0 * 2^(shift - 31).

    (q, shift) = frexp(real), q in [0.5, 1); m0 = llround(q * 2^31) (half away from zero; q * 2^31 is exact in
    double); m0 = 2^31 becomes 2^30 with shift + 1; a shift below -31 (a multiplier under 2^-32) is (0, 0).
    """
    if real < 0 or not math.isfinite(real):
        raise ValueError(f"requantization multiplier {real!r}: scales must be positive and finite")
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    scaled = q * 2.0**31
    m0 = int(scaled)
    if scaled - m0 >= 0.5:
        m0 += 1
    if m0 == 2**31:
        m0 //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return m0, shift


def requantization(x_scale: float, w_scales: np.ndarray, y_scale: float,
                   alpha: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Per channel (m0, shift) as int32 arrays for M[c] = (double)s_x * (double)s_w[c] / (double)s_y * alpha.

    Raises ``ValueError`` when a multiplier needs a left shift above ``MAX_SHIFT`` (M >= 2^31).
    """
    pairs = [quantize_multiplier(float(np.float32(x_scale)) * float(s) / float(np.float32(y_scale)) * alpha)
             for s in np.asarray(w_scales, dtype=np.float32).reshape(-1)]
    multipliers = np.array([m for m, _ in pairs], dtype=np.int32)
    shifts = np.array([s for _, s in pairs], dtype=np.int32)
    if shifts.max() > MAX_SHIFT:
        raise ValueError(f"requantization multiplier above 2^{MAX_SHIFT}")
    return multipliers, shifts


# TFLite's ADD of 8-bit operands scales both to 2^20 units of twice the larger input scale before adding them.
ADD_LEFT_SHIFT = 20


def addition(a_scale: float, b_scale: float, y_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(m0, shift) as int32 arrays of TFLite's 8-bit ADD: operand A, operand B, then the sum (in that order).

    With t = 2 * max(s_a, s_b) (float32 doubled, exact), the real multipliers s_a / t and s_b / t (at most 1/2)
    bring each operand, first multiplied by 2^20, to units of t / 2^20, where their sum is exact to 2^-20 of an
    input step; t / (2^20 * s_y) then brings the sum to the output scale (docs/quantized.md). Doubles throughout.
    """
    s_a, s_b, s_y = (float(np.float32(s)) for s in (a_scale, b_scale, y_scale))
    twice = 2.0 * max(s_a, s_b)
    pairs = [quantize_multiplier(real) for real in (s_a / twice, s_b / twice,
                                                    twice / (2.0**ADD_LEFT_SHIFT * s_y))]
    if max(shift for _, shift in pairs) > MAX_SHIFT:
        raise ValueError(f"requantization multiplier above 2^{MAX_SHIFT}")
    return (np.array([m for m, _ in pairs], dtype=np.int32), np.array([s for _, s in pairs], dtype=np.int32))
