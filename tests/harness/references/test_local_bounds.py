"""The layer-local bound (``bounds.local_bounds``): each layer evaluated in float64 from a seeded float32 input and
bounded for its own rounding alone, against real float32 evaluations (numpy float32 sums in a stated order, glibc's
tanhf through ctypes) and exact arithmetic (``fractions.Fraction``)."""

from __future__ import annotations

import ctypes
import ctypes.util
from fractions import Fraction

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from harness.models import zoo
from harness.references import bounds

_RNG = np.random.default_rng(40)
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.tanhf.restype, _LIBM.tanhf.argtypes = ctypes.c_float, [ctypes.c_float]
SEQUENTIAL = bounds.Order()  # one accumulator from 0.0, ascending index, bias last


def _model(tmp_path, nodes, weights, inputs: int, outputs: int):
    graph = helper.make_graph(nodes, "local", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", inputs])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", outputs])],
                              [numpy_helper.from_array(a, n) for n, a in weights.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "local.onnx"))
    return zoo.load(tmp_path / "local.onnx", cache_dir=tmp_path / "cache")


def _dense(x: np.ndarray, w: np.ndarray, b: np.ndarray, bias_first: bool = False) -> np.ndarray:
    """x W^T + b in float32, one rounding per step (what ``acc += x[k] * w[k]`` does without FMA), k ascending;
    the bias added last, or first (the accumulator starts from it)."""
    acc = np.tile(b, (len(x), 1)) if bias_first else np.zeros((len(x), len(w)), np.float32)
    for k in range(w.shape[1]):
        acc = (acc + (x[:, k:k + 1] * w[:, k]).astype(np.float32)).astype(np.float32)
    return acc if bias_first else (acc + b).astype(np.float32)


