"""Rounding a float32 to a narrow float format (float8, float4, float16) in the generated C.

ONNX's QuantizeLinear to a float8 or float4 type, and the float32 ABI's reading of a float8/float4 graph input, round
a float32 value to the nearest value of the narrow format, ties to even, with the format's own overflow rule (ONNX's
``Cast`` table; ONNX's reference computes it with ``ml_dtypes``, which the tests hold this C to). Every value of these
formats is a float32, so the C stores the rounded value as a ``float``: one function of the formats' data below, no
bit packing.

The rounding is exact float32 arithmetic: with ``2^e`` the leading power of two of ``|v|`` (``frexpf``), the format's
step there is ``2^(max(e, emin) - mantissa)``; ``|v|`` scaled by the inverse step (a power of two, exact) is rounded
to an integer by ``rintf`` (ties to even, the default rounding mode) and scaled back. Below the smallest normal
exponent the step stays that of ``emin``: the subnormals. A rounded magnitude above the largest finite value
overflows: to the largest value when saturating (and an infinite input too), else to infinity or NaN as the format
has them; NaN stays NaN (float4e2m1, which has none, gives a zero of the NaN's opposite sign, as ``ml_dtypes``
does); the ``fnuz`` formats have no -0 (a zero is +0).
"""

from __future__ import annotations

from dataclasses import dataclass

from codegen.cwriter import CWriter, c_float


@dataclass(frozen=True)
class Format:
    """A narrow float format: ``mantissa`` stored fraction bits, ``emin`` the exponent of the smallest normal value,
    ``largest`` finite value, what an overflow gives without saturation (``"inf"`` or ``"nan"``; float4e2m1 always
    saturates), whether it has -0, and what NaN becomes."""

    mantissa: int
    emin: int
    largest: float
    overflow: str
    negative_zero: bool = True
    nan: str = "mf_v"  # what NaN (``mf_v``) becomes, as C: NaN itself, unless the format has none


# By the IR's dtype names (``ml_dtypes``' names, the ONNX types FLOAT8E4M3FN ... FLOAT4E2M1).
FORMATS = {
    "float8_e4m3fn": Format(3, -6, 448.0, "nan"),
    "float8_e4m3fnuz": Format(3, -7, 240.0, "nan", negative_zero=False),
    "float8_e5m2": Format(2, -14, 57344.0, "inf"),
    "float8_e5m2fnuz": Format(2, -15, 57344.0, "nan", negative_zero=False),
    "float4_e2m1fn": Format(1, 0, 6.0, "saturate", nan="copysignf(0.0f, -mf_v)"),
    "float16": Format(10, -14, 65504.0, "inf"),  # a DequantizeLinear's output of a float16 scale's type
}


def round_to(w: CWriter, result: str, value: str, fmt: Format, saturate: bool) -> None:
    """``result = value`` rounded to ``fmt`` (module docstring), as a C block; ``result`` a declared ``float``,
    ``value`` a float expression evaluated once. ``saturate``: ONNX's ``saturate`` attribute (an overflow and an
    infinity give the largest value)."""
    saturate = saturate or fmt.overflow == "saturate"
    overflow = "INFINITY" if fmt.overflow == "inf" else "NAN"
    with w.block(""):  # locals prefixed: ``result`` and ``value`` may name anything but them
        w.line(f"const float mf_v = {value};")
        w.line("const float mf_a = fabsf(mf_v);")
        w.line("int mf_e;")
        w.line("(void)frexpf(mf_a, &mf_e);")
        w.line(f"const int mf_step = (mf_e - 1 > {fmt.emin} ? mf_e - 1 : {fmt.emin}) - {fmt.mantissa};")
        w.line("const float mf_r = isinf(mf_a) ? mf_a : ldexpf(rintf(ldexpf(mf_a, -mf_step)), mf_step);")
        big = c_float(fmt.largest) if saturate else overflow
        w.line(f"const float mf_m = mf_r > {c_float(fmt.largest)} ? {big} : mf_r;")
        sign = "copysignf(mf_m, mf_v)" if fmt.negative_zero else "(mf_m == 0.0f ? 0.0f : copysignf(mf_m, mf_v))"
        w.line(f"{result} = mf_v != mf_v ? {fmt.nan} : {sign};")
