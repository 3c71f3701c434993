"""Every op the generators accept has a float64 arbiter rule and a derived-bound rule, each bound rule tested on
random real-valued parameters (issue 40): a graph of a Gemm (so that the op also carries an input error) and the
op, with parameters drawn from a seed (slopes, alphas, divisors, batch-normalisation statistics over six decades),
runs on float32 inputs through real float32 implementations (ONNX Runtime; the numpy evaluator in float32; for the
ops generated C computes with libm, the C's formula with glibc's logf, log1pf, expf and expm1f through ctypes).
Every implementation must be within the bound of every output, against the exact result: ``fractions.Fraction``
on the evaluator's own op semantics for the rational ops, ``decimal`` at 50 digits for the others. The bound must
not be absurdly loose (bound / worst observed at most ``LOOSEST``)."""

from __future__ import annotations

import ctypes
import ctypes.util
import decimal
from fractions import Fraction

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import applications_support
from bound_check_support import assert_within_and_tight
from harness.models import zoo
from harness.references import bounds, float64

decimal.getcontext().prec = 50
D = decimal.Decimal
SEEDS = (0, 1, 2)
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("expf", "expm1f", "logf", "log1pf"):
    getattr(_LIBM, _name).restype = ctypes.c_float
    getattr(_LIBM, _name).argtypes = [ctypes.c_float]


def _libm(name: str):
    return np.vectorize(lambda v: getattr(_LIBM, name)(float(v)), otypes=[np.float32])


def _decimals(array) -> np.ndarray:
    return np.vectorize(lambda v: D(v.numerator) / D(v.denominator) if isinstance(v, Fraction) else D(float(v)),
                        otypes=[object])(np.asarray(array, dtype=object))


def _dexp(v: D) -> D:
    return v.exp()


def _dln(v: D) -> D:
    return v.ln()


def _sigmoidal(v: D) -> D:
    return 1 / (1 + (-v).exp())


def _elu(v: D, alpha: float) -> D:
    return v if v > 0 else D(alpha) * (v.exp() - 1)


def _hard_swish(v: D) -> D:
    return v * min(max(v * D(float(np.float32(1 / 6))) + D("0.5"), D(0)), D(1))


def _softplus(v: D) -> D:
    return (1 + v.exp()).ln()


