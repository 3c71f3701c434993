"""The derived bound of ONNX Gelu (``harness.references.bounds``, both ``approximate`` forms) against 50-digit
arithmetic, in the manner of ``test_rounding_bounds.py``: ONNX Runtime's float32 Gelu and the float32 formula the
generated C computes (``codegen/activations.py``, glibc's erff and tanhf through ctypes) must be within the bound
of every output, the bound must not be absurdly loose, and it must carry an input error by gelu's slope.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import decimal
import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from harness.models import zoo
from harness.references import bounds, float64

D = decimal.Decimal
PRECISION = 60
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("erff", "tanhf"):
    getattr(_LIBM, _name).restype = ctypes.c_float
    getattr(_LIBM, _name).argtypes = [ctypes.c_float]
LOOSEST = 1e3  # bound / worst observed error above this is absurdly loose
X = np.random.default_rng(2026).standard_normal((64, 16)).astype(np.float32) * np.float32(3)


def _pi() -> D:
    """pi to the context's precision (the ``decimal`` module documentation's recipe)."""
    with decimal.localcontext() as context:
        context.prec += 2
        three = D(3)
        last, t, s, n, na, d, da = 0, three, 3, 1, 0, 0, 24
        while s != last:
            last = s
            n, na = n + na, na + 8
            d, da = d + da, da + 32
            t = (t * n) / d
            s += t
    return +s


def _erf(z: D, pi: D) -> D:
    """erf(z) = 2/sqrt(pi) exp(-z^2) sum_n 2^n z^(2n+1) / (1 3 5 ... (2n+1)): positive terms, no cancellation."""
    term, total, n = z, z, 0
    while abs(term) > D(10) ** (-PRECISION) * abs(total):
        n += 1
        term = term * 2 * z * z / (2 * n + 1)
        total += term
    return 2 / pi.sqrt() * (-z * z).exp() * total


def _exact(x: np.ndarray, approximate: str) -> np.ndarray:
    with decimal.localcontext() as context:
        context.prec = PRECISION
        pi = _pi()
        if approximate == "tanh":
            c1 = (2 / pi).sqrt()
            # 0.5 v (1 + tanh(a)) = v / (1 + exp(-2 a)): no cancellation where gelu is tiny
            value = [v / (1 + (-2 * c1 * (v + D("0.044715") * v ** 3)).exp()) for v in map(D, x.astype(float).flat)]
        else:
            value = [D(0.5) * v * (1 + _erf(v / D(2).sqrt(), pi)) for v in map(D, x.astype(float).flat)]
    return np.array(value, dtype=object).reshape(x.shape)


def _generated_c(x: np.ndarray, approximate: str) -> np.ndarray:
    """What ``codegen.activations`` writes, step by step in float32, with glibc's erff and tanhf."""
    f = np.float32
    if approximate == "tanh":
        erff_or_tanhf = np.vectorize(lambda v: _LIBM.tanhf(float(v)), otypes=[np.float32])
        cube = f(0.044715) * x * x * x
        inner = erff_or_tanhf(f(math.sqrt(2 / math.pi)) * (x + cube))
    else:
        erff_or_tanhf = np.vectorize(lambda v: _LIBM.erff(float(v)), otypes=[np.float32])
        inner = erff_or_tanhf(x * f(math.sqrt(0.5)))
    return (f(0.5) * x * (f(1) + inner)).astype(np.float64)


def _model(tmp_path, approximate: str, before: str | None = None):
    """A Gelu graph at opset 20, after an exact scaling by 2 when ``before`` (an input error to carry)."""
    nodes = [helper.make_node("Gelu", ["x" if before is None else "s"], ["y"], approximate=approximate)]
    inits = []
    if before is not None:
        nodes.insert(0, helper.make_node("Mul", ["x", "two"], ["s"]))
        inits.append(onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two"))
    graph = helper.make_graph(nodes, f"gelu_{approximate}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", X.shape[1]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", X.shape[1]])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    proto.ir_version = 9
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / f"gelu_{approximate}.onnx"
    onnx.save(proto, str(path))
    return zoo.load(path, cache_dir=tmp_path / "cache"), proto


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_bound_holds_against_50_digits_and_is_not_absurdly_loose(approximate, tmp_path):
    model, proto = _model(tmp_path, approximate)
    derivation = bounds.derive(model, X)
    assert derivation.missing == ()
    bound = derivation.bound.reshape(X.shape)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    implementations = {"onnxruntime": session.run(None, {"x": X})[0].astype(np.float64),
                       "generated C's formula": _generated_c(X, approximate)}
    exact = _exact(X, approximate)
    np.testing.assert_allclose(derivation.exact.reshape(X.shape), exact.astype(np.float64), rtol=1e-13, atol=1e-300)
    worst = 0.0
    for name, got in implementations.items():
        distance = np.nextafter(np.abs(np.vectorize(D, otypes=[object])(got) - exact).astype(np.float64), np.inf)
        outside = distance > bound
        assert not outside.any(), f"{name}: |{name} - exact| = {distance[outside].max():.3e} above the bound"
        worst = max(worst, float((distance / bound).max()))
    print(f"Gelu {approximate}: bound / worst observed error = {1 / worst:.3g}")
    assert 1 / worst <= LOOSEST


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_carries_an_input_error_by_its_slope(approximate, tmp_path):
    """After x * 2 (exact here, bounded by u |2x| by the rule of Mul), the a-priori bound of Gelu grows by at least
    gelu's slope times that error, and at most by its largest slope (1.13) times it, plus Gelu's own rounding."""
    scaled, _ = _model(tmp_path / "scaled", approximate, before="scale")
    alone, _ = _model(tmp_path / "alone", approximate)
    twice = 2.0 * X.astype(np.float64)
    grown = bounds.derive(scaled, X).apriori - bounds.derive(alone, twice.astype(np.float32)).apriori
    incoming = bounds.U * np.abs(twice)
    slope = np.abs(float64.gelu(twice + 1e-6, approximate) - float64.gelu(twice - 1e-6, approximate)) / 2e-6
    assert (grown >= 0.99 * slope * incoming).all() and (grown <= 1.14 * incoming).all()
