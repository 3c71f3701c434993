"""The model evaluated in float64: the yardstick the arbiter measures C and float32 references against.

The arbiter must be independent of what it judges. A model that has a Keras
file is evaluated by Keras itself, cloned under a float64 dtype policy with
its float32 weights widened exactly (``keras_ref.float64_outputs``): the same
layers and operation nodes the Keras reference runs, never Assay's own
Keras->ONNX export, whose faults it must be able to show. A model given as
ONNX alone is evaluated from its own graph, as below.

A copy of the ONNX file is converted to double (``to_float64``): float
initializers, Constant nodes, tensor-valued attributes, graph inputs, outputs
and value_info, and the ``to`` of Cast nodes. Weights are the file's own
float32 values, widened exactly; scalar float attributes (``alpha``,
``epsilon``) stay what the file stores. Inputs are the canonical float32
batches every reference gets, widened exactly; outputs are float64, in the
canonical layout (unlike the float32 references).

An ONNX graph's float64 copy runs on ONNX Runtime's CPU provider (graph optimisations
off, one thread, sequential, as ``onnxruntime_ref``). ONNX Runtime 1.32 has
double kernels for Gemm, MatMul, Relu, Sigmoid, Tanh, Softmax, LeakyRelu,
Clip, Exp, Sqrt, MaxPool, BatchNormalization, Add, Sub, Mul, Div, Sum, Max,
Min, Flatten, Reshape, Transpose, Concat, Gather, Pad, Identity (so the
ACAS-Xu surrogates run there), but none for Conv, ConvTranspose, AveragePool,
GlobalAveragePool, GlobalMaxPool, Mean, Elu, Selu, HardSigmoid, Softplus or
Softsign: it refuses such a graph with NOT_IMPLEMENTED (LeNet-5 and CifarNet
have Conv; LeNet-5 has AveragePool). Those graphs, and only those, are
evaluated instead by the small numpy evaluator at the end of this module,
which covers every op ``harness.models.onnx_export`` writes. ``onnx.reference``
would also do, but takes tens of seconds per thousand LeNet-5 inputs (its
pooling loops in Python); the evaluator here uses strided window views and
``einsum``. ``engine(model)`` says which of the two ran a model.

A graph without a batch axis (``[C, H, W]`` or ``[F]`` inputs, docs/zoo.md)
runs one input at a time, as ``onnxruntime_ref`` does. Graphs whose float
inputs must stay float32 by the ONNX spec (the scales of Resize and Upsample)
are not handled: no zoo model has them. What the arbiter cannot evaluate is a
``ModelError`` naming the op and attribute, which the semantic stage shows as
"arbiter not available: ..." on stderr and in table1.md.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.tensors import convert, shape_in
from harness.models.model import Model
from harness.references import check_inputs, keras_ref
from harness.references.onnxruntime_ref import run_batched, session_options

BATCH = 128
ONNXRUNTIME = "onnxruntime"
NUMPY = "numpy"
KERAS = "keras"


class Float64Reference:
    fmt = "onnx"

    def supports(self, model: Model) -> bool:
        return KERAS in model.files or self.fmt in model.files

    def run(self, model: Model, inputs: np.ndarray) -> np.ndarray:
        """Outputs (N, *model.output_shape), float64, canonical layout: Keras in float64 for a model with a
        Keras file, else its ONNX graph."""
        if KERAS in model.files:
            return keras_ref.float64_outputs(model, inputs)
        return graph_outputs(model, inputs)


def graph_outputs(model: Model, inputs: np.ndarray) -> np.ndarray:
    """The model's ONNX graph (its own, or Assay's export of its Keras file) evaluated in float64."""
    runner = _runner(model.file("onnx"))
    in_layout, out_layout = model.layouts_of("onnx")
    batch = convert(check_inputs(model, inputs), model.layout, in_layout).astype(np.float64)
    if runner.rank == batch.ndim - 1:  # no batch axis (docs/zoo.md): one input per run
        chunks = [runner.run(sample)[None] for sample in batch]
    else:
        chunks = run_batched(runner.run, batch, runner.fixed_batch, BATCH)
    expected = shape_in(model.output_shape, model.output_layout, out_layout)
    if not chunks:
        return np.zeros((0, *model.output_shape), np.float64)
    outputs = np.concatenate(chunks).astype(np.float64, copy=False).reshape(len(batch), *expected)
    return convert(outputs, out_layout, model.output_layout)


def engine(model: Model) -> str:
    """Which engine evaluates ``model`` in float64: ``"keras"``, ``"onnxruntime"`` or ``"numpy"`` (provenance)."""
    return KERAS if KERAS in model.files else _runner(model.file("onnx")).engine


# --- the float64 copy of a graph -------------------------------------------------


def to_float64(proto):
    """A copy of the ONNX ``ModelProto`` with every float32 tensor, type and Cast made float64."""
    converted = type(proto)()
    converted.CopyFrom(proto)
    _convert_graph(converted.graph)
    return converted


def _convert_graph(graph) -> None:
    for index, tensor in enumerate(graph.initializer):
        graph.initializer[index].CopyFrom(_double_tensor(tensor))
    for sparse in graph.sparse_initializer:
        sparse.values.CopyFrom(_double_tensor(sparse.values))
    for value in (*graph.input, *graph.output, *graph.value_info):
        _convert_type(value.type)
    for node in graph.node:
        for attribute in node.attribute:
            _convert_attribute(node, attribute)
        if node.op_type == "Constant":
            _constant_to_tensor(node)
        if node.op_type == "ConstantOfShape" and not any(a.name == "value" for a in node.attribute):
            _add_double_zero(node)  # the default value is a float32 zero


def _convert_type(type_proto) -> None:
    from onnx import TensorProto

    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        inner = getattr(type_proto, kind)
        if inner.elem_type == TensorProto.FLOAT:
            inner.elem_type = TensorProto.DOUBLE
    elif kind in ("sequence_type", "optional_type"):
        _convert_type(getattr(type_proto, kind).elem_type)
    elif kind == "map_type":
        _convert_type(type_proto.map_type.value_type)


def _convert_attribute(node, attribute) -> None:
    from onnx import AttributeProto, TensorProto

    if attribute.type == AttributeProto.TENSOR:
        attribute.t.CopyFrom(_double_tensor(attribute.t))
    elif attribute.type == AttributeProto.TENSORS:
        for tensor in attribute.tensors:
            tensor.CopyFrom(_double_tensor(tensor))
    elif attribute.type == AttributeProto.GRAPH:
        _convert_graph(attribute.g)
    elif attribute.type == AttributeProto.GRAPHS:
        for graph in attribute.graphs:
            _convert_graph(graph)
    elif attribute.type == AttributeProto.TYPE_PROTO:
        _convert_type(attribute.tp)
    if node.op_type == "Cast" and attribute.name == "to" and attribute.i == TensorProto.FLOAT:
        attribute.i = TensorProto.DOUBLE


def _constant_to_tensor(node) -> None:
    """Constant's ``value_float(s)`` make float32 tensors: replace them by a float64 ``value``."""
    from onnx import helper, numpy_helper

    for attribute in list(node.attribute):
        if attribute.name in ("value_float", "value_floats"):
            array = np.array(helper.get_attribute_value(attribute), np.float64)
            node.attribute.remove(attribute)
            node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(array, node.output[0])))