# op -> (attributes from the seed's generator, constants (float32) from it, exact: the op on Decimal arrays of its
# input(s), the Gemm's output h, with the attributes; "fraction": the evaluator's own semantics on Fractions;
# glibc: the C's formula on float32 h, or None; sign: "any" or "positive" (h > 0: weights and inputs above 0))
def _cases():
    vector = np.vectorize
    return {
        "Neg": (lambda r: {}, lambda r: [], "fraction", None, "any"),
        "Abs": (lambda r: {}, lambda r: [], "fraction", None, "any"),
        "Sqrt": (lambda r: {}, lambda r: [], lambda h, a: vector(lambda v: v.sqrt(), otypes=[object])(h),
                 lambda h, a: np.sqrt(h, dtype=np.float32), "positive"),
        "Reciprocal": (lambda r: {}, lambda r: [], "fraction", None, "positive"),
        "Log": (lambda r: {}, lambda r: [], lambda h, a: vector(_dln, otypes=[object])(h),
                lambda h, a: _libm("logf")(h), "positive"),
        "Softsign": (lambda r: {}, lambda r: [], "fraction", None, "any"),
        "HardSwish": (lambda r: {}, lambda r: [], lambda h, a: vector(_hard_swish, otypes=[object])(h), None, "any"),
        "Elu": (lambda r: {"alpha": float(np.float32(r.uniform(0.1, 2.0)))}, lambda r: [],
                lambda h, a: vector(lambda v: _elu(v, a["alpha"]), otypes=[object])(h),
                lambda h, a: np.where(h > 0, h, np.float32(a["alpha"]) * _libm("expm1f")(h)).astype(np.float32),
                "any"),
        "Selu": (lambda r: {"alpha": float(np.float32(r.uniform(1.0, 2.0))),
                            "gamma": float(np.float32(r.uniform(0.5, 1.5)))}, lambda r: [],
                 lambda h, a: vector(lambda v: D(a["gamma"]) * _elu(v, a["alpha"]), otypes=[object])(h),
                 lambda h, a: np.where(h > 0, np.float32(a["gamma"]) * h, np.float32(a["gamma"]) * (
                     np.float32(a["alpha"]) * _libm("expm1f")(h))).astype(np.float32), "any"),
        "Softplus": (lambda r: {}, lambda r: [], lambda h, a: vector(_softplus, otypes=[object])(h),
                     lambda h, a: (np.maximum(h, 0) + _libm("log1pf")(_libm("expf")(-np.abs(h)))).astype(np.float32),
                     "any"),
        "PRelu": (lambda r: {}, lambda r: [r.uniform(-2, 2, 6).astype(np.float32)], "fraction", None, "any"),
        "LeakyRelu": (lambda r: {"alpha": float(np.float32(r.uniform(-1.5, 1.5)))}, lambda r: [], "fraction", None,
                      "any"),
        "Div": (lambda r: {}, lambda r: [np.float32(r.choice([-1, 1])) * r.uniform(1e-3, 1e3, 6).astype(np.float32)],
                "fraction", None, "any"),
        **{op: (lambda r: {"keepdims": int(r.integers(0, 2))},
                lambda r: [np.array([int(r.integers(1, 3))], np.int64)], exact, None, sign)
           for op, exact, sign in (("ReduceSum", "fraction", "any"), ("ReduceMean", "fraction", "any"),
                                   ("ReduceMax", "fraction", "any"), ("ReduceMin", "fraction", "any"),
                                   ("ReduceL1", "fraction", "any"), ("ReduceSumSquare", "fraction", "any"),
                                   ("ReduceProd", "fraction", "any"),
                                   ("ReduceL2", lambda h, a: _reduce_decimal(h, a, lambda s: (s * s).sum().sqrt()),
                                    "any"),
                                   ("ReduceLogSum", lambda h, a: _reduce_decimal(h, a, lambda s: s.sum().ln()),
                                    "positive"),
                                   ("ReduceLogSumExp", lambda h, a: _reduce_decimal(
                                       h, a, lambda s: np.vectorize(_dexp, otypes=[object])(s).sum().ln()), "any"))},
        "LogSoftmax": (lambda r: {"axis": -1}, lambda r: [], lambda h, a: _log_softmax(h),
                       lambda h, a: _c_log_softmax(h), "any"),
        # the rules that were there before, now behind a Gemm with drawn parameters too; Clip a ReLU6 of drawn
        # ends, some of whose inputs saturate (no error carried past an end)
        "Clip": (lambda r: {}, lambda r: [np.array(r.uniform(-1, 0), np.float32), np.array(r.uniform(0.5, 3),
                                                                                           np.float32)],
                 "fraction", None, "any"),
        "Relu": (lambda r: {}, lambda r: [], "fraction", None, "any"),
        "Sigmoid": (lambda r: {}, lambda r: [], lambda h, a: vector(_sigmoidal, otypes=[object])(h),
                    lambda h, a: (np.float32(1) / (np.float32(1) + _libm("expf")(-h))).astype(np.float32), "any"),
        "Exp": (lambda r: {}, lambda r: [], lambda h, a: vector(_dexp, otypes=[object])(h),
                lambda h, a: _libm("expf")(h), "any"),
        "Softmax": (lambda r: {"axis": -1}, lambda r: [], lambda h, a: _softmax(h), None, "any"),
    }


def _softmax(h: np.ndarray) -> np.ndarray:
    exps = np.vectorize(_dexp, otypes=[object])(h)
    return exps / exps.sum(axis=-1, keepdims=True)


def _reduce_decimal(h: np.ndarray, attrs: dict, reduce) -> np.ndarray:
    """A reduction over the axis the case's constant names (``attrs["axis"]``), keeping it or not."""
    axis = attrs["axis"]
    out = np.apply_along_axis(lambda s: reduce(np.asarray(s, dtype=object)), axis, h)
    return np.expand_dims(out, axis) if attrs["keepdims"] else out


def _log_softmax(h: np.ndarray) -> np.ndarray:
    def row(s):
        total = sum(v.exp() for v in s)
        return np.array([v - total.ln() for v in s], dtype=object)

    return np.apply_along_axis(row, -1, h)


