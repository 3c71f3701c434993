"""Keras (TensorFlow backend, float32, deterministic CPU ops): the training framework's own inference."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.tensors import convert
from harness.models.model import Model
from harness.models.names import identifier
from harness.references import check_inputs, pack, unpack

BATCH = 256


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int):
    from harness.models.tf_runtime import keras

    try:
        return keras().saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001
        from harness.models.user_files import cause

        raise ModelError(f"{path}: cannot load as a Keras model ({cause(error)})") from None


def load(path: Path):
    """The Keras model in ``path``, loaded once per process (reloaded if the file changes)."""
    path = Path(path).resolve()
    return _load(str(path), path.stat().st_mtime_ns)


class KerasReference:
    fmt = "keras"

    def supports(self, model: Model) -> bool:
        return self.fmt in model.files

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        keras_model = load(model.file(self.fmt))
        if model.is_packed:  # several inputs or outputs (Model.inputs): a list in, a list out
            batch = check_inputs(model, inputs)
            chunks = [pack(model, _listed(keras_model(unpack(model, batch[start:start + BATCH]), training=False)),
                           len(batch[start:start + BATCH]), np.float32) for start in range(0, len(batch), BATCH)]
            return np.concatenate(chunks) if chunks else np.zeros((0, model.output_size), np.float32)
        in_layout, out_layout = model.layouts_of(self.fmt)
        batch = convert(check_inputs(model, inputs), model.layout, in_layout)
        chunks = [
            np.asarray(keras_model(batch[start : start + BATCH], training=False).numpy(), dtype=np.float32)
            for start in range(0, len(batch), BATCH)
        ]
        outputs = np.concatenate(chunks) if chunks else np.zeros((0, *_shape(model, out_layout)), np.float32)
        return convert(outputs, out_layout, model.output_layout)

    def layer_outputs(self, model: Model, inputs: np.ndarray, tensors: list[str]) -> list[np.ndarray | None]:
        """The named layers' outputs (``layer_outputs`` below), for ``harness.core.intermediate``."""
        return layer_outputs(model, inputs, tensors)


def _float64_config(config):
    """A Keras config with every float32 dtype (a layer's policy, an operation's, a tensor's) made float64."""
    if isinstance(config, dict):
        if config.get("class_name") == "DTypePolicy" and config.get("config", {}).get("name") == "float32":
            return {**config, "config": {**config["config"], "name": "float64"}}
        return {key: "float64" if key == "dtype" and value == "float32" else _float64_config(value)
                for key, value in config.items()}
    if isinstance(config, list):
        return [_float64_config(value) for value in config]
    return config


@functools.lru_cache(maxsize=8)
def _float64_model(path: str, mtime_ns: int):
    """The Keras model rebuilt from its own config under float64, its float32 weights widened exactly."""
    from harness.models.tf_runtime import keras, tensorflow

    full = _load(path, mtime_ns)
    try:
        clone = full.__class__.from_config(_float64_config(full.get_config()))
        clone.set_weights([np.asarray(w).astype(np.float64) for w in full.get_weights()])
    except Exception as error:  # noqa: BLE001
        from harness.models.user_files import cause

        raise ModelError(f"{path}: Keras cannot rebuild it in float64 ({cause(error)})") from None
    for layer in _nested(clone):  # traced below, every name becomes a TensorFlow scope name: ASCII ones only
        layer.name = identifier(layer.name, "layer")  # the clone's own: the file and its reports keep theirs
    keras()  # the deterministic CPU settings are in place
    return tensorflow().function(lambda sample: clone(sample, training=False))


def _nested(layer) -> list:
    """``layer`` and every layer inside it, nested models' included."""
    return [layer, *(inner for child in getattr(layer, "layers", ()) for inner in _nested(child))]


