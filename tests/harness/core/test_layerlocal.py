"""The layer-local verdict (``harness.core.layerlocal``) on C compiled and run on the host: a ``dir:`` folder whose
``assay.json`` names its layer output buffers and declares an order of accumulation. Code that starts a dense
layer's accumulator from the bias while declaring the bias added last fails at that layer with the declaration and
passes without it; the same code summing as declared passes; bad layer records are refused at load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import two_dense_support
from harness.contract import FAIL, PASS
from harness.core import layerlocal
from harness.core.inputs import make_inputs
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.models import zoo
from harness.references import bounds

N_INPUTS = 24
SEQUENTIAL = {"rule": "sequential", "conv_taps": [], "flatten": []}


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    """Two dense layers; the second's bias is 2^24 (ulp 2) and its products are in [0, 1): started from the bias,
    the accumulator loses every product (about 10 in all), outside the declared order's bound (about 1) and inside
    the any-order bound (gamma_65 x 2^24, about 65)."""
    w1, b1, w2, b2 = two_dense_support.weights()
    root = tmp_path_factory.mktemp("two")
    two_dense_support.onnx_file(root / "two.onnx", w1, b1, w2, b2)
    model = zoo.load(root / "two.onnx", cache_dir=root / "cache")
    return model, (w1, b1, w2, b2), root


def _judge(network, name, bias_first, accumulation):
    model, weights, root = network
    code = GeneratedCode.from_directory(two_dense_support.c_folder(
        root / name, *weights, bias_first=bias_first, **({"accumulation": accumulation} if accumulation else {})))
    order = bounds.Order.from_manifest(code.manifest)
    return layerlocal.judge(code, model, make_inputs(model, N_INPUTS, 0), root / f"{name}-work", 120, order)


def test_a_wrong_declaration_fails_at_its_layer_and_no_declaration_passes(network):
    declared = _judge(network, "declared", True, SEQUENTIAL)
    assert declared["verdict"] == FAIL and declared["first_failing"] == "fc2"
    assert declared["accumulation"] == bounds.Order().key()
    assert declared["cause"].startswith("layer fc2 (y) at input #") and "above the layer's local bound" in \
        declared["cause"]
    rows = {row["layer"]: row for row in declared["layers"]}
    assert rows["fc1"]["c_distance"] <= rows["fc1"]["bound"]  # the layer before it is judged and within its bound
    assert rows["fc2"]["c_distance"] > 4 * rows["fc2"]["bound"]
    undeclared = _judge(network, "undeclared", True, None)
    assert undeclared["verdict"] == PASS and undeclared["accumulation"] == "any"
    assert all(row["judged"] and row["c_distance"] <= row["bound"] for row in undeclared["layers"])


def test_code_that_sums_as_it_declares_passes_with_the_declaration(network):
    result = _judge(network, "follows", False, SEQUENTIAL)
    assert result["verdict"] == PASS and result["first_failing"] is None and 1 <= result["margin"]
    assert [row["layer"] for row in result["layers"] if row["judged"]] == ["fc1", "fc2"]


@pytest.mark.parametrize("change, message", [
    (lambda layer: layer["output"].update(symbol="h); system(\"x\""), "a C identifier"),
    (lambda layer: layer.update(file="../net.c"), "one of the sources"),
    (lambda layer: layer["output"].update(size=0), "'size' (> 0)"),
    (lambda layer: layer["output"].update(shape=[8, 9]), "product is its size"),
    (lambda layer: layer.update(lines=[5, "6"]), "'lines' [first, last]"),
])
def test_a_layer_record_that_is_not_plain_data_is_refused_at_load(tmp_path, change, message):
    root = tmp_path / "bad"
    root.mkdir()
    (root / "net.c").write_text("float h[64];\nvoid net(const float *input, float *output) { output[0] = 0; }\n")
    layer = {"index": 0, "name": "fc1", "file": "net.c", "lines": [1, 2],
             "output": {"tensor": "h", "symbol": "h", "offset": 0, "size": 64, "shape": [64], "layout": "C"}}
    change(layer)
    (root / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 8, "output_size": 3,
                                                 "layers": [layer]}))
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        GeneratedCode.from_directory(root)


def test_the_c_values_of_code_from_keras_are_seeded_channels_first():
    """Code from Keras keeps a convolution's output channels last (HWC); the float64 graph, Assay's export, channels
    first: the seed is the same values moved, a vector is left as it is, and code from ONNX is left alone."""
    from harness.runners.probed import Probe

    image = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)  # (N, H, W, C)
    probe = Probe(0, "conv1", "conv1:0", 0, 60, (3, 4, 5), "HWC")
    keras = GeneratedCode(Path("."), "f", 1, 1, None, None, (), {"model": {"format": "keras"}})
    seeded = layerlocal.graph_layout(image.reshape(2, -1), probe, keras)
    assert seeded.dtype == np.float64 and (seeded == image.transpose(0, 3, 1, 2).reshape(2, -1)).all()
    vector = Probe(1, "dense1", "dense1:0", 60, 6, (6,), "C")
    assert (layerlocal.graph_layout(image.reshape(2, -1)[:, :6], vector, keras) == image.reshape(2, -1)[:, :6]).all()
    onnx_code = GeneratedCode(Path("."), "f", 1, 1, None, None, (), {"model": {"format": "onnx"}})
    assert (layerlocal.graph_layout(image.reshape(2, -1), probe, onnx_code) == image.reshape(2, -1)).all()


def test_a_layer_named_as_the_prefix_of_the_next_is_judged_against_its_own_node(tmp_path):
    """MobileNetV2's depthwise convolution ``dw`` is followed by its batch normalisation ``dw_BN``: the export's
    node ``dw_BN_bn`` starts with ``dw_``, and was taken for ``dw``'s tensor, so correct C failed at ``dw`` by the
    whole normalisation (0.39 on MobileNetV2 at 96 x 96). Every name a node may be named after now competes, the
    longest wins: the C passes, each probed tensor paired with its own layer's node."""
    from harness.core.intermediate import graph_tensors
    from harness.core.pipeline import generate_code
    from harness.core.plan import Settings, load_model
    from harness.models.tf_runtime import keras
    from harness.stages.semantic import run as campaign

    k = keras()
    rng = np.random.default_rng(3)
    inputs = k.Input((6, 6, 2))
    x = k.layers.Conv2D(4, 3, padding="same", name="c")(inputs)
    x = k.layers.DepthwiseConv2D(3, padding="same", name="dw")(x)
    x = k.layers.BatchNormalization(name="dw_BN")(x)
    x = k.layers.ReLU(6.0, name="dw_relu")(x)
    x = k.layers.GlobalAveragePooling2D(name="gap")(x)
    network = k.Model(inputs, k.layers.Dense(3, name="d")(x))
    bn = network.get_layer("dw_BN")
    g, b, m, v = bn.get_weights()
    bn.set_weights([g * 1.3, b + 0.2, rng.normal(0, 0.5, m.shape), rng.uniform(0.5, 2.0, v.shape)])
    network.save(tmp_path / "prefix.keras")
    settings = Settings(n_inputs=4, work_dir=tmp_path / "work")
    model = load_model(str(tmp_path / "prefix.keras"), settings)
    item = next(i for i in campaign.plan([str(tmp_path / "prefix.keras")], ["assay-v2"], ["keras"], ["host"],
                                         settings).items if i.variant == "keras")
    code = generate_code(item, model, settings, {}, {})
    probes = [layer["output"]["tensor"] for layer in code.manifest["layers"] if layer.get("output")]
    pairs = dict(zip(probes, graph_tensors(code, model, probes)))
    assert not (pairs.get("dw:0") or "").startswith("dw_BN"), pairs
    result = layerlocal.judge(code, model, make_inputs(model, 4, 0), tmp_path / "judge", 120.0,
                              bounds.Order.from_manifest(code.manifest))
    assert result["verdict"] == PASS and result["covers_output"], result.get("cause")