def _c_log_softmax(h: np.ndarray) -> np.ndarray:
    """codegen's LogSoftmax: (x - m) - logf(sum expf(x - m)) in float32."""
    m = h.max(axis=-1, keepdims=True)
    shifted = (h - m).astype(np.float32)
    total = np.zeros(h.shape[:-1] + (1,), np.float32)
    for k in range(h.shape[-1]):
        total = (total + _libm("expf")(shifted[..., k:k + 1])).astype(np.float32)
    return (shifted - _libm("logf")(total)).astype(np.float32)


CASES = _cases()


def _graph(op: str, attrs: dict, constants: list, w: np.ndarray, b: np.ndarray):
    """x (N, 5) -> Gemm (6 outputs) -> h -> op -> y; a reduction's axes and a divisor or slope are constants. A Div
    divides h by the constant reshaped to (1, 3, 2)... of h's own second half: h[:, :3] / (h[:, 3:] + c)."""
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1)]
    if op == "Div":  # a computed divisor, away from 0: |h[:, 3:] + c| with c large
        inits += [numpy_helper.from_array(np.array([3, 3], np.int64), "sizes"),
                  numpy_helper.from_array(constants[0][:3], "c")]
        nodes += [helper.make_node("Split", ["h", "sizes"], ["a", "d0"], axis=1),
                  helper.make_node("Add", ["d0", "c"], ["d"]), helper.make_node("Div", ["a", "d"], ["y"])]
        return nodes, inits, [None, 3]
    if op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceSumSquare", "ReduceProd",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
        inits.append(numpy_helper.from_array(constants[0], "axes"))
        nodes += [helper.make_node("Reshape", ["h", "shape"], ["h3"]), helper.make_node(op, ["h3", "axes"], ["y"],
                                                                                       **attrs)]
        inits.append(numpy_helper.from_array(np.array([0, 2, 3], np.int64), "shape"))
        return nodes, inits, None
    names = ["h"] + [f"c{i}" for i in range(len(constants))]
    inits += [numpy_helper.from_array(c, f"c{i}") for i, c in enumerate(constants)]
    nodes.append(helper.make_node(op, names, ["y"], **attrs))
    return nodes, inits, None


def _proto(nodes, inits):
    graph = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return onnx.shape_inference.infer_shapes(proto)


def _draw(op: str, seed: int):
    rng = np.random.default_rng([seed, sum(map(ord, op))])
    attrs_of, constants_of, exact, glibc, sign = CASES[op]
    attrs, constants = attrs_of(rng), constants_of(rng)
    scale = {"Softplus": 8.0, "HardSwish": 3.0, "Elu": 2.0, "Selu": 2.0, "ReduceProd": 0.7, "Clip": 2.0,
             "Softmax": 3.0}.get(op, 1.0)
    if sign == "positive":
        w = rng.uniform(0.1, 1.0, (6, 5)).astype(np.float32)
        b = rng.uniform(0.0, 0.5, 6).astype(np.float32)
        x = rng.uniform(0.1, 2.0, (48, 5)).astype(np.float32)
    else:
        w = (rng.standard_normal((6, 5)) * scale).astype(np.float32)
        b = (rng.standard_normal(6) * scale / 4).astype(np.float32)
        x = rng.standard_normal((48, 5)).astype(np.float32)
    return attrs, constants, exact, glibc, w, b, x


