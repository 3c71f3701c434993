"""The model handed to a Keras 2 peer: its graph of layers (class name, config, inputs) and weights, from Keras 3.

Keras 2 (acetone-nnet, keras2c) cannot read Keras 3 files, so Assay writes ``<stem>.json`` (schema
``assay-keras-graph/1``) and ``<stem>.npz``; ``drivers/_keras2.py`` rebuilds the model there: a chain of layers
as a ``Sequential``, any other graph (``Add``, ``Concatenate`` of branches) as a functional model, which is
what each peer's Keras importer reads. Layer names are handed over as C identifiers (``0_dense`` becomes
``layer_0_dense``; the Keras 3 name is kept as ``keras_name``): keras2c names its C arrays after the layers and
refuses any other name, and the name says nothing about the function. A model with several inputs or
outputs, or a layer called more than once, is an error naming the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models.model import Model
from harness.models.names import identifier

SCHEMA = "assay-keras-graph/1"
MODEL_INPUT = -1  # the index of the model's input among a layer's ``inputs``
INPUT_NAME = "input"  # the Keras 2 Input layer's name (drivers/_keras2.py): no layer may take it


def write(model: Model, stem: Path) -> tuple[Path, Path]:
    """Write the graph and its weights; ModelError when the Keras model cannot be handed over."""
    from harness.models.tf_runtime import keras

    net = keras().saving.load_model(model.file("keras"), compile=False)
    if len(net.inputs) != 1 or len(net.outputs) != 1:
        raise ModelError(f"{model.name}: {len(net.inputs)} inputs and {len(net.outputs)} outputs; Assay hands "
                         f"Keras 2 peers models with one of each")
    body = [layer for layer in net.layers if type(layer).__name__ != "InputLayer"]
    index = {_producer(net.inputs[0]): MODEL_INPUT}
    layers, arrays = [], {}
    for position, (layer, name) in enumerate(zip(body, c_identifiers([layer.name for layer in body]))):
        if len(layer._inbound_nodes) != 1:
            raise ModelError(f"{model.name}: layer {layer.name} is called {len(layer._inbound_nodes)} times; Assay "
                             f"hands Keras 2 peers graphs whose layers are called once")
        parents = [_producer(tensor) for tensor in layer._inbound_nodes[0].input_tensors]
        weights = layer.get_weights()
        arrays.update({f"{position}_{i}": array for i, array in enumerate(weights)})
        layers.append({"class_name": type(layer).__name__, "config": {**layer.get_config(), "name": name},
                       "keras_name": layer.name, "inputs": [index[parent] for parent in parents],
                       "n_weights": len(weights)})
        index[layer.name] = position
    stem.parent.mkdir(parents=True, exist_ok=True)
    spec, blob = stem.with_suffix(".json"), stem.with_suffix(".npz")
    spec.write_text(json.dumps({"schema": SCHEMA, "input_shape": list(net.input_shape[1:]), "layers": layers,
                                "output": index[_producer(net.outputs[0])]}, default=str))
    np.savez(blob, **arrays)
    return spec, blob


def c_identifiers(names: list[str]) -> list[str]:
    """``names`` as distinct C identifiers (``harness.models.names``: valid names kept, ``layer_`` before a leading
    digit); never the Input layer's name."""
    taken, result = {INPUT_NAME}, []
    for name in names:
        text = identifier(name, "layer")
        while text in taken:
            text += "_"
        taken.add(text)
        result.append(text)
    return result


def _producer(tensor) -> str:
    """The name of the layer whose output ``tensor`` is (Keras 3's record of where a symbolic tensor came from)."""
    return tensor._keras_history.operation.name
