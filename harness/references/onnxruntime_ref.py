"""ONNX Runtime on CPU, single-threaded, sequential, with graph optimisations off."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.tensors import convert, shape_in
from harness.models.model import Model
from harness.references import (ORT_INTEGER_TYPES, as_graph_input, check_inputs, run_packed_samples,
                                sample_feeds, unpack)
from harness.tensors import abi_dtype

BATCH = 256


def session_options():
    """The settings every ONNX Runtime reference runs with: no graph optimisation, one thread, sequential,
    so that results do not depend on the machine's cores or on fused kernels."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return options


def fixed_batch(first) -> int | None:
    """The fixed batch size of a session's input ``first``, or None when the batch axis is free."""
    return first.shape[0] if first.shape and isinstance(first.shape[0], int) and first.shape[0] > 0 else None


def run_batched(run, batch: np.ndarray, fixed: int | None, step: int) -> list[np.ndarray]:
    """``run`` over ``batch`` in chunks of ``fixed`` (a file's fixed batch size, the last chunk zero-padded) or
    of ``step``."""
    chunks = []
    for start in range(0, len(batch), fixed or step):
        chunk = batch[start : start + (fixed or step)]
        if fixed and len(chunk) < fixed:
            padding = np.zeros((fixed - len(chunk), *chunk.shape[1:]), chunk.dtype)
            chunks.append(run(np.concatenate([chunk, padding]))[: len(chunk)])
        else:
            chunks.append(run(chunk))
    return chunks


# The quantized element types (TensorProto codes) numpy cannot exchange with ONNX Runtime's Python API: float8, int4,
# int2, float4. A graph input or output of one crosses as float32 through a Cast node (``_exchangeable``).
CAST_TYPES = frozenset({17, 18, 19, 20, 21, 22, 23, 25, 26})


@functools.lru_cache(maxsize=8)
def _session(path: str, mtime_ns: int):
    """The session of ``path`` and the numpy type of its first graph input (what ``as_graph_input`` reads for it)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(path, load_external_data=False)
    elem_type = model.graph.input[0].type.tensor_type.elem_type if model.graph.input else 1
    feed = abi_dtype(elem_type) or np.dtype(np.float32)
    try:
        if not any(value.type.tensor_type.elem_type in CAST_TYPES for value in (*model.graph.input,
                                                                                 *model.graph.output)):
            return ort.InferenceSession(path, sess_options=session_options(), providers=["CPUExecutionProvider"]), \
                feed
        return ort.InferenceSession(_exchangeable(onnx.load(path)).SerializeToString(), sess_options=session_options(),
                                    providers=["CPUExecutionProvider"]), feed
    except Exception as error:  # noqa: BLE001
        from harness.models.user_files import cause

        raise ModelError(f"{path}: onnxruntime cannot load it ({cause(error)})") from None


def _exchangeable(model):
    """``model`` with each graph input and output of a type of ``CAST_TYPES`` made float32, a Cast to and from the
    graph's own type beside it: exact, every value of these types being a float32, and the input's values already of
    the type (``as_graph_input`` rounds them as the C does, before the Cast sees them)."""
    import onnx
    from onnx import helper

    graph = model.graph
    casts_in, casts_out = [], []
    for value in graph.input:
        elem_type = value.type.tensor_type.elem_type
        if elem_type in CAST_TYPES:
            casts_in.append(helper.make_node("Cast", [f"{value.name}:abi"], [value.name], to=elem_type))
            value.name = f"{value.name}:abi"
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for value in graph.output:
        if value.type.tensor_type.elem_type in CAST_TYPES:
            casts_out.append(helper.make_node("Cast", [f"{value.name}"], [f"{value.name}:abi"], to=1))
            value.name = f"{value.name}:abi"
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    nodes = casts_in + list(graph.node) + casts_out
    del graph.node[:]
    graph.node.extend(nodes)
    return model


def session(path: Path):
    """The inference session of ``path``, created once per process (again if the file changes)."""
    path = Path(path).resolve()
    return _session(str(path), path.stat().st_mtime_ns)[0]


def feed_type(path: Path) -> np.dtype:
    """The numpy type ``as_graph_input`` reads the first graph input of ``path`` as (float32 for a float input)."""
    path = Path(path).resolve()
    return _session(str(path), path.stat().st_mtime_ns)[1]


def graph_feed(model: Model, inputs: np.ndarray, in_layout: str, session_type: str) -> np.ndarray:
    """The batch fed to ONNX Runtime: the ABI's values read as the graph input's type (``as_graph_input``), as float32
    when the session takes that input as float32 (a Cast of ``_exchangeable`` converts it)."""
    batch = as_graph_input(convert(check_inputs(model, inputs), model.layout, in_layout),
                           feed_type(model.file(OnnxRuntimeReference.fmt)))
    return batch.astype(np.float32) if session_type == "tensor(float)" else batch


class OnnxRuntimeReference:
    fmt = "onnx"
    # its integer kernels' requantization rule (MLAS's float32 one): ``harness.references.integer.ONNXRUNTIME``,
    # written out because ``integer`` imports this module (through ``float64``)
    integer_rule = "onnxruntime"

    def supports(self, model: Model) -> bool:
        return self.fmt in model.files

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        sess = session(model.file(self.fmt))
        if model.is_packed:  # several inputs or outputs, fed by position (the graph's order)
            return run_packed_samples(model, check_inputs(model, inputs), [len(i.shape) for i in sess.get_inputs()],
                                      lambda feeds: sess.run(None, dict(zip(_names(sess), feeds))), np.float32)
        in_layout, out_layout = model.layouts_of(self.fmt)
        first = sess.get_inputs()[0]
        batch = graph_feed(model, inputs, in_layout, first.type)
        if len(first.shape) == batch.ndim - 1:  # no batch axis (docs/zoo.md): one input per run
            chunks = [sess.run(None, {first.name: sample})[0][None] for sample in batch]
        else:
            chunks = self._batched(sess, first, batch)
        if not chunks:
            return np.zeros((0, *model.output_shape), np.float32)
        outputs = np.concatenate(chunks).astype(np.float32, copy=False)
        expected = shape_in(model.output_shape, model.output_layout, out_layout)
        outputs = outputs.reshape(len(batch), *expected)
        return convert(outputs, out_layout, model.output_layout)

    def layer_outputs(self, model: Model, inputs: np.ndarray, tensors: list[str]) -> list[np.ndarray | None]:
        """The named intermediate tensors (``layer_outputs`` below), for ``harness.core.intermediate``."""
        return layer_outputs(model, inputs, tensors)

    @staticmethod
    def _batched(sess, first, batch: np.ndarray) -> list[np.ndarray]:
        """Runs in batches of BATCH, or of the file's fixed batch size (the last one padded)."""
        return run_batched(lambda chunk: sess.run(None, {first.name: chunk})[0], batch, fixed_batch(first), BATCH)