def _distance(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| from the exact Decimal values, rounded up by one float64 ulp (an exact 0 stays 0: a clamped
    output is exactly its end, whose bound is 0)."""
    diff = np.abs(_decimals(got) - exact).astype(np.float64)
    return np.where(diff > 0, np.nextafter(diff, np.inf), 0.0)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", sorted(CASES))
def test_every_rule_holds_on_random_parameters(op, seed, tmp_path, record_property):
    attrs, constants, exact_kind, glibc, w, b, x = _draw(op, seed)
    nodes, inits, _ = _graph(op, attrs, constants, w, b)
    proto = _proto(nodes, inits)
    onnx.save(proto, str(tmp_path / "case.onnx"))
    derivation = bounds.derive(zoo.load(tmp_path / "case.onnx", cache_dir=tmp_path / "cache"), x)
    assert derivation.missing == () and derivation.broken is None
    bound = derivation.bound.reshape(derivation.exact.shape)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    implementations = {"onnxruntime": session.run(None, {"x": x})[0],
                       "numpy float32": np.asarray(float64.Evaluator(proto).run({"x": x})[0], np.float32)}
    exactly = np.vectorize(Fraction, otypes=[object])
    fractions = exactly(x.astype(np.float64))
    h_exact = fractions @ exactly(w.astype(np.float64)).T + exactly(b.astype(np.float64))
    if exact_kind == "fraction":
        exact = _decimals(float64.Evaluator(float64.to_float64(proto)).run({"x": fractions})[0])
    else:
        h = _decimals(np.asarray(h_exact, dtype=object)).reshape(len(x), 2, 3) if op.startswith("Reduce") \
            else _decimals(np.asarray(h_exact, dtype=object))
        exact = exact_kind(h, {**attrs, "axis": int(constants[0][0]) if op.startswith("Reduce") else -1})
    if glibc is not None:  # the C's formula on ONNX Runtime's float32 Gemm
        (h32,) = ort.InferenceSession(onnx.helper.make_model(
            helper.make_graph(nodes[:1], "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["N", 6])], inits[:2]),
            opset_imports=[helper.make_opsetid("", 18)]).SerializeToString(),
            providers=["CPUExecutionProvider"]).run(None, {"x": x})
        implementations["C formula, glibc"] = glibc(h32, attrs)
    assert_within_and_tight(f"{op} seed {seed}", implementations, exact, bound, _distance, record_property)


def _implementations(proto, x) -> dict:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return {"onnxruntime": session.run(None, {"x": x})[0].astype(np.float64),
            "numpy float32": np.asarray(float64.Evaluator(proto).run({"x": x})[0], np.float32).astype(np.float64)}


def _check(name: str, derivation, implementations: dict, exact: np.ndarray) -> float:
    """Every implementation within the bound of every output; bound / worst observed, at most ``LOOSEST``."""
    return assert_within_and_tight(name, implementations, exact, derivation.bound.reshape(derivation.exact.shape),
                                   _distance)


@pytest.mark.parametrize("seed", SEEDS)
def test_batch_normalisation_with_real_statistics(seed, tmp_path):
    """Conv -> BatchNormalization with statistics as training leaves them: variances over eight decades (a dead
    channel's 1e-6 next to 1e2), means far from 0, scales of both signs, Keras' epsilons; against ONNX Runtime,
    numpy float32 and the C's folded form (scale / sqrt(var + eps) in float32, then x a + (bias - mean a))."""
    rng = np.random.default_rng([seed, 40])
    channels = 4
    w = (rng.standard_normal((channels, 2, 3, 3)) * 0.5).astype(np.float32)
    scale = (rng.choice([-1, 1], channels) * rng.uniform(0.2, 3, channels)).astype(np.float32)
    beta = rng.normal(0, 2, channels).astype(np.float32)
    mean = rng.normal(0, 10, channels).astype(np.float32)
    var = (10.0 ** rng.uniform(-6, 2, channels)).astype(np.float32)
    epsilon = float(np.float32(rng.choice([1e-3, 1.001e-5])))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "t", "m", "v"], ["y"], epsilon=epsilon)]
    graph = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", channels, 5, 5])],
                              [numpy_helper.from_array(a, n) for a, n in
                               ((w, "w"), (scale, "s"), (beta, "t"), (mean, "m"), (var, "v"))])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(proto, str(tmp_path / "bn.onnx"))
    x = rng.standard_normal((16, 2, 5, 5)).astype(np.float32)
    derivation = bounds.derive(zoo.load(tmp_path / "bn.onnx", cache_dir=tmp_path / "cache"), x)
    assert derivation.broken is None
    implementations = _implementations(proto, x)
    conv = np.asarray(float64.Evaluator(helper.make_model(helper.make_graph(
        nodes[:1], "c", graph.input, [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")]), opset_imports=[helper.make_opsetid("", 17)])).run({"x": x})[0], np.float32)
    factor = (scale / np.sqrt((var + np.float32(epsilon)).astype(np.float32))).astype(np.float32)
    shift = (beta - mean * factor).astype(np.float32)
    implementations["folded"] = (conv * factor[:, None, None] + shift[:, None, None]).astype(np.float32).astype(
        np.float64)
    exactly = np.vectorize(Fraction, otypes=[object])
    c_exact = _decimals(_exact_conv(exactly(x.astype(np.float64)), exactly(w.astype(np.float64))))
    to_d = np.vectorize(lambda v: D(float(v)), otypes=[object])
    root = np.vectorize(lambda v: (v + D(epsilon)).sqrt(), otypes=[object])(to_d(var))
    exact = (c_exact - to_d(mean)[:, None, None]) * to_d(scale)[:, None, None] / root[:, None, None] \
        + to_d(beta)[:, None, None]
    _check(f"BatchNormalization seed {seed}", derivation, implementations, exact)


def _exact_conv(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A 3 x 3 convolution, stride 1, padding 1, on object (Fraction) arrays."""
    n, c, height, width = x.shape
    padded = np.zeros((n, c, height + 2, width + 2), dtype=object)
    padded[:, :, 1:-1, 1:-1] = x
    padded[padded == 0] = Fraction(0)
    out = np.empty((n, w.shape[0], height, width), dtype=object)
    for i in range(height):
        for j in range(width):
            out[:, :, i, j] = np.tensordot(padded[:, :, i:i + 3, j:j + 3], w, axes=([1, 2, 3], [1, 2, 3]))
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_a_transposed_convolution_after_a_convolution(seed, tmp_path):
    """Conv -> ConvTranspose (stride 2, padding, two groups, bias): the scatter's rule and its adjoint."""
    rng = np.random.default_rng([seed, 41])
    w1 = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("ConvTranspose", ["r", "w2", "b"], ["y"], strides=[2, 2], pads=[1, 0, 0, 1], group=2,
                              output_padding=[1, 0])]
    graph = helper.make_graph(nodes, "deconv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (w2, "w2"), (bias, "b"))])
    proto = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    onnx.save(proto, str(tmp_path / "deconv.onnx"))
    x = rng.standard_normal((8, 2, 4, 4)).astype(np.float32)
    derivation = bounds.derive(zoo.load(tmp_path / "deconv.onnx", cache_dir=tmp_path / "cache"), x)
    exact = _decimals(float64.Evaluator(float64.to_float64(proto)).run(
        {"x": np.vectorize(Fraction, otypes=[object])(x.astype(np.float64))})[0])
    _check(f"ConvTranspose seed {seed}", derivation, _implementations(proto, x), exact)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_squeeze_and_excite_gate_broadcast_against_the_map(seed, tmp_path):
    """Squeeze-and-excite (issue 43): Conv -> HardSwish -> GlobalAveragePool -> Conv 1 x 1 -> HardSigmoid gives a
    [N, C, 1, 1] gate that Mul, Sub and Add broadcast against the [N, C, H, W] map, the gate first and second: the
    forward rules carry both operands' errors, the reverse rules sum the broadcast gradient back onto the gate.
    Exact: the float64 evaluator's own semantics on Fractions (every op here is rational); the evaluator in float32
    and ONNX Runtime within the bound of every output."""
    rng = np.random.default_rng([seed, 43])
    arrays = {"w1": (rng.standard_normal((4, 2, 3, 3)) * 0.7).astype(np.float32),
              "b1": (rng.standard_normal(4) * 0.3).astype(np.float32),
              "w2": rng.standard_normal((4, 4, 1, 1)).astype(np.float32),
              "b2": rng.standard_normal(4).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c"], ["m"]),
             helper.make_node("GlobalAveragePool", ["m"], ["p"]),
             helper.make_node("Conv", ["p", "w2", "b2"], ["q"], kernel_shape=[1, 1]),
             helper.make_node("HardSigmoid", ["q"], ["g"], alpha=float(np.float32(1 / 6)), beta=0.5),
             helper.make_node("Mul", ["m", "g"], ["s"]),
             helper.make_node("Sub", ["g", "s"], ["d"]),
             helper.make_node("Add", ["d", "g"], ["y"])]
    graph = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in arrays.items()])
    proto = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    onnx.save(proto, str(tmp_path / "se.onnx"))
    x = (rng.standard_normal((8, 2, 4, 5)) * 2).astype(np.float32)
    derivation = bounds.derive(zoo.load(tmp_path / "se.onnx", cache_dir=tmp_path / "cache"), x)
    assert derivation.missing == () and derivation.broken is None
    exact = _decimals(float64.Evaluator(float64.to_float64(proto)).run(
        {"x": np.vectorize(Fraction, otypes=[object])(x.astype(np.float64))})[0])
    assert exact.shape == (8, 4, 4, 5)
    _check(f"squeeze-and-excite seed {seed}", derivation, _implementations(proto, x), exact)


@pytest.mark.parametrize("op, attrs, constants", [
    ("Slice", {}, [np.array([5], np.int64), np.array([0], np.int64), np.array([1], np.int64),
                   np.array([-2], np.int64)]),
    ("Gather", {"axis": 1}, [np.array([0, 3, -1, 3], np.int64)]),
    ("Unsqueeze", {}, [np.array([1], np.int64)]),
    ("Cast", {"to": TensorProto.FLOAT}, []),
])
def test_ops_that_move_values_carry_the_errors_exactly(op, attrs, constants, tmp_path):
    """Gemm -> the op -> Tanh: the op adds no error of its own and carries each input cell's to where it goes
    (Gather reads one cell twice); the Tanh after it makes the sensitivity pass go back through the op."""
    rng = np.random.default_rng(42)
    w, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    names = ["h"] + [f"c{i}" for i in range(len(constants))]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node(op, names, ["m"], **attrs),
             helper.make_node("Tanh", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "moves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
                              + [numpy_helper.from_array(c, f"c{i}") for i, c in enumerate(constants)])
    proto = onnx.shape_inference.infer_shapes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    onnx.save(proto, str(tmp_path / "moves.onnx"))
    x = rng.standard_normal((32, 5)).astype(np.float32)
    derivation = bounds.derive(zoo.load(tmp_path / "moves.onnx", cache_dir=tmp_path / "cache"), x, ("h", "m"))
    moved = float64.Evaluator(float64.to_float64(helper.make_model(helper.make_graph(
        nodes[1:2], "op", [helper.make_tensor_value_info("h", TensorProto.DOUBLE, ["N", 6])],
        [helper.make_tensor_value_info("m", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(c, f"c{i}") for i, c in enumerate(constants)]),
        opset_imports=[helper.make_opsetid("", 18)]))).run({"h": derivation.layers["h"].reshape(len(x), 6)})[0]
    np.testing.assert_array_equal(derivation.layers["m"], moved.reshape(len(x), -1))
    exact = np.tanh(float64.Evaluator(float64.to_float64(proto)).run({"x": x.astype(np.float64)}, ["m"])[0])
    got = _implementations(proto, x)["numpy float32"]
    assert (np.abs(got - exact) <= derivation.bound.reshape(got.shape)).all()


def test_every_op_the_generators_accept_has_an_arbiter_rule_and_a_bound_rule():
    """Assay's ONNX front end's ops (the Keras export writes a subset of them): each has a float64 evaluation and a
    forward and reverse bound rule, but for the exception the semantic stage names (a fallback to the fixed rule,
    in table1.md): LRN. The quantized ops (registered when ``codegen.frontend_onnx_quant`` is imported, by any test
    of the same process) are judged by the integer arbiter instead."""
    from codegen import frontend_onnx
    from harness.references import integer

    accepted = set(frontend_onnx.HANDLERS) - integer.QUANTIZED_OPS
    assert accepted - set(float64._OPS) == set()
    assert accepted - set(bounds._FORWARD) == {"LRN"}
    assert set(bounds._FORWARD) == set(bounds._REVERSE)


# --- keras.applications networks (issue 40) ---------------------------------------------------------------------


def _application(name: str, size: int, folder, alpha: float = 0.35):
    """keras.applications ``name`` at ``size`` x ``size`` (weights None, 10 classes), its batch normalisations'
    statistics and every bias perturbed with a seeded generator (trained statistics, not the identity's), saved as
    a .keras file and loaded as a user model."""
    from harness.models.tf_runtime import keras

    k = keras()
    k.utils.set_random_seed(0)
    options = dict(weights=None, input_shape=(size, size, 3), classes=10)
    build = {"mobilenetv2": lambda: k.applications.MobileNetV2(alpha=alpha, **options),
             "resnet50": lambda: k.applications.ResNet50(**options),
             "densenet121": lambda: k.applications.DenseNet121(**options)}[name]
    network = applications_support.perturbed(build(), 40)
    path = folder / f"{name}-{size}.keras"
    network.save(path)
    return zoo.load(path, cache_dir=folder / "cache")


def _derive_quietly(model, inputs):
    """The derivation with every numpy warning an error: none may reach the user."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        return bounds.derive(model, inputs)


def test_a_small_mobilenetv2_has_a_finite_bound_that_holds_for_keras_and_onnxruntime(tmp_path):
    """MobileNetV2 (alpha 0.35, 32 x 32): the bound of every output is a finite number >= 0 and both float32
    references are within it."""
    from harness import references

    model = _application("mobilenetv2", 32, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (2, *model.input_shape)).astype(np.float32)
    derivation = _derive_quietly(model, x)
    assert derivation.broken is None and np.isfinite(derivation.bound).all() and (derivation.bound >= 0).all()
    exact = references.get("float64").run(model, x)
    for reference in ("keras", "onnxruntime"):
        distance = np.abs(references.get(reference).run(model, x).astype(np.float64) - exact)
        assert (distance <= derivation.bound).all()
        print(f"mobilenetv2 32 x 32 {reference}: bound / worst observed = {(derivation.bound / distance).min():.3g}")


@pytest.mark.slow
@pytest.mark.parametrize("name, size", [("mobilenetv2", 96), ("resnet50", 32), ("densenet121", 32)])
def test_deep_applications_get_a_named_error_never_nan(name, size, tmp_path):
    """The issue's networks: the a-priori error of 50 to 120 convolutions outgrows the values (a box per element
    loses every cancellation), so no finite bound follows; the derivation says from which op and tensor on, and
    where the a-priori error first exceeded the values, with no NaN and no numpy warning (about 10 to 25 s each)."""
    model = _application(name, size, tmp_path)
    x = np.random.default_rng(1).uniform(-1, 1, (1, *model.input_shape)).astype(np.float32)
    derivation = _derive_quietly(model, x)
    assert not np.isnan(derivation.bound).any() and derivation.broken_input == 0
    assert derivation.broken.startswith("no finite derived bound from Softmax 'output' on; the a-priori error "
                                        "exceeds the values themselves from ")


def test_a_graph_with_a_literal_batch_is_bounded_in_chunks_of_it(tmp_path):
    """ShuffleNet's channel shuffle as its ONNX file writes it: a batch of 1 in the input and in the Reshapes'
    shapes. Three inputs are bounded one chunk of 1 at a time (they used to be one batch of 3: "cannot reshape
    array of size 384 into shape (1,2,4,4,4)"), and ONNX Runtime, run the same way, is within the bound."""
    from harness import references

    rng = np.random.default_rng(43)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "s1"], ["r1"]),
             helper.make_node("Transpose", ["r1"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s2"], ["r2"]), helper.make_node("Relu", ["r2"], ["y"])]
    graph = helper.make_graph(nodes, "shuffle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [numpy_helper.from_array(w, "w"),
                               numpy_helper.from_array(np.array([1, 2, 4, 4, 4], np.int64), "s1"),
                               numpy_helper.from_array(np.array([1, 8, 4, 4], np.int64), "s2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "shuffle.onnx"))
    model = zoo.load(tmp_path / "shuffle.onnx", cache_dir=tmp_path / "cache")
    x = rng.standard_normal((3, *model.input_shape)).astype(np.float32)
    derivation = bounds.derive(model, x)
    exact = references.get("float64").run(model, x)
    assert derivation.bound.shape == exact.shape == (3, 8, 4, 4)
    np.testing.assert_allclose(derivation.exact, exact, rtol=1e-12)
    got = references.get("onnxruntime").run(model, x).astype(np.float64)
    assert (np.abs(got - exact) <= derivation.bound).all()


def test_a_bound_that_is_not_finite_names_the_op_and_the_tensor_and_warns_of_nothing(tmp_path):
    """x - x (1 - 2^-24) is x 2^-24 exactly, and the product's rounding alone may reach it: the reciprocal's box
    reaches 0, so no finite bound follows. The derivation names Reciprocal 'y' and the input, makes no NaN (the
    reverse rules' 0 x inf) and no numpy warning."""
    nodes = [helper.make_node("Mul", ["x", "c"], ["t"]), helper.make_node("Sub", ["x", "t"], ["d"]),
             helper.make_node("Reciprocal", ["d"], ["y"])]
    graph = helper.make_graph(nodes, "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(np.array([1 - 2.0 ** -24], np.float32), "c")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "cancel.onnx"))
    x = np.random.default_rng(44).uniform(1, 2, (4, 3)).astype(np.float32)
    derivation = _derive_quietly(zoo.load(tmp_path / "cancel.onnx", cache_dir=tmp_path / "cache"), x)
    assert np.isinf(derivation.bound).all() and not np.isnan(derivation.bound).any()
    assert derivation.broken.startswith("no finite derived bound from Reciprocal 'y' on") and \
        derivation.broken_input == 0