def float64_outputs(model: Model, inputs: np.ndarray) -> np.ndarray:
    """The Keras model itself evaluated in float64 (every layer and operation node of the file, weights widened
    exactly from float32): the float64 arbiter's figure for a Keras model (``harness.references.float64``).
    Outputs (N, *model.output_shape), float64, canonical layout."""
    path = Path(model.file(KerasReference.fmt)).resolve()
    clone = _float64_model(str(path), path.stat().st_mtime_ns)
    if model.is_packed:  # one sample per call, as below
        parts = unpack(model, check_inputs(model, inputs).astype(np.float64))
        rows = [pack(model, _listed(clone([part[k : k + 1] for part in parts])), 1, np.float64)
                for k in range(len(inputs))]
        return np.concatenate(rows) if rows else np.zeros((0, model.output_size), np.float64)
    in_layout, out_layout = model.layouts_of(KerasReference.fmt)
    batch = convert(check_inputs(model, inputs), model.layout, in_layout).astype(np.float64)
    # one sample per call: a sample's figure must not depend on the samples evaluated beside it (the matrix kernels
    # block their sums by the batch's size), so that a sharded campaign's arbiter equals the unsharded one's to the bit
    rows = [np.asarray(clone(batch[k : k + 1]).numpy(), dtype=np.float64) for k in range(len(batch))]
    outputs = np.concatenate(rows) if rows else np.zeros((0, *_shape(model, out_layout)), np.float64)
    return convert(outputs, out_layout, model.output_layout)


def _listed(outputs) -> list:
    """A Keras model's outputs as a list (one output comes alone, several as a list, tuple or dict in order)."""
    if isinstance(outputs, dict):
        return [value.numpy() for value in outputs.values()]
    return [value.numpy() for value in outputs] if isinstance(outputs, (list, tuple)) else [outputs.numpy()]


def _shape(model: Model, out_layout: str) -> tuple[int, ...]:
    from harness.tensors import shape_in

    return shape_in(model.output_shape, model.output_layout, out_layout)


@functools.lru_cache(maxsize=8)
def _submodel(path: str, mtime_ns: int, tensors: tuple[str, ...]):
    """The model with the outputs of the named tensors (``layer:node``, the generator's names) as its outputs;
    None in place of a tensor the model has no layer for."""
    from harness.models.tf_runtime import keras

    full = _load(path, mtime_ns)
    found, outputs = [], []
    for tensor in tensors:
        name, _, node = tensor.rpartition(":") if ":" in tensor else (tensor, "", "0")
        try:
            layer = full.get_layer(name)
            outputs.append(layer._inbound_nodes[int(node)].output_tensors[0])
            found.append(True)
        except (ValueError, IndexError, AttributeError):
            found.append(False)
    single = full.inputs[0] if len(full.inputs) == 1 else full.inputs  # the structure the model was built with
    model = keras().Model(inputs=single, outputs=outputs) if outputs else None
    return model, tuple(found)


def layer_outputs(model: Model, inputs: np.ndarray, tensors: list[str]) -> list[np.ndarray | None]:
    """The Keras model's intermediate outputs for ``inputs``: for each tensor name (``layer:node``), an (N, size)
    float32 array in Keras' own layout (channels last), or None when the model has no such tensor."""
    path = Path(model.file(KerasReference.fmt)).resolve()
    sub, found = _submodel(str(path), path.stat().st_mtime_ns, tuple(tensors))
    in_layout, _ = model.layouts_of(KerasReference.fmt)
    batch = convert(check_inputs(model, inputs), model.layout, in_layout)
    columns: list[list[np.ndarray]] = [[] for _ in range(sum(found))]
    for start in range(0, len(batch), BATCH):
        chunk = batch[start:start + BATCH]
        values = sub(unpack(model, chunk) if model.is_packed else chunk, training=False)
        values = values if isinstance(values, (list, tuple)) else [values]
        for column, value in zip(columns, values):
            column.append(np.asarray(value.numpy(), dtype=np.float32).reshape(len(value), -1))
    arrays = iter(np.concatenate(column) for column in columns)
    return [next(arrays) if present else None for present in found]
