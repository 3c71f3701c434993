"""References of a model of several inputs and outputs: each input fed from its slice of the packed vector, the
outputs packed back in the graph's order. The expected values are computed here with numpy from the weights."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness import references
from harness.models import user_files

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
RNG = np.random.default_rng(5)
WA, BA = RNG.standard_normal((4, 3)).astype(np.float32), RNG.standard_normal(3).astype(np.float32)
WB = RNG.standard_normal((2, 3)).astype(np.float32)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """a [N, 4], b [2] (no batch axis): s = Relu(a @ WA + BA) [N, 3], t = Tanh(b @ WB) [3]."""
    nodes = [helper.make_node("Gemm", ["a", "WA", "BA"], ["g"]), helper.make_node("Relu", ["g"], ["s"]),
             helper.make_node("MatMul", ["b", "WB"], ["m"]), helper.make_node("Tanh", ["m"], ["t"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
                                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 3]),
                               helper.make_tensor_value_info("t", TensorProto.FLOAT, [3])],
                              [numpy_helper.from_array(WA, "WA"), numpy_helper.from_array(BA, "BA"),
                               numpy_helper.from_array(WB, "WB")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    root = tmp_path_factory.mktemp("m")
    onnx.save(proto, root / "two.onnx")
    return user_files.load(root / "two.onnx", root / "cache")


def _expected(packed: np.ndarray) -> np.ndarray:
    a, b = packed[:, :4].astype(np.float64), packed[:, 4:].astype(np.float64)
    return np.concatenate([np.maximum(a @ WA + BA, 0), np.tanh(b @ WB)], axis=1)


@pytest.mark.parametrize("name, atol", [("onnxruntime", 1e-5), ("float64", 1e-12)])
def test_onnx_references_unpack_the_inputs_and_pack_the_outputs(model, name, atol):
    packed = RNG.uniform(-1, 1, (7, 6)).astype(np.float32)
    outputs = references.get(name).run(model, packed)
    assert outputs.shape == (7, 6)
    np.testing.assert_allclose(outputs, _expected(packed), atol=atol, rtol=0)


def test_the_keras_reference_feeds_a_list_and_packs_every_output(tmp_path):
    import keras

    keras.utils.set_random_seed(4)
    a, b = keras.Input((4,), name="a"), keras.Input((2,), name="b")
    dense_a, dense_b = keras.layers.Dense(3, activation="relu", name="s"), keras.layers.Dense(1, name="t")
    keras.Model([a, b], [dense_a(a), dense_b(b)]).save(tmp_path / "two.keras")
    model = user_files.load(tmp_path / "two.keras", tmp_path / "cache")
    (wa, ba), (wb, bb) = dense_a.get_weights(), dense_b.get_weights()
    packed = RNG.uniform(-1, 1, (9, 6)).astype(np.float32)
    expected = np.concatenate([np.maximum(packed[:, :4] @ wa + ba, 0), packed[:, 4:] @ wb + bb], axis=1)
    for name in ("keras", "onnxruntime", "float64"):
        np.testing.assert_allclose(references.get(name).run(model, packed), expected, atol=1e-5, rtol=0,
                                   err_msg=name)