def _names(sess) -> list[str]:
    return [value.name for value in sess.get_inputs()]


@functools.lru_cache(maxsize=8)
def _exposed(path: str, mtime_ns: int, tensors: tuple[str, ...]):
    """A session of the graph with the named intermediate tensors added to its outputs, and which names exist."""
    import onnx
    import onnxruntime as ort

    graph_model = onnx.load(path)
    known = {v for node in graph_model.graph.node for v in node.output} | {i.name for i in graph_model.graph.input}
    present = tuple(name in known for name in tensors)
    outputs = {o.name for o in graph_model.graph.output}
    for name, here in zip(tensors, present):
        if here and name not in outputs:
            graph_model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
            outputs.add(name)
    sess = ort.InferenceSession(graph_model.SerializeToString(), sess_options=session_options(),
                                providers=["CPUExecutionProvider"])
    return sess, present


def layer_outputs(model: Model, inputs: np.ndarray, tensors: list[str]) -> list[np.ndarray | None]:
    """ONNX Runtime's values of the named intermediate tensors for ``inputs`` (same session settings as the
    reference): for each name, an (N, size) float32 array in the graph's own layout, or None when the graph has
    no such tensor."""
    path = Path(model.file(OnnxRuntimeReference.fmt)).resolve()
    sess, present = _exposed(str(path), path.stat().st_mtime_ns, tuple(tensors))
    wanted = [name for name, here in zip(tensors, present) if here]
    if not wanted:
        return [None] * len(tensors)
    in_layout, _ = model.layouts_of(OnnxRuntimeReference.fmt)
    first = sess.get_inputs()[0]
    batch = as_graph_input(convert(check_inputs(model, inputs), model.layout, in_layout),
                           ORT_INTEGER_TYPES.get(first.type, np.float32))
    sizes: list[int] = []

    def run(chunk: np.ndarray | list[np.ndarray], rows: int) -> np.ndarray:
        feeds = dict(zip(_names(sess), chunk if isinstance(chunk, list) else [chunk]))
        values = [np.asarray(v, np.float32).reshape(rows, -1) for v in sess.run(wanted, feeds)]
        sizes[:] = [v.shape[1] for v in values]
        return np.concatenate(values, axis=1)

    if model.is_packed:  # several inputs: one sample per run, each input shaped as the graph declares it
        parts, ranks = unpack(model, batch), [len(value.shape) for value in sess.get_inputs()]
        chunks = [run(sample_feeds(parts, ranks, k), 1) for k in range(len(batch))]
    elif len(first.shape) == batch.ndim - 1:  # no batch axis (docs/zoo.md): one input per run
        chunks = [run(sample, 1) for sample in batch]
    else:
        chunks = run_batched(lambda chunk: run(chunk, len(chunk)), batch, fixed_batch(first), BATCH)
    columns = iter(np.split(np.concatenate(chunks), np.cumsum(sizes)[:-1], axis=1))
    return [next(columns) if here else None for here in present]
