"""Gelu through codegen V1, V2 and V3: Keras's ``gelu`` activation (the erf form, keras.activations.gelu's
default) and ``keras.ops.gelu`` (the tanh form by default, the erf form with ``approximate=False``), and ONNX
``Gelu`` (opset 20, ``approximate`` "none" or "tanh"): compiled, run and compared with Keras or ONNX Runtime
(``check_keras`` / ``check_onnx`` run every strategy). The two forms differ by up to 4.7e-4 (at |x| = 2.7), far
above the tolerance, so a front end that picked the wrong form fails here.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import codegen

keras = pytest.importorskip("keras")
layers, ops = keras.layers, keras.ops


def test_keras_gelu_activation_and_both_forms_of_the_op(check_keras):
    def body(x):
        x = layers.Dense(6, activation="gelu")(x)  # erf form
        x = layers.Activation("gelu")(layers.Dense(6)(x))  # erf form
        x = ops.gelu(layers.Dense(6)(x))  # keras.ops.gelu: approximate=True, the tanh form
        return keras.activations.gelu(layers.Dense(6)(x), approximate=False)

    inputs = keras.Input((6,))
    generated = check_keras(keras.Model(inputs, body(inputs), name="gelu_forms"), low=-4.0, high=4.0)
    text = "".join(path.read_text() for path in generated.directory.glob("*.c"))
    assert text.count("erff(") == 3 and text.count("tanhf(") == 1


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_onnx_gelu(check_onnx, approximate):
    rng = np.random.default_rng(7)
    weights = numpy_helper.from_array((rng.standard_normal((8, 6)) * 1.5).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Gelu", ["h"], ["y"], approximate=approximate)],
        "gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    check_onnx(model, name=f"gelu_{approximate}")


def test_onnx_gelu_with_another_approximation_is_refused_by_name(tmp_path):
    import onnx

    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], approximate="sigmoid")], "gelu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.save(model, tmp_path / "gelu.onnx")
    with pytest.raises(codegen.UnsupportedModel, match=r"node 'Gelu_0' \(Gelu\) has approximate='sigmoid'; 'none' "
                                                        "and 'tanh' are supported"):
        codegen.generate(tmp_path / "gelu.onnx", tmp_path / "out", frontend="onnx")
