"""The float64 arbiter on models whose names are no identifier (issue 44).

TensorFlow refuses a scope name outside ASCII when it traces a function, and
the float64 arbiter traces the Keras model's float64 clone: a ``.nnet`` file
named ``réseau ñ 2.nnet`` (its Keras model named after the file) and a Keras
file whose model and layers have non-ASCII names both used to lose their
arbiter figure. The name the user gave stays the model's and the file's.
"""

from __future__ import annotations

import numpy as np

from harness import references
from harness.models import nnet, zoo
from harness.models.tf_runtime import keras, save_keras


def test_the_keras_model_of_a_nnet_file_is_named_in_ascii():
    net = nnet.NNet([np.ones((3, 2)), np.ones((1, 3))], [np.zeros(3), np.zeros(1)], np.full(2, -1.0),
                    np.full(2, 1.0), np.zeros(3), np.ones(3))
    assert nnet.to_keras(net, "réseau ñ 2").name == "reseau_n_2"


def test_a_keras_file_of_non_ascii_model_and_layer_names_has_its_arbiter_figure(tmp_path):
    k = keras()
    inputs = k.Input((4,), name="entrée")
    inner = k.Sequential([k.layers.Dense(3, activation="relu", name="été")], name="intérieur")
    net = k.Model(inputs, k.layers.Dense(2, name="couché")(inner(inputs)), name="réseau")
    path = tmp_path / "réseau ñ 2.keras"
    save_keras(net, path)
    before = path.read_bytes()
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    inputs = np.random.default_rng(0).uniform(-1, 1, (8, 4)).astype(np.float32)
    exact = references.get("float64").run(model, inputs)
    assert np.max(np.abs(exact - references.get("keras").run(model, inputs))) < 1e-6
    assert model.name == "réseau ñ 2" and path.read_bytes() == before  # only the arbiter's clone is renamed
