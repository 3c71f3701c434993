"""Rebuild a Keras 3 model in a Keras 2 environment (run by a peer's own Python; imports nothing of Assay).

Keras 2 cannot read Keras 3 files (``.keras`` or ``.h5``: ``InputLayer(batch_shape=...)``, dtype policy
objects). Assay hands such peers the model as a graph of layers (class name, Keras 3 config, the indices of
its inputs, ``-1`` for the model's input) plus its weights (``.npz``), schema ``assay-keras-graph/1``; each
layer is rebuilt from the config keys Keras 2 knows (under their Keras 2 names), and the weights are set. A
chain becomes a ``Sequential``, any other graph a functional ``Model``.
"""

import json

import numpy as np

DROP = {"dtype", "optional", "quantization_config", "lora_rank", "lora_alpha", "gradient_checkpointing",
        # trained weights are set below; Keras 3 initializer configs do not load in Keras 2
        "kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer", "activity_regularizer",
        "kernel_constraint", "bias_constraint", "beta_initializer", "gamma_initializer", "moving_mean_initializer",
        "moving_variance_initializer"}
# Config keys Keras 3 renamed: class -> {Keras 3 key: Keras 2 key}.
RENAMED = {"LeakyReLU": {"negative_slope": "alpha"}}


def load(spec_path, weights_path):
    """The Keras 2 model equivalent to the graph described in ``spec_path``."""
    from tensorflow import keras

    keras.backend.clear_session()  # a driver serves many requests: no names or graphs left from the last one
    with open(spec_path) as stream:
        spec = json.load(stream)
    weights = np.load(weights_path)
    entries = spec["layers"]
    layers = [_layer(keras, entry) for entry in entries]
    source = keras.Input(shape=tuple(spec["input_shape"]), name="input")
    if spec["output"] == len(entries) - 1 and all(entry["inputs"] == [i - 1] for i, entry in enumerate(entries)):
        model = keras.Sequential([source, *layers])
    else:
        tensors = {-1: source}
        for index, (entry, layer) in enumerate(zip(entries, layers)):
            arguments = [tensors[k] for k in entry["inputs"]]
            tensors[index] = layer(arguments if len(arguments) > 1 else arguments[0])
        model = keras.Model(source, tensors[spec["output"]])
    for index, (entry, layer) in enumerate(zip(entries, layers)):
        layer.set_weights([weights[f"{index}_{i}"] for i in range(entry["n_weights"])])
    return model


def _layer(keras, entry):
    renamed = RENAMED.get(entry["class_name"], {})
    config = {renamed.get(key, key): value for key, value in entry["config"].items() if key not in DROP}
    return getattr(keras.layers, entry["class_name"]).from_config(config)
