"""The Keras -> ONNX exporter's Gelu: Keras's ``gelu`` activation (erf form) and ``keras.ops.gelu`` (tanh form by
default) become ONNX ``Gelu`` with the matching ``approximate``, in a file at opset 20 (Gelu's first), which ONNX
Runtime runs to Keras's outputs; a model without Gelu keeps the exporter's opset 17."""

from __future__ import annotations

import numpy as np
import onnx

from harness.models import onnx_export
from harness.models.tf_runtime import keras
from harness.references import onnxruntime_ref


def _gelu_model():
    k = keras()
    x = k.Input((6,))
    y = k.layers.Dense(6, activation="gelu")(x)
    y = k.ops.gelu(k.layers.Dense(6)(y))
    y = k.activations.gelu(k.layers.Dense(6)(y), approximate=False)
    model = k.Model(x, y)
    rng = np.random.default_rng(3)
    for layer in model.layers:
        layer.set_weights([rng.uniform(-1.5, 1.5, w.shape).astype(np.float32) for w in layer.get_weights()])
    return model


def test_gelu_is_exported_at_opset_20_with_its_form_and_matches_keras(tmp_path):
    model = _gelu_model()
    path = tmp_path / "gelu.onnx"
    onnx_export.export(model, path)
    proto = onnx.load(str(path))
    assert [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")] == [20] and proto.ir_version == 9
    forms = [onnx.helper.get_attribute_value(a).decode() for node in proto.graph.node if node.op_type == "Gelu"
             for a in node.attribute if a.name == "approximate"]
    assert forms == ["none", "tanh", "none"]
    x = np.random.default_rng(1).uniform(-3, 3, (64, 6)).astype(np.float32)
    got = onnxruntime_ref.session(path).run(None, {"input": x})[0]
    assert float(np.max(np.abs(got - model(x, training=False).numpy()))) <= 1e-5


def test_a_model_without_gelu_keeps_opset_17(tmp_path):
    k = keras()
    x = k.Input((4,))
    path = tmp_path / "relu.onnx"
    onnx_export.export(k.Model(x, k.layers.Dense(3, activation="relu")(x)), path)
    proto = onnx.load(str(path))
    assert [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")] == [onnx_export.OPSET] == [17]
    assert proto.ir_version == onnx_export.IR_VERSION