def _add_double_zero(node) -> None:
    from onnx import helper, numpy_helper

    node.attribute.append(helper.make_attribute("value", numpy_helper.from_array(np.zeros(1, np.float64))))


def _double_tensor(tensor):
    from onnx import TensorProto, numpy_helper

    if tensor.data_type != TensorProto.FLOAT:
        return tensor
    return numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name)


# --- the two engines ---------------------------------------------------------------


class _OrtRunner:
    engine = ONNXRUNTIME

    def __init__(self, session):
        self.session = session
        first = session.get_inputs()[0]
        self.input_name = first.name
        self.rank = len(first.shape)
        self.fixed_batch = first.shape[0] if first.shape and isinstance(first.shape[0], int) and first.shape[0] > 0 \
            else None

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: batch})[0]


class _NumpyRunner:
    engine = NUMPY

    def __init__(self, proto):
        self.evaluator = Evaluator(proto)
        self.input_name = self.evaluator.inputs[0].name
        dims = self.evaluator.inputs[0].type.tensor_type.shape.dim
        self.rank = len(dims)
        self.fixed_batch = dims[0].dim_value if dims and dims[0].HasField("dim_value") and dims[0].dim_value > 0 \
            else None

    def run(self, batch: np.ndarray) -> np.ndarray:
        return self.evaluator.run({self.input_name: batch})[0]


