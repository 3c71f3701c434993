"""Loading models of several inputs and outputs: packed vectors, each tensor named (``Model.inputs``)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.errors import ModelError
from harness.models import cache, user_files
from harness.models.model import Tensor

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _two_in_two_out(path):
    """a [N, 4] and b [1, 2, 2, 2] (a batch axis of 1): y = a @ W [N, 3], z = Relu(b) [1, 2, 2, 2]."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["a", "W"], ["y"]), helper.make_node("Relu", ["b"], ["z"])],
                              "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
                                    helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 2, 2, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 2, 2, 2])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_an_onnx_model_of_two_inputs_and_outputs_is_packed_in_the_graphs_order(tmp_path):
    model = user_files.load(_two_in_two_out(tmp_path / "two.onnx"), tmp_path / "cache")
    assert model.is_packed
    assert model.inputs == (Tensor("a", (4,)), Tensor("b", (2, 2, 2)))
    assert model.outputs == (Tensor("y", (3,)), Tensor("z", (2, 2, 2)))
    assert (model.input_shape, model.output_shape, model.layout, model.output_layout) == ((12,), (11,), "C", "C")
    assert model.layouts_of("onnx") == ("C", "C")


def test_the_cache_keeps_the_tensors_and_a_single_input_record_is_unchanged(tmp_path):
    model = user_files.load(_two_in_two_out(tmp_path / "two.onnx"), tmp_path / "cache")
    fields = cache.model_to_dict(model, tmp_path)
    assert fields["inputs"] == [{"name": "a", "shape": [4]}, {"name": "b", "shape": [2, 2, 2]}]
    assert cache.model_from_dict(fields, tmp_path) == model
    single = cache.model_from_dict({**fields, "input_shape": [4], "output_shape": [3], "inputs": [], "outputs": []},
                                   tmp_path)
    assert not single.is_packed and "inputs" not in cache.model_to_dict(single, tmp_path)


def _keras_two_inputs(shape_b):
    import keras

    a, b = keras.Input((4,), name="a"), keras.Input(shape_b, name="b")
    flat = keras.layers.Flatten(name="flat")(b) if len(shape_b) > 1 else b
    joined = keras.layers.Concatenate(name="cat")([a, flat])
    return keras.Model([a, b], [keras.layers.Dense(2, name="y")(joined), keras.layers.Dense(1, name="z")(a)])


def test_a_keras_model_of_vectors_is_packed_and_exported_with_every_input_and_output(tmp_path):
    _keras_two_inputs((3,)).save(tmp_path / "two.keras")
    model = user_files.load(tmp_path / "two.keras", tmp_path / "cache")
    assert model.name == "two" and model.is_packed and sorted(model.files) == ["keras", "onnx"]
    assert model.inputs == (Tensor("a", (4,)), Tensor("b", (3,))) and model.outputs == (Tensor("y", (2,)),
                                                                                       Tensor("z", (1,)))
    exported = onnx.load(model.file("onnx"))
    declared = [(v.name, [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim])
                for v in [*exported.graph.input, *exported.graph.output]]
    assert declared == [("input_0", ["N", 4]), ("input_1", ["N", 3]), ("output_0", ["N", 2]), ("output_1", ["N", 1])]


def test_a_keras_model_of_several_inputs_with_an_image_is_refused_with_the_reason(tmp_path):
    _keras_two_inputs((2, 2, 3)).save(tmp_path / "image.keras")
    with pytest.raises(ModelError, match="input 'b' has shape \\(2, 2, 3\\); a Keras model with several inputs"):
        user_files.load(tmp_path / "image.keras", tmp_path / "cache")
