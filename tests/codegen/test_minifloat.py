"""The C rounding of a float32 to the float8, float4 and float16 formats (``codegen.minifloat.round_to``) against
ONNX's own conversion, bit for bit: ``onnx.numpy_helper.saturate_cast`` with ``saturate`` and ``astype`` (ml_dtypes,
numpy's float16) without, as ONNX's reference QuantizeLinear and DequantizeLinear compute them (float4e2m1 always
saturates).

The values cover every float32 whose high 16 bits take any of their 65,536 patterns with low halves 0, 1, 0x7fff,
0x8000, 0x8001 and 0xffff: every sign, exponent and the 7 leading mantissa bits, which hold each float8/float4
format's kept bits and its rounding bit at every exponent (the subnormals' too), with the sticky bits all zero
(ties), just above and just below (float16's rounding bit is lower: the midpoints below cover it); and each format's
values, the midpoints between neighbours and their float32 neighbours, the largest value and beyond, zeros,
infinities and NaN.
"""

from __future__ import annotations

import ctypes
import subprocess

import ml_dtypes
import numpy as np
import pytest
from codegen_support import STRICT_FLAGS
from onnx import numpy_helper

from codegen.cwriter import CWriter
from codegen.minifloat import FORMATS, round_to


def _boundaries(name: str) -> np.ndarray:
    """A format's values, the midpoints between neighbours and their float32 neighbours, and the special values."""
    dtype = _dtype(name)
    bits = {"float16": 16, "float4_e2m1fn": 4}.get(name, 8)  # float4: ml_dtypes reads the low nibble of a byte
    values = np.arange(2 ** bits, dtype=np.uint16 if bits == 16 else np.uint8).view(dtype).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    middles = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    middles = middles.astype(np.float32)
    largest = np.float32(ml_dtypes.finfo(dtype).max)
    beyond = np.array([largest * 1.0625, largest * 1.125, largest * 2, 3.4e38], np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30], np.float32)
    base = np.concatenate([finite, middles, beyond, -beyond, specials])
    return np.concatenate([base, np.nextafter(base, np.float32(np.inf)), np.nextafter(base, np.float32(-np.inf))])


def _dtype(name: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, name, name))  # float16 is numpy's


def _high_halves() -> np.ndarray:
    high = np.arange(2 ** 16, dtype=np.uint32) << 16
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF], np.uint32)
    return (high[:, None] | lows[None, :]).reshape(-1).view(np.float32)


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The C of ``round_to`` for every format and both ``saturate`` values, compiled strictly into a library of
    functions ``round_<format>_<saturate>(const float *x, float *y, int n)``."""
    w = CWriter()
    w.line("#include <math.h>")
    for name, fmt in FORMATS.items():
        for saturate in (0, 1):
            with w.block(f"void round_{name}_{saturate}(const float *x, float *y, int n)"):
                with w.loop("i", "n"):
                    w.line("float r;")
                    round_to(w, "r", "x[i]", fmt, bool(saturate))
                    w.line("y[i] = r;")
    folder = tmp_path_factory.mktemp("minifloat")
    (folder / "round.c").write_text(w.text())
    subprocess.run(["gcc", *STRICT_FLAGS, "-Wno-missing-prototypes", "-fPIC", "-shared", "round.c", "-o", "round.so",
                    "-lm"], cwd=folder, check=True)
    return ctypes.CDLL(str(folder / "round.so"))


def _in_c(library, name: str, saturate: bool, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float32)
    y = np.empty_like(x)
    function = getattr(library, f"round_{name}_{int(saturate)}")
    function(x.ctypes.data_as(ctypes.c_void_p), y.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(len(x)))
    return y


def _onnx(name: str, saturate: bool, x: np.ndarray) -> np.ndarray:
    """ONNX's reference QuantizeLinear's conversion (scale 1, zero point 0) as float32."""
    dtype = _dtype(name)
    with np.errstate(all="ignore"):
        converted = numpy_helper.saturate_cast(x, dtype) if saturate or name == "float4_e2m1fn" else x.astype(dtype)
    return converted.astype(np.float32)


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Equal bit for bit, any NaN equal to any NaN (a format's NaN has one float32 meaning)."""
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("saturate", [True, False])
@pytest.mark.parametrize("name", list(FORMATS))
def test_the_c_rounds_as_onnx_does(library, name, saturate):
    x = np.concatenate([_boundaries(name), _high_halves()])
    got, want = _in_c(library, name, saturate, x), _onnx(name, saturate, x)
    wrong = np.flatnonzero(~_same(got, want))
    assert not wrong.size, f"{len(wrong)} of {len(x)} values differ, e.g. " + ", ".join(
        f"{x[k]!r} -> C {got[k]!r}, onnx {want[k]!r}" for k in wrong[:5])


def test_the_formats_are_ml_dtypes_own():
    """Each format's constants are the ones ml_dtypes (ONNX's reference) gives the type."""
    for name, fmt in FORMATS.items():
        info = ml_dtypes.finfo(_dtype(name))
        assert (fmt.mantissa, fmt.emin, fmt.largest) == (info.nmant, info.minexp, float(info.max)), name