@functools.lru_cache(maxsize=8)
def _load(path: str, mtime_ns: int):
    import onnx

    try:
        proto = to_float64(onnx.load(path))
    except Exception as error:  # noqa: BLE001
        from harness.models.user_files import cause

        raise ModelError(f"{path}: cannot read it as ONNX ({cause(error)})") from None
    session = _ort_session(proto, path)
    return _OrtRunner(session) if session is not None else _NumpyRunner(proto)


def _runner(path: Path):
    path = Path(path).resolve()
    return _load(str(path), path.stat().st_mtime_ns)


def _ort_session(proto, path: str):
    """An ONNX Runtime session of the float64 graph, or None if some op has no double kernel."""
    import onnxruntime as ort
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented

    try:
        return ort.InferenceSession(proto.SerializeToString(), sess_options=session_options(),
                                    providers=["CPUExecutionProvider"])
    except OrtNotImplemented:
        return None
    except Exception as error:  # noqa: BLE001
        from harness.models.user_files import cause

        raise ModelError(f"{path}: onnxruntime cannot load its float64 copy ({cause(error)})") from None


# --- the numpy evaluator -------------------------------------------------------------


class Evaluator:
    """Runs an ONNX graph with numpy, in the dtype of its tensors (float64 after ``to_float64``)."""

    def __init__(self, proto):
        from onnx import numpy_helper

        self.graph = proto.graph
        self.opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.constants = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.inputs = [value for value in self.graph.input if value.name not in self.constants]
        unknown = sorted({node.op_type for node in self.graph.node if node.op_type not in _OPS})
        if unknown:
            raise ModelError(f"{self.graph.name or 'graph'}: neither onnxruntime (in double) nor the numpy "
                             f"evaluator runs {', '.join(unknown)}")

    def run(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        from onnx import helper

        values = dict(self.constants)
        values.update(feeds)
        with np.errstate(over="ignore", under="ignore"):
            for node in self.graph.node:
                args = [values[name] if name else None for name in node.input]
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                results = _OPS[node.op_type](self, args, attrs)
                for name, result in zip(node.output, results if isinstance(results, tuple) else (results,)):
                    if name:
                        values[name] = np.asarray(result)
        return [values[value.name] for value in self.graph.output]


_OPS: dict = {}


def _op(*names: str):
    def register_op(function):
        for name in names:
            _OPS[name] = function
        return function

    return register_op


def _unary(function):
    return lambda ev, args, attrs: function(args[0], attrs)


_OPS.update({
    "Identity": _unary(lambda x, a: x),
    "Dropout": _unary(lambda x, a: x),
    "Relu": _unary(lambda x, a: np.maximum(x, 0)),
    "Tanh": _unary(lambda x, a: np.tanh(x)),
    "Sigmoid": _unary(lambda x, a: 1 / (1 + np.exp(-x))),
    "Exp": _unary(lambda x, a: np.exp(x)),
    "Sqrt": _unary(lambda x, a: np.sqrt(x)),
    "Neg": _unary(lambda x, a: -x),
    "Abs": _unary(lambda x, a: np.abs(x)),
    "Softplus": _unary(lambda x, a: np.logaddexp(0, x)),
    "Softsign": _unary(lambda x, a: x / (1 + np.abs(x))),
    "Elu": _unary(lambda x, a: np.where(x > 0, x, a.get("alpha", 1.0) * np.expm1(np.minimum(x, 0)))),
    "Selu": _unary(lambda x, a: a.get("gamma", 1.05070102214813232421875) * np.where(  # the spec's float32 defaults
        x > 0, x, a.get("alpha", 1.67326319217681884765625) * np.expm1(np.minimum(x, 0)))),
    "HardSigmoid": _unary(lambda x, a: np.clip(a.get("alpha", 0.2) * x + a.get("beta", 0.5), 0, 1)),
    "LeakyRelu": _unary(lambda x, a: np.where(x >= 0, x, a.get("alpha", 0.01) * x)),
    "Add": lambda ev, args, attrs: args[0] + args[1],
    "Sub": lambda ev, args, attrs: args[0] - args[1],
    "Mul": lambda ev, args, attrs: args[0] * args[1],
    "Div": lambda ev, args, attrs: args[0] / args[1],
    "MatMul": lambda ev, args, attrs: np.matmul(args[0], args[1]),
    "Sum": lambda ev, args, attrs: functools.reduce(np.add, args),
    "Mean": lambda ev, args, attrs: functools.reduce(np.add, args) / len(args),
    "Max": lambda ev, args, attrs: functools.reduce(np.maximum, args),
    "Min": lambda ev, args, attrs: functools.reduce(np.minimum, args),
    "Concat": lambda ev, args, attrs: np.concatenate(args, axis=attrs["axis"]),
    "Gather": lambda ev, args, attrs: np.take(args[0], args[1], axis=attrs.get("axis", 0)),
    "Transpose": lambda ev, args, attrs: np.transpose(args[0], attrs.get("perm")),
})


@_op("Constant")
def _constant(ev, args, attrs):
    from onnx import numpy_helper

    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.array(attrs[key], dtype)
    raise ModelError(f"Constant with attributes {sorted(attrs)} is not supported by the numpy evaluator")


@_op("ConstantOfShape")
def _constant_of_shape(ev, args, attrs):
    from onnx import numpy_helper

    value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    return np.full([int(d) for d in args[0]], value.reshape(-1)[0], value.dtype)


@_op("Cast")
def _cast(ev, args, attrs):
    from onnx import helper

    return args[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))


