"""User model files: ``.keras``/``.h5`` (Keras), ``.onnx``, ``.nnet`` (ACAS-Xu text format), ``.json`` (ACETONE),
and NNEF folders (``graph.nnef`` and its ``.dat`` files); ``.tflite`` is ``harness.models.tflite``'s, through the
same loader.

Each becomes a ``Model``. A Keras file keeps its own path and gains an ONNX
export (the second reference), or, where the exporter refuses, runs alone with
the exporter's refusal in ``Model.refusals``; an ``.nnet`` or ACETONE ``.json`` file is
converted to both formats; an NNEF folder is copied into the cache and
converted to ONNX (``harness.models.nnef``), the generator reading the NNEF.
Conversions go to ``<cache_dir>/user/<stem>-<sha256[:12]>/`` and are reused
while the source file is unchanged. The canonical layout is channels-last when
a Keras file exists, otherwise the ONNX file's own (``CHW`` for NCHW inputs).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import stat
from pathlib import Path

import numpy as np

from harness import registry, tensors
from harness.errors import ModelError
from harness.models import cache, nnef, sidecar
from harness.models.model import FLOAT_COUNTERPART, Model, Tensor, file_sha256, packed_model
from harness.tensors import abi_dtype, value_range

CONVERTER_VERSION = 2  # 2: a Keras model made from a file's name is named by names.identifier (ASCII)
_MAX_CAUSE = 400
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # Keras colours the messages of its errors for a terminal
_FRAME = re.compile(r'^\s*File ".*", line \d+')  # a frame of TensorFlow's "in user code:" traceback


def load(path: Path, cache_dir: Path) -> Model:
    """The ``Model`` of a user file, with its sidecar settings (``harness.models.sidecar``) applied.

    Anything wrong is a ``ModelError`` of one line naming ``path`` (as the user
    gave it) and the cause; nothing in the cache is ever named.
    """
    path = Path(path)
    folder = nnef.is_folder(path)  # an NNEF model is a folder (graph.nnef and its .dat tensors)
    if not folder:
        _check_readable(path)
    suffix = ".nnef" if folder else path.suffix.lower()
    if suffix not in suffixes():
        raise ModelError(f"{path}: unsupported file type '{suffix or path.name}' (expected {', '.join(suffixes())})")
    settings = sidecar.read(path)
    resolved = path.resolve()
    loader = registry.load("model_formats", suffix)
    try:
        if not getattr(loader, "converts", True):  # read where it is: nothing to convert or cache
            model = sidecar.apply(settings, loader(resolved, None))
        else:
            model = _load_converted(resolved, Path(cache_dir), suffix, settings)
        model = _with_float_counterpart(settings, model)
    except ModelError as error:
        raise ModelError(_about_user_file(str(error), path, resolved, Path(cache_dir))) from None
    _check_not_empty(path, model)
    return model


def _with_float_counterpart(settings: sidecar.Sidecar | None, model: Model) -> Model:
    """``model`` with the sidecar's ``float_model`` as its ``FLOAT_COUNTERPART`` file: an ONNX file checked as any
    user ONNX file is, of one input and one output of the quantized model's shapes (the same ABI), or one line
    naming the settings file, the key and the cause."""
    if settings is None or settings.float_model is None:
        return model
    where = f"{settings.path}: key 'float_model'"
    if "onnx" not in model.files or model.is_packed:
        raise ModelError(f"{where}: only an ONNX model of one input and one output has a float counterpart")
    try:
        _check_readable(settings.float_model)
        counterpart = _load_onnx(settings.float_model.resolve())
    except ModelError as error:
        raise ModelError(f"{where}: {error}") from None
    shapes = (counterpart.input_shape, counterpart.output_shape, counterpart.is_packed)
    if shapes != (model.input_shape, model.output_shape, False):
        raise ModelError(f"{where}: {settings.float_model.name} has input {list(counterpart.input_shape)} and "
                         f"output {list(counterpart.output_shape)}, the model {list(model.input_shape)} and "
                         f"{list(model.output_shape)}: not the same network")
    return dataclasses.replace(model, files={**model.files, FLOAT_COUNTERPART: settings.float_model.resolve()},
                               file_layouts={**model.file_layouts, FLOAT_COUNTERPART: model.layouts_of("onnx")})


def _check_not_empty(path: Path, model: Model) -> None:
    """One rule for every format, the converted ones' cached models included: an input or output with a dimension
    of size 0 holds no value, so there is nothing to compute or compare; the file is bad input, refused here
    rather than by each generator in words of its own about the cache's converted file."""
    for kind, named, shape in (("input", model.inputs, model.input_shape),
                               ("output", model.outputs, model.output_shape)):
        for tensor in named or (Tensor("", shape),):
            if 0 in tensor.shape:
                which = f"{kind} '{tensor.name}'" if tensor.name else f"the {kind}"
                raise ModelError(f"{path}: {which} has shape {list(tensor.shape)}, a dimension of size 0: it holds "
                                 "no value to compute or compare")


