"""The model handed to a Keras 2 peer: its chain of layers (class name, config) and weights, from Keras 3.

Keras 2 (acetone-nnet, keras2c) cannot read Keras 3 files, so Assay writes ``<stem>.json`` (schema
``assay-keras-chain/1``) and ``<stem>.npz``; ``drivers/_keras2.py`` rebuilds the model there. Only models
whose layers form a single chain are written; any other graph is an error naming the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model

SCHEMA = "assay-keras-chain/1"


def write(model: Model, stem: Path) -> tuple[Path, Path]:
    """Write the chain and its weights; ModelError when the Keras model is not one chain of layers."""
    from harness.models.tf_runtime import keras

    net = keras().saving.load_model(model.file("keras"), compile=False)
    layers, arrays = [], {}
    body = [layer for layer in net.layers if type(layer).__name__ != "InputLayer"]
    previous = net.inputs[0]
    for layer in body:
        if len(layer._inbound_nodes) != 1 or layer.input is not previous:
            raise ModelError(f"{model.name}: not a single chain of layers ({layer.name} does not take the "
                             f"previous layer's output); Assay hands Keras 2 peers chains only")
        previous = layer.output
        weights = layer.get_weights()
        arrays.update({f"{len(layers)}_{i}": array for i, array in enumerate(weights)})
        layers.append({"class_name": type(layer).__name__, "config": layer.get_config(), "n_weights": len(weights)})
    stem.parent.mkdir(parents=True, exist_ok=True)
    spec, blob = stem.with_suffix(".json"), stem.with_suffix(".npz")
    spec.write_text(json.dumps({"schema": SCHEMA, "input_shape": list(net.input_shape[1:]), "layers": layers},
                               default=str))
    np.savez(blob, **arrays)
    return spec, blob
