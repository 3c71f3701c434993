"""A campaign on models of several inputs and outputs (docs/zoo.md): generated, compiled and run on the host,
compared with ONNX Runtime and Keras, the error of each output named; V1 refuses with its reason."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.core.results import ResultStore
from harness.stages.semantic import report
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
RNG = np.random.default_rng(11)


def _weights(name, *shape):
    return numpy_helper.from_array((RNG.standard_normal(shape) * 0.5).astype(np.float32), name)


def _save(path, nodes, inputs, outputs, initializers):
    def values(pairs):
        return [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name, shape in pairs]

    graph = helper.make_graph(nodes, path.stem, values(inputs), values(outputs), initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    import keras

    root = tmp_path_factory.mktemp("models")
    two_in = _save(root / "two_in.onnx",
                   [helper.make_node("Gemm", ["a", "Wa", "ba"], ["ga"]), helper.make_node("Relu", ["ga"], ["ra"]),
                    helper.make_node("Gemm", ["b", "Wb", "bb"], ["gb"]), helper.make_node("Sigmoid", ["gb"], ["sb"]),
                    helper.make_node("Concat", ["ra", "sb"], ["y"], axis=1)],
                   [("a", ["N", 4]), ("b", ["N", 3])], [("y", ["N", 7])],
                   [_weights("Wa", 4, 5), _weights("ba", 5), _weights("Wb", 3, 2), _weights("bb", 2)])
    two_out = _save(root / "two_out.onnx",
                    [helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
                     helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["p"]),
                     helper.make_node("Flatten", ["p"], ["pooled"]), helper.make_node("Flatten", ["r"], ["f"]),
                     helper.make_node("Gemm", ["f", "W2", "b2"], ["scores"])],
                    [("x", [1, 2, 4, 4])], [("pooled", [1, 3]), ("scores", [1, 2])],
                    [_weights("W", 3, 2, 3, 3), _weights("B", 3), _weights("W2", 48, 2), _weights("b2", 2)])
    keras.utils.set_random_seed(7)
    a, b = keras.Input((4,), name="a"), keras.Input((3,), name="b")
    joined = keras.layers.Add(name="add")([keras.layers.Dense(6, activation="relu", name="da")(a),
                                           keras.layers.Dense(6, activation="tanh", name="db")(b)])
    keras.Model([a, b], keras.layers.Dense(2, name="head")(joined)).save(root / "two_in_keras.keras")
    return {"two_in": two_in, "two_out": two_out, "keras": str(root / "two_in_keras.keras")}


def _records(tmp_path, model, references):
    settings = campaign.Settings(n_inputs=20, seed=3, work_dir=tmp_path / "work")
    store = ResultStore(tmp_path / "out" / "results.json")
    plan = campaign.plan([model], ["assay-v1", "assay-v2", "assay-v3"], references, ["host"], settings)
    assert not plan.bad_input
    for item in plan.items:
        campaign.run_item(item, settings, store)
    return store.records()


@pytest.mark.parametrize("name, references", [("two_in", ["onnxruntime"]), ("two_out", ["onnxruntime"]),
                                              ("keras", ["keras", "onnxruntime"])])
def test_models_of_several_inputs_or_outputs_pass_on_the_host(tmp_path, models, name, references):
    records = _records(tmp_path, models[name], references)
    verdicts = {(r["generator"], r["variant"], r["reference"]): r["verdict"] for r in records}
    variants = ["keras", "onnx"] if name == "keras" else ["onnx"]
    assert verdicts == {(g, v, ref): "not supported" if g == "assay-v1" else "pass"
                        for g in ("assay-v1", "assay-v2", "assay-v3") for v in variants for ref in references}
    v1 = next(r for r in records if r["generator"] == "assay-v1")
    assert "assay-v1's layer chain reads one input and writes one output" in v1["cause"]
    for record in (r for r in records if r["verdict"] == "pass"):
        assert 0 <= record["max_abs_error"] <= record["tolerance"]
        assert record["arbiter"] and "c_error" in record["arbiter"]


def test_each_output_of_a_model_of_several_outputs_has_its_error_in_the_report(tmp_path, models):
    records = _records(tmp_path, models["two_out"], ["onnxruntime"])
    passed = [r for r in records if r["verdict"] == "pass"]
    for record in passed:
        per_output = record["max_abs_error_per_output"]
        assert list(per_output) == ["pooled", "scores"]
        assert max(per_output.values()) == record["max_abs_error"]
    assert "/ onnxruntime: pooled " in report.markdown(records)
