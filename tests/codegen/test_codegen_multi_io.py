"""Models of several inputs and outputs: one packed input and one packed output buffer (docs/zoo.md).

The front ends add the unpacking and packing as IR nodes, so the C entry keeps
``(const float *input, float *output)``; the manifest lists each tensor's name,
shape and offset. The C is compared with ONNX Runtime and Keras fed each input
by name, its outputs concatenated in the graph's order by the test itself.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from codegen_support import TOLERANCE, draw_inputs, run_c
from onnx import TensorProto, helper, numpy_helper

import codegen
from codegen.errors import UnsupportedModel

RNG = np.random.default_rng(3)


def _weights(name: str, *shape: int):
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.5).astype(np.float32), name)


def _save(path, nodes, inputs, outputs, initializers):
    import onnx

    def values(pairs):
        return [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in pairs]

    graph = helper.make_graph(nodes, path.stem, values(inputs), values(outputs), initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    """a [N, 4] and b [3] (no batch axis), a Gemm on each, joined by Add: one output [N, 5]."""
    return _save(tmp_path_factory.mktemp("m") / "two_in.onnx",
                 [helper.make_node("Gemm", ["a", "Wa", "ba"], ["ga"]), helper.make_node("Relu", ["ga"], ["ra"]),
                  helper.make_node("Unsqueeze", ["b", "axis"], ["b2"]),
                  helper.make_node("Gemm", ["b2", "Wb", "bb"], ["gb"]), helper.make_node("Tanh", ["gb"], ["tb"]),
                  helper.make_node("Add", ["ra", "tb"], ["y"])],
                 [("a", ["N", 4]), ("b", [3])], [("y", ["N", 5])],
                 [_weights("Wa", 4, 5), _weights("ba", 5), _weights("Wb", 3, 5), _weights("bb", 5),
                  numpy_helper.from_array(np.array([0], np.int64), "axis")])


@pytest.fixture(scope="module")
def two_outputs(tmp_path_factory):
    """x [1, 2, 4, 4] -> Conv -> Relu, then two heads: a pooled [1, 3] and a Gemm [1, 2]."""
    return _save(tmp_path_factory.mktemp("m") / "two_out.onnx",
                 [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                  helper.make_node("Flatten", ["p"], ["h1"]), helper.make_node("Flatten", ["r"], ["f"]),
                  helper.make_node("Gemm", ["f", "W2", "b2"], ["h2"])],
                 [("x", [1, 2, 4, 4])], [("h1", [1, 3]), ("h2", [1, 2])],
                 [_weights("W", 3, 2, 3, 3), _weights("B", 3), _weights("W2", 48, 2), _weights("b2", 2)])


def _onnx_packed(path, packed_inputs: np.ndarray) -> np.ndarray:
    """ONNX Runtime fed each input by name from its slice, the outputs concatenated in the graph's order."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rows = []
    for sample in packed_inputs:
        feeds, start = {}, 0
        for value in session.get_inputs():
            shape = [1 if isinstance(d, str) else d for d in value.shape]
            size = int(np.prod(shape))
            feeds[value.name] = sample[start:start + size].reshape(shape)
            start += size
        rows.append(np.concatenate([np.ravel(o) for o in session.run(None, feeds)]))
    return np.stack(rows)


@pytest.mark.parametrize("strategy", ["v2", "v3"])
@pytest.mark.parametrize("fixture, sizes, outputs", [
    ("two_inputs", [("a", [4], 0), ("b", [3], 4)], [("y", [5], 0)]),
    ("two_outputs", [("x", [2, 4, 4], 0)], [("h1", [3], 0), ("h2", [2], 3)]),
])
def test_packed_buffers_match_onnxruntime(request, tmp_path, strategy, fixture, sizes, outputs):
    path = request.getfixturevalue(fixture)
    manifest = codegen.generate(path, tmp_path / "c", name=path.stem, frontend="onnx", strategy=strategy)
    (inp,), (out,) = manifest["inputs"], manifest["outputs"]
    assert [(t["name"], t["shape"], t["offset"]) for t in inp["tensors"]] == sizes
    assert [(t["name"], t["shape"], t["offset"]) for t in out["tensors"]] == outputs
    assert inp["size"] == sum(int(np.prod(s)) for _, s, _ in sizes) and inp["layout"] == "C"
    x = draw_inputs((inp["size"],))
    c = run_c(tmp_path / "c", x)
    np.testing.assert_allclose(c, _onnx_packed(path, x), atol=TOLERANCE, rtol=0)


def test_v1_refuses_several_inputs_with_its_reason(tmp_path, two_inputs):
    with pytest.raises(UnsupportedModel, match="2 inputs and 1 outputs; assay-v1's layer chain reads one input"):
        codegen.generate(two_inputs, tmp_path / "c", name="two_in", frontend="onnx", strategy="v1")


def test_keras_front_end_packs_inputs_and_outputs_in_the_models_order(tmp_path):
    import keras

    keras.utils.set_random_seed(2)
    a, x = keras.Input((4,), name="a"), keras.Input((5,), name="x")
    trunk = keras.layers.Dense(8, activation="relu", name="trunk")(x)
    heads = [keras.layers.Dense(3, activation="softmax", name="cls")(trunk), keras.layers.Dense(1, name="reg")(trunk),
             keras.layers.Dense(2, name="mix")(keras.layers.Concatenate(name="cat")([a, x]))]
    model = keras.Model([a, x], heads)
    model.save(tmp_path / "multi.keras")
    manifest = codegen.generate(tmp_path / "multi.keras", tmp_path / "c", name="multi", frontend="keras", strategy="v2")
    (inp,), (out,) = manifest["inputs"], manifest["outputs"]
    assert [(t["name"], t["offset"]) for t in inp["tensors"]] == [("a", 0), ("x", 4)]
    assert [(t["name"], t["offset"]) for t in out["tensors"]] == [("cls", 0), ("reg", 3), ("mix", 4)]
    packed = draw_inputs((9,))
    expected = np.concatenate([np.asarray(v) for v in model([packed[:, :4], packed[:, 4:]], training=False)], axis=1)
    np.testing.assert_allclose(run_c(tmp_path / "c", packed), expected, atol=TOLERANCE, rtol=0)
