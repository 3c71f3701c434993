"""The graph Assay hands Keras 2 peers: layer inputs, C-identifier names, weights (Assay's own Keras: no venv)."""

from __future__ import annotations

import json

import numpy as np

from harness.core.plan import Settings, load_model
from harness.generators.peers.keras_graph import MODEL_INPUT, c_identifiers, write
from harness.stages.conformance import cases as conformance_cases


def test_names_become_distinct_c_identifiers():
    assert c_identifiers(["0_dense", "dense", "b0-1 conv", "input", "dense"]) == \
        ["layer_0_dense", "dense", "b0_1_conv", "input_", "dense_"]


def test_a_residual_graph_is_handed_over_with_each_layer_inputs(tmp_path):
    (case,) = conformance_cases.select(["add_residual_conv"])
    model = load_model(str(conformance_cases.build(case, tmp_path)), Settings(work_dir=tmp_path))
    spec_path, weights_path = write(model, tmp_path / "handed" / "graph")
    spec = json.loads(spec_path.read_text())
    layers = spec["layers"]
    assert [(layer["class_name"], layer["config"]["name"], layer["inputs"]) for layer in layers[:2]] == \
        [("Conv2D", "b0_0_conv2d", [MODEL_INPUT]), ("Add", "layer_1_add", [0, MODEL_INPUT])]
    assert layers[1]["keras_name"] == "1_add" and spec["output"] == len(layers) - 1
    weights = np.load(weights_path)
    assert weights["0_0"].shape == (3, 3, 3, 3) and "1_0" not in weights  # Add has no weights