def source_sha256(path: Path) -> str | None:
    """The SHA-256 of what ``path`` holds now when it is a regular file or an NNEF folder (a FIFO or a device is
    never opened: it could block), whether the model loads or not: what a record about it judged
    (``harness.core.results``). None when it holds neither or cannot be read."""
    path = Path(path)
    try:
        if nnef.is_folder(path) or stat.S_ISREG(os.stat(path).st_mode):
            return file_sha256(path)
    except OSError:
        pass
    return None


def suffixes() -> list[str]:
    """The model file suffixes Assay reads: the names of the entry-point group ``assay.model_formats``
    (``harness.registry``), each naming ``convert(path, cache_folder) -> Model`` (this module's converters for
    Assay's own formats, ``pyproject.toml``). A converter writes what it converts into ``cache_folder``; the
    ``Model`` it returns is cached there, keyed by the file's and its sidecar's content. One that reads the
    file where it is (ONNX) has ``converts = False``: it gets no folder, and nothing is cached."""
    return registry.names("model_formats")


def _about_user_file(message: str, path: Path, resolved: Path, cache_dir: Path) -> str:
    """``message`` as one line about ``path`` as the user named it: never a cache file, always the file first."""
    text = " ".join(message.split())
    for folder in sorted({str(cache_dir.resolve()), str(cache_dir)}, key=len, reverse=True):
        # a cache file's path (<cache>/user/<stem>-<hash>/model.onnx) stands for the user's file
        text = re.sub(re.escape(folder + os.sep) + r"[^\s:,;)'\"]*", lambda _: str(path), text)
    text = text.replace(str(resolved), str(path))
    while text.startswith(f"{path}: {path}: "):
        text = text[len(str(path)) + 2:]
    return text if text.startswith(str(path)) else f"{path}: {text}"


