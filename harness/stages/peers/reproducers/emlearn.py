"""Reproduces an emlearn finding without Assay (written by ``assay peers report``; docs/peers.md).

Needs only what emlearn itself needs: ``pip install emlearn==0.23.2 keras jax`` (the versions in
``finding.json``; Keras 3 on JAX) and gcc. Run ``python reproduce.py`` in this folder. For each implementation
named in ``finding.json`` (emlearn's inference methods) it asks emlearn's own API for C from ``model.keras``
(``emlearn.convert(model, method=...).save(name=..., file=..., inference=[...])`` into ``c/<implementation>/``):

- ``loadable``: as a regressor (``return_type="regressor"``), called as ``<name>_regress(in, n_in, out, n_out)``;
- ``inline``: as a classifier (emlearn's default ``return_type``, the only one its inline method takes),
  called as ``<name>_infer(...)``, whose outputs emlearn leaves in its second activation buffer.

emlearn's ``loadable`` network refuses at run time a network of fewer than two layers (finding E3,
``eml_net.h``: ``EML_PRECONDITION(model->n_layers >= 2, ...)``); when the model has one Dense layer, the script
appends a Dense layer with identity weights and zero bias, which leaves Keras's function unchanged (checked
against ``expected.npy``), so that the finding shown is this one and not E3. The C is compiled with
``driver.c`` (gcc -O0 -std=c99, emlearn's headers on the include path), run on ``inputs.npy`` and compared with
``expected.npy`` (Keras's outputs, computed by Assay) within ``|C - expected| <= atol + rtol * |expected|``
(``reproducer_common.py``). Exit status 1 when an implementation listed as defective is wrong, NaN, crashes or
cannot be generated (the defect is reproduced), 0 when every one matches (the defect is gone).
"""

import os
import shutil
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402

import reproducer_common  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "net"


def network(finding):
    """The model as emlearn takes it: a ``Sequential`` of its layers, with the identity layer E3 asks for."""
    import keras

    model = keras.models.load_model(os.path.join(HERE, finding["model"]), compile=False)
    layers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"]
    sequential = keras.Sequential([keras.Input(model.input_shape[1:]), *layers])
    if sum(type(layer).__name__ == "Dense" for layer in layers) < 2:
        width = finding["output_size"]
        identity = keras.layers.Dense(width, name="identity_for_E3")
        sequential.add(identity)
        identity.set_weights([np.eye(width, dtype=np.float32), np.zeros(width, np.float32)])
    return sequential


def make(finding, implementation):
    import emlearn

    out = os.path.join(HERE, "c", implementation)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    kind = {"loadable": {"return_type": "regressor"}, "inline": {}}[implementation]
    converted = emlearn.convert(network(finding), method=implementation, **kind)
    converted.save(name=NAME, file=os.path.join(out, f"{NAME}.h"), inference=[implementation])
    call = (f"{NAME}_regress(input, IN_SIZE, output, OUT_SIZE)" if implementation == "loadable" else
            f"{NAME}_infer(input, IN_SIZE, {NAME}_activations1, {NAME}_activations2, {NAME}_activations_length); "
            f"for (int i = 0; i < OUT_SIZE; i++) output[i] = {NAME}_activations2[i]")
    return reproducer_common.build(HERE, finding, out, [], f"{NAME}.h", call, include_dirs=[emlearn.includedir])


def predict(finding, inputs):
    return network(finding).predict(inputs, verbose=0)


if __name__ == "__main__":
    sys.exit(reproducer_common.main(HERE, predict, make))
