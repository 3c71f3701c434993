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
    # one thread from TensorFlow's first start, whoever imports it first: its kernels split sums by thread, so
    # a float64 figure computed in a process where TensorFlow started with its own defaults differs in the last bits
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
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
    """``keras_model.save(path)``, then made byte-for-byte reproducible (``make_reproducible``).

    Also silences Keras 3's NumPy 2 ``__array__(copy=...)`` deprecation noise.
    """
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"__array__ implementation doesn't accept a copy keyword",
                                category=DeprecationWarning)
        keras_model.save(path)
    if str(path).endswith(".keras"):  # legacy .h5 files are left as Keras writes them
        make_reproducible(path)


# What a reproducible .keras archive stores instead of the time it was saved.
FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold
FIXED_DATE_SAVED = "1980-01-01@00:00:00"


def make_reproducible(path) -> None:
    """Rewrite the ``.keras`` zip at ``path`` so the same model always gives the same bytes.

    Keras stores the save time twice: as the zip entries' modification times and
    as ``date_saved`` in ``metadata.json``. Both are replaced by fixed values, the
    entries are written in sorted name order with fixed permissions and
    compression, and the archive replaces the original atomically. The weights
    (``model.weights.h5``) are already reproducible. Keras also writes the
    ``id()`` of objects shared by several layers (``shared_object_id``, e.g. the
    float32 dtype policy), which differs from one process to the next: those
    are renumbered in order of appearance.
    """
    import json
    import os
    import zipfile
    from pathlib import Path

    path = Path(path)
    with zipfile.ZipFile(path) as archive:
        members = {info.filename: (info, archive.read(info)) for info in archive.infolist()}
    if "config.json" in members:
        info, data = members["config.json"]
        members["config.json"] = (info, json.dumps(_renumber_shared_objects(json.loads(data))).encode())
    if "metadata.json" in members:
        info, data = members["metadata.json"]
        metadata = json.loads(data)
        if "date_saved" in metadata:
            metadata["date_saved"] = FIXED_DATE_SAVED
        members["metadata.json"] = (info, json.dumps(metadata).encode())
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with zipfile.ZipFile(temporary, "w") as archive:
        for name in sorted(members):
            info, data = members[name]
            entry = zipfile.ZipInfo(name, date_time=FIXED_ZIP_TIME)
            entry.compress_type = info.compress_type
            entry.external_attr = 0o644 << 16
            entry.create_system = 3  # Unix, whatever the host
            archive.writestr(entry, data)
    os.replace(temporary, path)


def _renumber_shared_objects(config):
    """``config`` with every ``shared_object_id`` replaced by its rank of first appearance (same sharing)."""
    ranks: dict = {}

    def walk(node):
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        return {key: (ranks.setdefault(value, len(ranks) + 1) if key == "shared_object_id" else walk(value))
                for key, value in node.items()}

    return walk(config)