@_op("Clip")
def _clip(ev, args, attrs):
    low = args[1] if len(args) > 1 and args[1] is not None else attrs.get("min")
    high = args[2] if len(args) > 2 and args[2] is not None else attrs.get("max")
    x = args[0]
    if low is not None:
        x = np.maximum(x, low)
    if high is not None:
        x = np.minimum(x, high)
    return x


@_op("Softmax")
def _softmax(ev, args, attrs):
    x = args[0]
    if ev.opset >= 13:
        return _softmax_along(x, attrs.get("axis", -1))
    axis = attrs.get("axis", 1) % x.ndim  # before opset 13 the input is coerced to 2-D at ``axis``
    return _softmax_along(x.reshape(int(np.prod(x.shape[:axis])), -1), 1).reshape(x.shape)


def _softmax_along(x, axis):
    shifted = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return shifted / np.sum(shifted, axis=axis, keepdims=True)


@_op("Gemm")
def _gemm(ev, args, attrs):
    a = args[0].T if attrs.get("transA", 0) else args[0]
    b = args[1].T if attrs.get("transB", 0) else args[1]
    y = attrs.get("alpha", 1.0) * (a @ b)
    if len(args) > 2 and args[2] is not None:
        y = y + attrs.get("beta", 1.0) * args[2]
    return y


@_op("Flatten")
def _flatten(ev, args, attrs):
    x = args[0]
    axis = attrs.get("axis", 1) % (x.ndim + 1) if x.ndim else 0
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


@_op("Reshape")
def _reshape(ev, args, attrs):
    x, shape = args[0], [int(d) for d in args[1]]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


@_op("BatchNormalization")
def _batch_norm(ev, args, attrs):
    x, scale, bias, mean, var = args[:5]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    factor = scale / np.sqrt(var + attrs.get("epsilon", 1e-5))
    return (x - mean.reshape(shape)) * factor.reshape(shape) + bias.reshape(shape)