def _exact(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x W^T + b in exact rational arithmetic, rounded to float64 once."""
    return np.array([[float(sum((Fraction(float(v)) * Fraction(float(c)) for v, c in zip(row, col)),
                                Fraction(float(bias))))
                      for col, bias in zip(w, b)] for row in x])


def test_each_layer_is_bounded_from_the_seeded_input_alone_and_nothing_is_carried(tmp_path):
    """Layer 2 is evaluated from layer 1's seeded float32 values (its float64 value is exactly that layer applied to
    the seed), and its bound does not grow with whatever layer 1's seed is: a seed 1e-3 off (a defect upstream)
    leaves layer 2's bound at its own rounding, where the end-to-end a-priori bound of layer 2 carries layer 1's."""
    w1, b1 = _RNG.standard_normal((12, 6)).astype(np.float32), _RNG.standard_normal(12).astype(np.float32)
    w2, b2 = _RNG.standard_normal((4, 12)).astype(np.float32), _RNG.standard_normal(4).astype(np.float32)
    model = _model(tmp_path, [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
                              helper.make_node("Tanh", ["h"], ["t"]),
                              helper.make_node("Gemm", ["t", "w2", "b2"], ["y"], transB=1)],
                   {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, 6, 4)
    x = _RNG.uniform(-1, 1, (16, 6)).astype(np.float32)
    t32 = np.vectorize(lambda v: _LIBM.tanhf(float(v)), otypes=[np.float32])(_dense(x, w1, b1))
    y32 = _dense(t32, w2, b2)
    for order in (None, SEQUENTIAL):
        local = bounds.local_bounds(model, x, {"t": t32, "y": y32}, order)
        (t_value, t_bound), (y_value, y_bound) = local["t"], local["y"]
        assert (np.abs(t32 - t_value) <= t_bound).all() and (np.abs(y32 - y_value) <= y_bound).all()
        assert np.allclose(y_value, _exact(t32, w2, b2), rtol=1e-15, atol=0)  # from the seed, not from float64 t
        assert (y_bound > 0).all() and (t_bound > 0).all()
    y_value, y_bound = bounds.local_bounds(model, x, {"t": t32, "y": y32})["y"]  # any order
    skewed = bounds.local_bounds(model, x, {"t": t32 + np.float32(1e-3), "y": y32})["y"]
    assert np.abs(skewed[0] - y_value).max() > 1e-4  # the value follows the seed ...
    assert skewed[1].max() < 2 * y_bound.max() < 1e-4  # ... the bound only the layer's own rounding
    end_to_end = bounds.layer_tolerances(model, x, ["y"])[0]
    assert (end_to_end > y_bound).all()  # the end-to-end bound of y carries layer 1's rounding too


def test_a_declared_order_that_the_code_does_not_follow_can_fail(tmp_path):
    """Declared: the bias added last. Code that starts its accumulator from the bias (2^24, whose ulp is 2) loses
    every product below 1 (sum: about 10), far outside the declared order's bound (about 1, the last addition's
    rounding) and inside the any-order bound (gamma_65 x 2^24, about 65): only a declaration can catch it, and the
    code that does follow it is inside its bound."""
    w1 = _RNG.standard_normal((64, 8)).astype(np.float32)
    w2 = _RNG.uniform(0, 0.3, (3, 64)).astype(np.float32)
    b1, b2 = np.zeros(64, np.float32), np.full(3, 2.0 ** 24, np.float32)
    model = _model(tmp_path, [helper.make_node("Gemm", ["x", "w1", "b1"], ["g"], transB=1),
                              helper.make_node("Relu", ["g"], ["h"]),
                              helper.make_node("Gemm", ["h", "w2", "b2"], ["y"], transB=1)],
                   {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, 8, 3)
    x = _RNG.uniform(-1, 1, (16, 8)).astype(np.float32)
    h = np.maximum(_dense(x, w1, b1), 0)
    follows, bias_first = _dense(h, w2, b2), _dense(h, w2, b2, bias_first=True)
    for seeded, declared_ok, any_ok in ((follows, True, True), (bias_first, False, True)):
        for order, ok in ((SEQUENTIAL, declared_ok), (None, any_ok)):
            value, bound = bounds.local_bounds(model, x, {"h": h, "y": seeded}, order)["y"]
            assert (np.abs(seeded - value) <= bound).all() == ok, (order, np.abs(seeded - value).max(), bound.max())
    value, declared = bounds.local_bounds(model, x, {"h": h, "y": bias_first}, SEQUENTIAL)["y"]
    assert np.abs(bias_first - value).max() > 4 * declared.max()  # not a near miss


def test_a_seed_the_graph_cannot_hold_is_reported_not_used(tmp_path):
    w = _RNG.standard_normal((3, 5)).astype(np.float32)
    model = _model(tmp_path, [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], {"w": w}, 5, 3)
    x = _RNG.uniform(-1, 1, (4, 5)).astype(np.float32)
    local = bounds.local_bounds(model, x, {"y": np.zeros((4, 7)), "absent": np.zeros((4, 3))})
    assert local == {"y": None, "absent": None}


def test_passes_in_threads_give_each_caller_its_own_figures(tmp_path):
    """The propagator is shared by every caller of a model and keeps a pass's state (its order, its shapes) on
    itself: ``assay mutate`` judges mutants layer by layer in threads beside the weight mutants' search. Passes
    of two orders run at once from 4 threads give the figures each gives alone (before the lock: a KeyError on
    a tensor's shape, or another pass's order)."""
    from concurrent.futures import ThreadPoolExecutor

    w1, b1 = _RNG.standard_normal((64, 16)).astype(np.float32), _RNG.standard_normal(64).astype(np.float32)
    w2, b2 = _RNG.standard_normal((8, 64)).astype(np.float32), _RNG.standard_normal(8).astype(np.float32)
    model = _model(tmp_path, [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
                              helper.make_node("Relu", ["h"], ["r"]),
                              helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)],
                   {"w1": w1, "b1": b1, "w2": w2, "b2": b2}, 16, 8)
    x = _RNG.uniform(-1, 1, (64, 16)).astype(np.float32)
    r32 = np.maximum(_dense(x, w1, b1), 0)
    seeds = {"r": r32, "y": _dense(r32, w2, b2)}
    alone = {order: bounds.local_bounds(model, x, seeds, order)["y"][1] for order in (None, SEQUENTIAL)}
    assert not np.array_equal(alone[None], alone[SEQUENTIAL])  # the two orders' figures differ
    orders = [None, SEQUENTIAL] * 16
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = list(pool.map(lambda order: bounds.local_bounds(model, x, seeds, order)["y"][1], orders))
    assert all(np.array_equal(bound, alone[order]) for bound, order in zip(found, orders))
