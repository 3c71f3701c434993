"""Rebuild a Keras 3 model in a Keras 2 environment (run by a peer's own Python; imports nothing of Assay).

Keras 2 cannot read Keras 3 files (``.keras`` or ``.h5``: ``InputLayer(batch_shape=...)``, dtype policy
objects). Assay hands such peers the model as a chain of layers (class name, Keras 3 config) plus its
weights (``.npz``); each layer is rebuilt from the config keys Keras 2 knows, and the weights are set. Only
single-chain models are transferred; anything else is refused with a reason.
"""

import json

import numpy as np

DROP = {"dtype", "optional", "quantization_config", "lora_rank", "lora_alpha", "gradient_checkpointing"}


def load(spec_path, weights_path):
    """The Keras 2 ``Sequential`` equivalent of the chain described in ``spec_path``."""
    from tensorflow import keras

    with open(spec_path) as stream:
        spec = json.load(stream)
    weights = np.load(weights_path)
    model = keras.Sequential([keras.Input(shape=tuple(spec["input_shape"]), name="input")])
    for index, layer in enumerate(spec["layers"]):
        cls = getattr(keras.layers, layer["class_name"])
        config = {key: value for key, value in layer["config"].items() if key not in DROP}
        for key in ("kernel_initializer", "bias_initializer", "kernel_regularizer", "bias_regularizer",
                    "activity_regularizer", "kernel_constraint", "bias_constraint", "beta_initializer",
                    "gamma_initializer", "moving_mean_initializer", "moving_variance_initializer"):
            config.pop(key, None)  # trained weights are set below; Keras 3 initializer configs do not load
        model.add(cls.from_config(config))
        model.layers[-1].set_weights([weights[f"{index}_{i}"] for i in range(layer["n_weights"])])
    return model
