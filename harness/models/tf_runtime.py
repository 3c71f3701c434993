"""The one place TensorFlow and Keras are imported, quiet and deterministic.

Importing this module sets environment defaults that must be in place before
TensorFlow loads (no log spam, no oneDNN reordering of float sums, no GPU);
``tensorflow()`` and ``keras()`` then import the libraries once and make every
op deterministic and single-threaded, so two runs give bit-identical outputs.
"""

from __future__ import annotations

import functools
import os

ENVIRONMENT = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "CUDA_VISIBLE_DEVICES": "",
}


def set_environment() -> None:
    """Set TensorFlow's environment defaults (a user's own values win)."""
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)


set_environment()


@functools.cache
def tensorflow():
    """The ``tensorflow`` module, configured for deterministic CPU inference."""
    set_environment()
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    tf.config.experimental.enable_op_determinism()
    for setter in (
        tf.config.threading.set_intra_op_parallelism_threads,
        tf.config.threading.set_inter_op_parallelism_threads,
    ):
        try:
            setter(1)
        except RuntimeError:  # "cannot be modified after initialization": already running
            pass
    return tf


@functools.cache
def keras():
    """The ``keras`` module (Keras 3 on the TensorFlow backend)."""
    set_environment()
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    tensorflow()
    import keras as keras_module

    return keras_module


def save_keras(keras_model, path) -> None:
    """``keras_model.save(path)`` without Keras 3's NumPy 2 ``__array__(copy=...)`` deprecation noise."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"__array__ implementation doesn't accept a copy keyword",
                                category=DeprecationWarning)
        keras_model.save(path)