def _check_readable(path: Path) -> None:
    """A regular, non-empty file this process can open; otherwise a ModelError saying why.

    ``os.access`` answers yes to root for any file, so the file is actually
    opened (and one byte read). Only regular files are opened: opening a FIFO
    would block.
    """
    try:
        info = os.stat(path)
    except OSError as error:
        raise ModelError(f"{path}: {_stat_cause(path, error)}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ModelError(f"{path}: is a directory, not a model file")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else "a special file")
        raise ModelError(f"{path}: not a regular file ({kind})")
    try:
        with open(path, "rb") as stream:
            stream.read(1)
    except OSError as error:
        raise ModelError(f"{path}: cannot read the file ({_os_cause(error)})") from None
    if info.st_size == 0:
        raise ModelError(f"{path}: empty file")


def _stat_cause(path: Path, error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return "symlink loop (too many levels of symbolic links)"
    if error.errno == errno.ENOENT:
        if path.is_symlink():
            return f"dangling symlink (points to {os.readlink(path)}, which does not exist)"
        return "no such file"
    if error.errno == errno.ENOTDIR:
        return "no such file (a parent in the path is not a directory)"
    return f"cannot access the file ({_os_cause(error)})"


def _os_cause(error: OSError) -> str:
    return error.strerror.lower() if error.strerror else cause(error)


def cause(error: BaseException) -> str:
    """One line describing an exception from a library, for stderr and a record's cause (``detail`` keeps it all).

    All its lines are joined: ONNX checker messages continue after a line
    break ("input 'x' of node:" / "name: ... OpType: ..."), and their
    ``==> Context:`` part (which node) goes in parentheses. An error raised in
    a function TensorFlow traced starts with the frames of that code ("in user
    code:", file paths and lines): the error after them is kept, without the
    "Arguments received by" list Keras adds for a layer's call.
    """
    text = _ANSI.sub("", str(error))
    if text.lstrip().startswith("in user code:"):
        lines = text.splitlines()
        frames = [k for k, line in enumerate(lines) if _FRAME.match(line)]
        after = lines[frames[-1] + 1:] if frames else lines[1:]
        blank = next((k for k, line in enumerate(after) if not line.strip()), -1)  # after the frame's code line
        text = "\n".join(after[blank + 1:]).partition("Arguments received by")[0]
    main, _, context = text.partition("==> Context:")
    text = " ".join(main.split()).removeprefix(f"{type(error).__name__}: ")  # TensorFlow repeats the type
    text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    if context.strip():
        text += f" ({' '.join(context.split())})"
    return text if len(text) <= _MAX_CAUSE else text[: _MAX_CAUSE - 3] + "..."


def detail(error: BaseException) -> str | None:
    """The library's whole message when ``cause`` had to shorten it (several lines, frames): for a record, where
    it may be read in full, never for stderr; None when ``cause`` says it all."""
    text = _ANSI.sub("", str(error)).strip()
    return text if "\n" in text or len(text) > _MAX_CAUSE else None


# --- Keras, NNet, ACETONE JSON and NNEF: converted into the cache ------------


def _load_converted(path: Path, cache_dir: Path, suffix: str, settings: sidecar.Sidecar | None = None) -> Model:
    digest = file_sha256(path)
    directory = cache_dir / "user" / f"{path.stem}-{digest[:12]}"
    # The sidecar's content is part of the fingerprint: an edited sidecar rebuilds the record, never stale.
    fingerprint = f"{CONVERTER_VERSION}:{suffix}:{path}:{digest}:{settings.digest if settings else '-'}"
    model = cache.read_cached(directory, fingerprint)
    if model is not None:
        return model
    with cache.locked(directory.parent, directory.name):
        model = cache.read_cached(directory, fingerprint)
        if model is not None:
            return model
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "model.json").unlink(missing_ok=True)
        converter = registry.load("model_formats", suffix)
        try:
            model = sidecar.apply(settings, converter(path, directory))
        except ModelError:
            raise
        except Exception as error:  # noqa: BLE001 - a hostile file may make TensorFlow/Keras raise anything
            raise ModelError(f"{path}: cannot convert the model ({cause(error)})") from None
        if not model.refusals:  # a refusal is not cached: a later converter may make the file
            cache.write_cached(directory, model, fingerprint, {"source": str(path), "sha256": digest,
                                                               "settings": settings.digest if settings else None})
        return model


def _check_container(path: Path) -> None:
    """Name the common ways a Keras file is broken before Keras gives a vaguer message."""
    import zipfile

    import h5py

    if path.suffix.lower() == ".keras":
        if not zipfile.is_zipfile(path):
            raise ModelError(f"{path}: truncated or corrupt .keras file (not a zip archive)")
        try:
            with zipfile.ZipFile(path) as archive:
                if "config.json" not in archive.namelist():
                    raise ModelError(f"{path}: not a Keras model archive (no config.json)")
                bad = archive.testzip()
                config = archive.read("config.json") if bad is None else b""
        except (zipfile.BadZipFile, OSError, EOFError) as error:
            raise ModelError(f"{path}: truncated or corrupt .keras file ({cause(error)})") from None
        if bad is not None:
            raise ModelError(f"{path}: corrupt .keras file (bad CRC in {bad})")
    elif not h5py.is_hdf5(path):
        raise ModelError(f"{path}: truncated or corrupt HDF5 file (no HDF5 signature)")
    else:
        try:
            with h5py.File(path, "r") as handle:
                config = handle.attrs.get("model_config", b"")
        except Exception as error:  # noqa: BLE001 - h5py raises OSError, KeyError, ... for damaged files
            raise ModelError(f"{path}: truncated or corrupt HDF5 file ({cause(error)})") from None
    _check_keras_config(path, config)


# Keras classes that run arbitrary Python code when loaded or called.
UNSAFE_KERAS_CLASSES = frozenset({"Lambda", "TFOpLambda"})


def _check_keras_config(path: Path, config) -> None:
    """Refuse, before Keras reads it, a config naming a class outside Keras or one that runs Python code.

    Keras's ``safe_mode`` covers Lambda layers in ``.keras`` files only; legacy
    ``.h5`` files and classes from arbitrary modules (``{"module": "os", ...}``)
    would be imported or run. Only ``keras.*`` modules are accepted.
    """
    import json

    if isinstance(config, bytes):
        config = config.decode("utf-8", "replace")
    if not config:
        return
    try:
        tree = json.loads(config)
    except ValueError as error:
        raise ModelError(f"{path}: corrupt Keras model configuration ({cause(error)})") from None
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            name, module = node.get("class_name"), node.get("module")
            if isinstance(name, str) and name in UNSAFE_KERAS_CLASSES:
                raise ModelError(f"{path}: unsafe Keras layer {name} (it runs arbitrary Python code); "
                                 "rebuild the model without it")
            if isinstance(name, str) and isinstance(module, str) and not (module == "keras"
                                                                         or module.startswith("keras.")):
                raise ModelError(f"{path}: unsafe Keras class {module}.{name} (only keras classes are loaded)")
            stack.extend(node.values())


def _load_keras_file(path: Path):
    from harness.models.tf_runtime import keras

    _check_container(path)
    try:
        return keras().saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001 - Keras raises many types for bad files
        raise ModelError(f"{path}: cannot load as a Keras model ({cause(error)})") from None


def _convert_keras(path: Path, directory: Path) -> Model:
    from harness.models import onnx_export

    keras_model = _load_keras_file(path)
    if not hasattr(keras_model, "inputs") or not getattr(keras_model, "inputs", None):
        raise ModelError(f"{path}: the Keras model has no defined input (build it with keras.Input)")
    _check_finite(path, ((w.path, w.numpy()) for w in keras_model.weights))
    model = _keras_model_record(path.stem, path, directory / "model.onnx", keras_model, (-1.0, 1.0))
    try:
        onnx_export.export(keras_model, directory / "model.onnx")
    except ModelError as error:
        # The exporter's refusal costs the ONNX variant and ONNX Runtime, not the model: the Keras file still
        # runs (``--references keras``), and whatever needs the ONNX file says this cause (``Model.refusals``).
        return dataclasses.replace(model, files={"keras": path}, file_layouts={"keras": model.file_layouts["keras"]},
                                   refusals={"onnx": f"the Keras->ONNX exporter ({onnx_export.__name__}) refuses "
                                                     f"it: {error}"})
    return model


def _keras_model_record(name: str, keras_path: Path, onnx_path: Path, keras_model, domain) -> Model:
    if len(keras_model.inputs) > 1 or len(keras_model.outputs) > 1:
        return _packed_keras_record(name, keras_path, onnx_path, keras_model, domain)
    in_shape = tuple(int(d) for d in keras_model.inputs[0].shape[1:])
    out_shape = tuple(int(d) for d in keras_model.outputs[0].shape[1:])
    layout, output_layout = _channels_last(len(in_shape)), _channels_last(len(out_shape))
    return Model(
        name=name,
        files={"keras": keras_path, "onnx": onnx_path},
        input_shape=in_shape,
        output_shape=out_shape,
        layout=layout,
        output_layout=output_layout,
        file_layouts={"keras": (layout, output_layout),
                      "onnx": (_channels_first(len(in_shape)), _channels_first(len(out_shape)))},
        input_domain=domain,
        tier="user",
        description=f"user file {keras_path.name}",
    )


def _packed_keras_record(name: str, keras_path: Path, onnx_path: Path, keras_model, domain) -> Model:
    """A Keras model of several inputs or outputs: packed vectors (``model.Tensor``), which needs every tensor to
    be a vector, the one shape the Keras file and its channels-first ONNX export store alike."""
    tensors = []
    for kind, values in (("input", keras_model.inputs), ("output", keras_model.outputs)):
        for value in values:
            shape, layer = tuple(int(d) for d in value.shape[1:]), value._keras_history[0].name  # its layer's name
            if len(shape) != 1:
                raise ModelError(f"{keras_path}: {kind} '{layer}' has shape {shape}; a Keras model with several "
                                 "inputs or outputs is supported when each is a vector (its ONNX export would store "
                                 "an image channels-first)")
            tensors.append(Tensor(layer, shape))
    count = len(keras_model.inputs)
    return packed_model(name, {"keras": keras_path, "onnx": onnx_path}, tensors[:count], tensors[count:],
                        input_domain=domain, tier="user", description=f"user file {keras_path.name}")


def _channels_last(rank: int) -> str:
    return tensors.default_layout(rank, channels_last=True)


def _channels_first(rank: int) -> str:
    return tensors.default_layout(rank, channels_last=False)


def _convert_nnet(path: Path, directory: Path) -> Model:
    from harness.models import nnet, onnx_export
    from harness.models.tf_runtime import save_keras

    net = nnet.read(path)
    keras_model = nnet.to_keras(net, path.stem)
    keras_path = directory / "model.keras"
    save_keras(keras_model, keras_path)
    onnx_export.export(keras_model, directory / "model.onnx")
    model = _keras_model_record(path.stem, keras_path, directory / "model.onnx", keras_model,
                                net.normalized_domain())
    return dataclasses.replace(model, description=f"NNet file {path.name}, run on normalised inputs "
                                                  "(the file's input normalisation is not applied)")


def _convert_acetone_json(path: Path, directory: Path) -> Model:
    from harness.models import acetone_json, onnx_export
    from harness.models.tf_runtime import save_keras

    keras_model = acetone_json.to_keras(acetone_json.read(path), path.stem)
    _check_finite(path, ((w.path, w.numpy()) for w in keras_model.weights))
    save_keras(keras_model, directory / "model.keras")
    onnx_export.export(keras_model, directory / "model.onnx")
    model = _keras_model_record(path.stem, directory / "model.keras", directory / "model.onnx", keras_model,
                                (-1.0, 1.0))
    return dataclasses.replace(model, description=f"ACETONE JSON file {path.name}")


def _convert_nnef(path: Path, directory: Path) -> Model:
    """An NNEF folder: copied into the cache (``model.nnef``) beside its ONNX conversion (``model.onnx``)."""
    import shutil


    graph = nnef.read(path)
    if len(graph.inputs) != 1 or len(graph.outputs) != 1:
        raise ModelError(f"{path}: expected one input and one output, found {len(graph.inputs)} and "
                         f"{len(graph.outputs)}")
    shapes = [tuple(int(d) for d in graph.tensors[name].shape) for name in (graph.inputs[0], graph.outputs[0])]
    for name, shape in zip((graph.inputs[0], graph.outputs[0]), shapes):
        if len(shape) not in (2, 4) or shape[0] != 1:
            raise ModelError(f"{path}: {name} has shape {list(shape)}; [1, F] or [1, C, H, W] is supported")
    shutil.rmtree(directory / "model.nnef", ignore_errors=True)
    shutil.copytree(path, directory / "model.nnef")
    nnef.convert_to_onnx(directory / "model.nnef", directory / "model.onnx")
    in_shape, out_shape = (shape[1:] for shape in shapes)
    layouts = (_channels_first(len(in_shape)), _channels_first(len(out_shape)))
    return Model(name=path.stem, files={"nnef": directory / "model.nnef", "onnx": directory / "model.onnx"},
                 input_shape=in_shape, output_shape=out_shape, layout=layouts[0], output_layout=layouts[1],
                 file_layouts={"nnef": layouts, "onnx": layouts}, tier="user", description=f"NNEF folder {path.name}")


# --- ONNX: used as it is ------------------------------------------------------


def _load_onnx(path: Path, _folder: Path | None = None) -> Model:
    """An ONNX file as it is: nothing to convert (``converts`` below), so no cache folder is needed."""
    import onnx

    try:
        proto = onnx.load(str(path))
    except Exception as error:  # noqa: BLE001 - protobuf DecodeError and friends
        raise ModelError(f"{path}: not a valid ONNX file ({cause(error)})") from None
    if not proto.HasField("graph") or not proto.graph.node:
        raise ModelError(f"{path}: not an ONNX model (no graph)")
    try:
        onnx.checker.check_model(proto)
    except Exception as error:  # noqa: BLE001
        raise ModelError(f"{path}: invalid ONNX model ({cause(error)})") from None
    _check_finite(path, _onnx_constants(path, proto))
    initializers = {init.name for init in proto.graph.initializer}
    inputs = [value for value in proto.graph.input if value.name not in initializers]
    outputs = list(proto.graph.output)
    if not inputs or not outputs:
        raise ModelError(f"{path}: expected at least one input and one output, found {len(inputs)} and "
                         f"{len(outputs)}")
    if len(inputs) > 1 or len(outputs) > 1:  # packed into one vector each, in the graph's order (model.Tensor)
        return packed_model(path.stem, {"onnx": path}, [Tensor(v.name, _onnx_shape(path, v)) for v in inputs],
                            [Tensor(v.name, _onnx_shape(path, v)) for v in outputs], tier="user",
                            description=f"user file {path.name}")
    in_shape = _onnx_shape(path, inputs[0], single=True)
    out_shape = _onnx_shape(path, outputs[0], single=True, output=True)
    layout, output_layout = _channels_first(len(in_shape)), _channels_first(len(out_shape))
    quantized = abi_dtype(inputs[0].type.tensor_type.elem_type)
    return Model(
        input_domain=value_range(quantized) if quantized not in (None, np.float32) else Model.input_domain,
        name=path.stem,
        files={"onnx": path},
        input_shape=in_shape,
        output_shape=out_shape,
        layout=layout,
        output_layout=output_layout,
        file_layouts={"onnx": (layout, output_layout)},
        tier="user",
        description=f"user file {path.name}",
    )


_load_onnx.converts = False


def _onnx_constants(path: Path, proto):
    """(name, array) of every float initializer and Constant node's value of the ONNX graph read from ``path``."""
    from onnx import TensorProto, numpy_helper

    floats = (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16)
    tensors = [init for init in proto.graph.initializer]
    tensors += [attr.t for node in proto.graph.node if node.op_type == "Constant"
                for attr in node.attribute if attr.name == "value"]
    for tensor in tensors:
        if tensor.data_type in floats and not tensor.data_location:
            try:
                yield tensor.name or "a Constant", numpy_helper.to_array(tensor)
            except Exception as error:  # noqa: BLE001 - a tensor whose data does not match its shape
                raise ModelError(f"{path}: tensor '{tensor.name}' cannot be read ({cause(error)})") from None


def _check_finite(path: Path, named_arrays) -> None:
    """A ModelError naming the first weight tensor holding NaN or infinity."""
    for name, array in named_arrays:
        array = np.asarray(array)
        if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
            kind = "NaN" if np.any(np.isnan(array)) else "infinity"
            raise ModelError(f"{path}: weights '{name}' contain {kind}; the model's outputs would not be finite")


# An int32 output (ConvInteger's, MatMulInteger's) crosses the float32 ABI as its values too, exact up to |y| = 2^24;
# Assay's generator proves that bound from the static ranges or refuses the model (docs/quantized.md, "int32 outputs").
INT32_OUTPUT = 6  # TensorProto.INT32


def _onnx_shape(path: Path, value, single: bool = False, output: bool = False) -> tuple[int, ...]:
    """The shape of one sample: the declared shape without its batch axis, if it has one. float32, or a quantized
    type for the ``single`` input or output of a model of one each (``harness.tensors.ABI_ELEMENT_TYPES``: the ABI
    carries its values, docs/quantized.md "Integer graph inputs and outputs"; its range is an input's domain), or
    int32 for that ``output``. A rank-0 ``output`` is a sample of one value, shape ``(1,)`` (the generator writes it
    so).

    The first axis is a batch axis when it is symbolic, or when it is 1 and
    the rank is 2 or 4 (``[1, F]``, ``[1, C, H, W]``); otherwise every axis is
    data (``[5]``, ``[1, 28, 28]``). The code generator's ONNX front end
    applies the same rule (docs/zoo.md).
    """
    from onnx import TensorProto

    tensor_type = value.type.tensor_type
    carried = abi_dtype(tensor_type.elem_type) is not None or (output and tensor_type.elem_type == INT32_OUTPUT)
    if tensor_type.elem_type != TensorProto.FLOAT and not (single and carried):
        kinds = "float32 or quantized (int8 ... float4e2m1)" if single else \
            "float32 (quantized ones in a model of one input and one output)"
        raise ModelError(f"{path}: {value.name} is {TensorProto.DataType.Name(tensor_type.elem_type)}; {kinds} inputs "
                         "and outputs are supported")
    if not tensor_type.HasField("shape"):
        raise ModelError(f"{path}: {value.name} has no declared shape")
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tensor_type.shape.dim]
    text = "[" + ", ".join(str(d) for d in dims) + "]"
    batch = bool(dims) and (not isinstance(dims[0], int) or (dims[0] == 1 and len(dims) in (2, 4, 5)))
    for k, dim in enumerate(dims[batch:], start=batch):
        if not isinstance(dim, int):
            raise ModelError(f"{path}: dimension {k} of {value.name} is undefined ({dim}) (declared shape {text}); "
                             "only the first axis, the batch axis, may be symbolic")
    shape = tuple(int(d) for d in dims[batch:])
    if output and not dims:  # a rank-0 output (DynamicQuantizeLinear's scale): one value in the output vector
        return (1,)
    if not 1 <= len(shape) <= 4:
        raise ModelError(f"{path}: {value.name} has declared shape {text}, read {'with' if batch else 'without'} "
                         f"a batch axis (docs/zoo.md), a sample of rank {len(shape)}; ranks 1 to 4 are supported")
    return shape