@_op("Pad")
def _pad(ev, args, attrs):
    x = args[0]
    if ev.opset < 11:
        pads, value, axes = attrs["pads"], attrs.get("value", 0.0), None
    else:
        pads = [int(p) for p in args[1]]
        value = args[2].item() if len(args) > 2 and args[2] is not None and args[2].size else 0
        axes = [int(a) % x.ndim for a in args[3]] if len(args) > 3 and args[3] is not None else None
    axes = axes if axes is not None else list(range(x.ndim))
    width = [(0, 0)] * x.ndim
    for i, axis in enumerate(axes):
        width[axis] = (pads[i], pads[i + len(axes)])
    if any(p < 0 for pair in width for p in pair):
        raise ModelError("Pad with negative pads is not supported by the numpy evaluator")
    mode = attrs.get("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "constant":
        return np.pad(x, width, mode="constant", constant_values=value)
    if mode in ("reflect", "edge"):
        return np.pad(x, width, mode=mode)
    raise ModelError(f"Pad mode '{mode}' is not supported by the numpy evaluator")


def _window_attrs(x, attrs, kernel):
    """(kernel, strides, dilations, pads) of a windowed op, ``pads`` as ONNX writes them (begins, then ends).

    ``auto_pad`` SAME_UPPER/SAME_LOWER pads so that each output size is ceil(input / stride), the odd cell at the
    end (UPPER) or the beginning (LOWER); ``ceil_mode`` adds end padding for a last, partial window where one
    starts inside the (explicitly padded) input. The cells that padding adds are never counted by AveragePool
    (``_average_pool``).
    """
    spatial = x.ndim - 2
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ModelError(f"auto_pad={auto_pad} is not supported by the numpy evaluator")
    strides = list(attrs.get("strides", [1] * spatial))
    dilations = list(attrs.get("dilations", [1] * spatial))
    kernel = list(kernel)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    pads = list(attrs.get("pads", [0] * 2 * spatial)) if auto_pad == "NOTSET" else [0] * 2 * spatial
    for axis in range(spatial):
        size = x.shape[2 + axis]
        if auto_pad.startswith("SAME"):
            total = max((-(-size // strides[axis]) - 1) * strides[axis] + extent[axis] - size, 0)
            small, large = total // 2, total - total // 2
            pads[axis], pads[axis + spatial] = (small, large) if auto_pad == "SAME_UPPER" else (large, small)
        elif attrs.get("ceil_mode", 0):
            padded = size + pads[axis] + pads[axis + spatial]
            outputs = -(-(padded - extent[axis]) // strides[axis]) + 1
            if (outputs - 1) * strides[axis] >= size + pads[axis]:  # a window must start inside input or left pad
                outputs -= 1
            pads[axis + spatial] += max((outputs - 1) * strides[axis] + extent[axis] - padded, 0)
    return kernel, strides, dilations, pads


def _ceil_pads(x, attrs, pads):
    """The end padding ``_window_attrs`` added for ``ceil_mode`` (0 without it), per spatial axis."""
    spatial = x.ndim - 2
    if not attrs.get("ceil_mode", 0):
        return [0] * spatial
    explicit = list(attrs.get("pads", [0] * 2 * spatial))
    return [pads[axis + spatial] - explicit[axis + spatial] for axis in range(spatial)]


def _windows(x, kernel, strides, dilations, pads, fill=0.0):
    """(N, C, *out, *kernel): the input values each output position sees, padding filled with ``fill``."""
    spatial = len(kernel)
    padded = np.pad(x, [(0, 0), (0, 0), *((pads[i], pads[i + spatial]) for i in range(spatial))],
                    mode="constant", constant_values=fill)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    view = np.lib.stride_tricks.sliding_window_view(padded, extent, axis=tuple(range(2, 2 + spatial)))
    return view[(slice(None), slice(None), *(slice(None, None, s) for s in strides),
                 *(slice(None, None, d) for d in dilations))]


@_op("Conv")
def _conv(ev, args, attrs):
    x, w = args[0], args[1]
    kernel, strides, dilations, pads = _window_attrs(x, attrs, attrs.get("kernel_shape", w.shape[2:]))
    group = attrs.get("group", 1)
    cols = _windows(x, kernel, strides, dilations, pads)  # (N, C, *out, *k)
    n, c = cols.shape[:2]
    out = cols.shape[2 : 2 + len(kernel)]
    cols = cols.reshape(n, group, c // group, *out, *kernel)
    weights = w.reshape(group, w.shape[0] // group, *w.shape[1:])
    letters = "hwdtuv"[: len(kernel)]
    taps = "ijklmo"[: len(kernel)]
    y = np.einsum(f"ngc{letters}{taps},gmc{taps}->ngm{letters}", cols, weights, optimize=True)
    y = y.reshape(n, w.shape[0], *out)
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape((1, -1) + (1,) * len(kernel))
    return y


@_op("MaxPool")
def _max_pool(ev, args, attrs):
    x = args[0]
    kernel, strides, dilations, pads = _window_attrs(x, attrs, attrs["kernel_shape"])
    cols = _windows(x, kernel, strides, dilations, pads, fill=-np.inf)
    return cols.max(axis=tuple(range(-len(kernel), 0)))


@_op("AveragePool")
def _average_pool(ev, args, attrs):
    x = args[0]
    kernel, strides, dilations, pads = _window_attrs(x, attrs, attrs["kernel_shape"])
    axes = tuple(range(-len(kernel), 0))
    total = _windows(x, kernel, strides, dilations, pads).sum(axis=axes)
    spatial = len(kernel)
    if attrs.get("count_include_pad", 0):  # explicit pads count, the ceil_mode overhang does not
        ceil = _ceil_pads(x, attrs, pads)
        explicit = [pads[i] for i in range(spatial)] + [pads[i + spatial] - ceil[i] for i in range(spatial)]
        ones = np.pad(np.ones((1, 1, *x.shape[2:]), x.dtype),
                      [(0, 0), (0, 0), *((explicit[i], explicit[i + spatial]) for i in range(spatial))],
                      constant_values=1.0)
        counted = [0] * spatial + ceil
    else:
        ones, counted = np.ones((1, 1, *x.shape[2:]), x.dtype), pads
    return total / _windows(ones, kernel, strides, dilations, counted).sum(axis=axes)


@_op("GlobalAveragePool")
def _global_average_pool(ev, args, attrs):
    return np.mean(args[0], axis=tuple(range(2, args[0].ndim)), keepdims=True)


@_op("GlobalMaxPool")
def _global_max_pool(ev, args, attrs):
    return np.max(args[0], axis=tuple(range(2, args[0].ndim)), keepdims=True)


# Ops of the embedded-network operator set (issue 26): each straight from the ONNX spec's formula, in numpy.


def _text(value, default: str) -> str:
    value = default if value is None else value
    return value.decode() if isinstance(value, bytes) else value


_OPS.update({
    "Log": _unary(lambda x, a: np.log(x)),
    "Reciprocal": _unary(lambda x, a: 1 / x),
    # alpha = 1/6 as the float attribute it is in the spec's function body (scalar attributes stay float32)
    "HardSwish": _unary(lambda x, a: x * np.clip(float(np.float32(1 / 6)) * x + 0.5, 0, 1)),
    "PRelu": lambda ev, args, attrs: np.where(args[0] < 0, args[1] * args[0], args[0]),
})


@_op("LogSoftmax")
def _log_softmax(ev, args, attrs):
    x = args[0]
    if ev.opset >= 13:
        axis = attrs.get("axis", -1)
    else:
        axis = attrs.get("axis", 1) % x.ndim
        x = x.reshape(int(np.prod(x.shape[:axis])), -1)
        axis = 1
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return (shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))).reshape(args[0].shape)


_REDUCTIONS = {
    "ReduceSum": (np.sum, 13), "ReduceMean": (np.mean, 18), "ReduceMax": (np.max, 18), "ReduceMin": (np.min, 18),
    "ReduceProd": (np.prod, 18), "ReduceL1": (lambda x, **k: np.sum(np.abs(x), **k), 18),
    "ReduceL2": (lambda x, **k: np.sqrt(np.sum(x * x, **k)), 18),
    "ReduceSumSquare": (lambda x, **k: np.sum(x * x, **k), 18),
    "ReduceLogSum": (lambda x, **k: np.log(np.sum(x, **k)), 18),
    "ReduceLogSumExp": (lambda x, **k: np.log(np.sum(np.exp(x - np.max(x, **k, keepdims=True)), **k))
                        + np.max(x, **k), 18),
}


def _reduction(op: str):
    function, axes_input_from = _REDUCTIONS[op]

    def reduce(ev, args, attrs):
        x = args[0]
        if ev.opset < axes_input_from:
            axes = attrs.get("axes")
        else:
            axes = args[1] if len(args) > 1 and args[1] is not None else None
        axes = None if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.ndim))
        axis = tuple(a % x.ndim for a in axes)
        result = function(x, axis=axis)
        return np.expand_dims(result, axis) if attrs.get("keepdims", 1) else result

    return reduce


_OPS.update({op: _reduction(op) for op in _REDUCTIONS})


@_op("ConvTranspose")
def _conv_transpose(ev, args, attrs):
    """The spec's scatter: input cell i adds x[i] * w[k] to output i * stride + k * dilation - pad_begin."""
    x, w = args[0], args[1]
    spatial = x.ndim - 2
    group = attrs.get("group", 1)
    kernel = list(w.shape[2:])
    strides = list(attrs.get("strides", [1] * spatial))
    dilations = list(attrs.get("dilations", [1] * spatial))
    extra = list(attrs.get("output_padding", [0] * spatial))
    full = [s * (n - 1) + o + (k - 1) * d + 1
            for n, s, o, k, d in zip(x.shape[2:], strides, extra, kernel, dilations)]
    auto_pad = _text(attrs.get("auto_pad"), "NOTSET")
    if "output_shape" in attrs or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = list(attrs["output_shape"])[-spatial:] if "output_shape" in attrs else \
            [n * s for n, s in zip(x.shape[2:], strides)]
        total = [f - t for f, t in zip(full, target)]
        begin = [0 if t < 0 else t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in total]
    else:
        pads = list(attrs.get("pads", [0] * 2 * spatial)) if auto_pad == "NOTSET" else [0] * 2 * spatial
        begin, target = pads[:spatial], [f - pads[i] - pads[i + spatial] for i, f in enumerate(full)]
    c_in, c_out = x.shape[1], w.shape[1] * group
    canvas = np.zeros((x.shape[0], c_out, *[max(f, t + b) for f, t, b in zip(full, target, begin)]), x.dtype)
    per_in = c_in // group
    for g in range(group):
        xs = x[:, g * per_in:(g + 1) * per_in]
        ws = w[g * per_in:(g + 1) * per_in]
        for tap in np.ndindex(*kernel):
            contribution = np.einsum("nc...,co->no...", xs, ws[(slice(None), slice(None), *tap)])
            where = tuple(slice(t * d, t * d + s * (n - 1) + 1, s)
                          for t, d, s, n in zip(tap, dilations, strides, x.shape[2:]))
            canvas[(slice(None), slice(g * w.shape[1], (g + 1) * w.shape[1]), *where)] += contribution
    y = canvas[(slice(None), slice(None), *(slice(b, b + t) for b, t in zip(begin, target)))]
    if len(args) > 2 and args[2] is not None:
        y = y + args[2].reshape((1, -1) + (1,) * spatial)
    return y


@_op("Slice")
def _slice(ev, args, attrs):
    x = args[0]
    if ev.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes", list(range(len(starts)))), [1] * len(starts)
    else:
        starts, ends = [int(v) for v in args[1]], [int(v) for v in args[2]]
        axes = [int(v) for v in args[3]] if len(args) > 3 and args[3] is not None else list(range(len(starts)))
        steps = [int(v) for v in args[4]] if len(args) > 4 and args[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis) % x.ndim] = slice(int(start), int(end), int(step))
    return x[tuple(index)]


@_op("Split")
def _split(ev, args, attrs):
    x = args[0]
    axis = attrs.get("axis", 0) % x.ndim
    sizes = attrs.get("split") if ev.opset < 13 else (
        [int(v) for v in args[1]] if len(args) > 1 and args[1] is not None else None)
    if sizes is None:
        count = attrs.get("num_outputs")
        if count is None:
            raise ModelError("Split without split sizes or num_outputs is not supported by the numpy evaluator")
        part = -(-x.shape[axis] // count)
        sizes = [min(part, x.shape[axis] - k * part) for k in range(count)]
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _resize_axis(x, axis, out_size, scale, mode, coordinate, nearest):
    """One axis of Resize, in float64 from the spec's coordinate formulas (clamped to the input)."""
    in_size = x.shape[axis]
    o = np.arange(out_size, dtype=np.float64)
    if coordinate == "half_pixel":
        source = (o + 0.5) / scale - 0.5
    elif coordinate == "pytorch_half_pixel":
        source = (o + 0.5) / scale - 0.5 if out_size > 1 else np.zeros_like(o)
    elif coordinate == "align_corners":
        length = in_size * scale
        source = o * (in_size - 1) / (length - 1) if length > 1 else np.zeros_like(o)
    elif coordinate == "asymmetric":
        source = o / scale
    elif coordinate == "tf_half_pixel_for_nn":
        source = (o + 0.5) / scale
    else:
        raise ModelError(f"Resize with coordinate_transformation_mode={coordinate} is not supported by the numpy "
                         "evaluator")
    if mode == "nearest":
        tie = source - np.floor(source) == 0.5
        rounded = {"floor": np.floor(source), "ceil": np.ceil(source),
                   "round_prefer_floor": np.where(tie, np.floor(source), np.round(source)),
                   "round_prefer_ceil": np.where(tie, np.ceil(source), np.round(source))}[nearest]
        return np.take(x, np.clip(rounded, 0, in_size - 1).astype(int), axis=axis)
    if mode != "linear":
        raise ModelError(f"Resize with mode={mode} is not supported by the numpy evaluator")
    source = np.clip(source, 0, in_size - 1)
    low = np.floor(source).astype(int)
    high = np.minimum(low + 1, in_size - 1)
    shape = [1] * x.ndim
    shape[axis] = out_size
    weight = (source - low).reshape(shape)
    return np.take(x, low, axis=axis) * (1 - weight) + np.take(x, high, axis=axis) * weight


@_op("Resize", "Upsample")
def _resize(ev, args, attrs):
    x = args[0]
    old = len(args) == 2 or "scales" in attrs  # Upsample, or Resize of opset 10: (X, scales), asymmetric, floor
    if attrs.get("antialias", 0) or _text(attrs.get("keep_aspect_ratio_policy"), "stretch") != "stretch":
        raise ModelError("Resize with antialias or keep_aspect_ratio_policy is not supported by the numpy evaluator")
    mode = _text(attrs.get("mode"), "nearest")
    mode = "linear" if mode == "bilinear" else mode
    coordinate = "asymmetric" if old else _text(attrs.get("coordinate_transformation_mode"), "half_pixel")
    nearest = "floor" if old else _text(attrs.get("nearest_mode"), "round_prefer_floor")
    axes = [int(a) % x.ndim for a in attrs.get("axes", range(x.ndim))]
    if "scales" in attrs:
        scales, sizes = list(attrs["scales"]), None
    elif old:
        scales, sizes = [float(v) for v in args[1]], None
    else:
        scales = [float(v) for v in args[2]] if len(args) > 2 and args[2] is not None and args[2].size else None
        sizes = [int(v) for v in args[3]] if len(args) > 3 and args[3] is not None else None
    for k, axis in enumerate(axes):
        out = sizes[k] if sizes is not None else int(np.floor(x.shape[axis] * scales[k]))
        scale = out / x.shape[axis] if sizes is not None else scales[k]
        if out != x.shape[axis] or scale != 1:
            x = _resize_axis(x, axis, out, scale, mode, coordinate, nearest)
    return x


@_op("LRN")
def _lrn(ev, args, attrs):
    x = args[0]
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    square = x * x
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    padded = np.pad(square, [(0, 0), (before, after)] + [(0, 0)] * (x.ndim - 2))
    total = sum(padded[:, k:k + x.shape[1]] for k in range(size))
    return x / (bias + alpha / size * total) ** beta
