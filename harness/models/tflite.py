"""TensorFlow Lite flatbuffers (``.tflite``): a full-integer int8 model converted to an equivalent ONNX QOperator
graph (issue 42; docs/quantized.md, "TensorFlow Lite models").

Why a conversion and not a second front end: Assay's generator (``assay-v2``) and its exact integer arbiter
(``harness.references.integer``) already read quantized ONNX graphs, and TFLite's int8 arithmetic is the
``fixed-point`` rule both were written to (TFLite's kernels; its reference FULLY_CONNECTED alone rounds once, in
double: the arbiter's ``litert`` rule). Each TFLite operator becomes the ONNX operator whose integer meaning is the
same, with the same integers and quantization parameters: the converted graph is the model, written in another
notation, and LiteRT's interpreter runs the ``.tflite`` file itself as the reference
(``harness.references.litert_ref``), so a conversion error shows as a disagreement with LiteRT.

The file is read with TensorFlow's own schema reader (``tensorflow.lite.python.schema_py_generated``, no other
dependency). Accepted: one subgraph, an int8 input and output, int8 activations quantized per tensor, int8 weights
(per channel or per tensor, zero point 0) and int32 biases; the operators

- ``CONV_2D`` -> ``QLinearConv`` (weights OHWI -> OIHW);
- ``DEPTHWISE_CONV_2D`` -> ``QLinearConv`` with ``group`` = the input's channels (weights 1HWO -> O1HW);
- ``FULLY_CONNECTED`` -> ``QGemm`` (``com.microsoft``, ``transB=1``: TFLite's weights are [out, in]);
- ``AVERAGE_POOL_2D`` -> ``QLinearGlobalAveragePool`` when its window is the whole map, else ``QLinearAveragePool``
  (``com.microsoft``, counting valid taps only, as TFLite does); TFLite requires the same scale and zero point in
  and out, so both take the arbiter's first branch of "Average pooling": the sum divided by the count, rounded half
  away from zero (TFLite's reference ``AveragePool``);
- ``MAX_POOL_2D`` -> ``MaxPool`` on the integers (the same scale and zero point in and out, as TFLite requires);
- ``ADD`` of two non-constant tensors of one shape -> ``QLinearAdd`` (``com.microsoft``): TFLite's ADD (left shift
  20, reference_integer_ops::Add) is the fixed-point rule's QLinearAdd;
- ``RESHAPE`` of a [1, 1, 1, C] or [1, F] tensor to [1, F] -> ``Flatten`` (the same element order channels-first);
  the shape computations Keras's ``Flatten`` leaves before it (``SHAPE``, ``STRIDED_SLICE``, ``PACK`` on int32
  shape tensors) are dropped: a ``RESHAPE`` takes its static output shape, so they feed nothing.

TFLite's SAME/VALID padding becomes the explicit pads TFLite computes (``ComputePaddingHeightWidth``). A fused
activation (RELU, RELU6, RELU_N1_TO_1) is a clamp of the output's integers; it is accepted only where that clamp is
no-op on the int8 range given the output's scale and zero point (as the converter makes it for a calibrated ReLU
output: zero point -128), since the ONNX QLinear ops have no clamp of their own. Anything else is a ``ModelError``
naming the operator, its output tensor and why: float32/float16 and dynamic-range models, int16 or uint8
activations, SOFTMAX and every other operator, a custom operator, several subgraphs.

Layouts: TFLite is NHWC; the model's canonical layout is channels-last, like a Keras model's (``HWC``), and the
ONNX graph channels-first (``CHW``), each file's layouts in ``Model.file_layouts``. The int8 input and output cross
Assay's float32 ABI as their integer values (docs/quantized.md, "Integer graph inputs and outputs"): the input
domain is the int8 range unless the sidecar says otherwise.
"""

from __future__ import annotations

import math
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import numpy as np

from harness import tensors
from harness.errors import ModelError
from harness.models.model import Model

INT8_RANGE = (-128, 127)
_DTYPES = {"INT8": np.int8, "INT32": np.int32, "INT64": np.int64, "FLOAT32": np.float32}  # constants read
SHAPE_OPS = frozenset({"SHAPE", "STRIDED_SLICE", "PACK"})  # int32 shape arithmetic, dropped when dead
ACTIVATIONS = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}
_ACTIVATION_RANGES = {"NONE": (None, None), "RELU": (0.0, None), "RELU_N1_TO_1": (-1.0, 1.0), "RELU6": (0.0, 6.0)}


def _schema() -> ModuleType:
    """TensorFlow's generated reader of the TFLite flatbuffer schema, imported when a file is read (TensorFlow takes
    seconds to load)."""
    from harness.models import tf_runtime

    tf_runtime.set_environment()  # TensorFlow's environment defaults before it loads
    from tensorflow.lite.python import schema_py_generated

    return schema_py_generated


def _names(enum: type) -> dict[int, str]:
    """A flatbuffer enum's names by value (BuiltinOperator, TensorType), for messages."""
    return {value: name for name, value in vars(enum).items() if not name.startswith("_")}


def read(path: Path) -> tuple[object, bytes]:
    """The flatbuffer's object tree (``ModelT``) and its bytes; a ModelError with the cause for a file that is not
    a TFLite flatbuffer, truncated or corrupt."""
    schema = _schema()
    data = Path(path).read_bytes()
    if len(data) < 8 or not schema.Model.ModelBufferHasIdentifier(data, 0):
        raise ModelError(f"{path}: not a TensorFlow Lite file (no 'TFL3' flatbuffer identifier)")
    try:
        tree = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    except Exception as error:  # noqa: BLE001 - a damaged flatbuffer makes the reader raise anything
        from harness.models.user_files import cause

        raise ModelError(f"{path}: truncated or corrupt TensorFlow Lite file ({cause(error)})") from None
    return tree, data


@dataclass
class _Graph:
    """What the conversion reads of one subgraph, with the names that make its messages."""

    path: Path
    tree: object
    data: bytes
    ops: dict[int, str]
    types: dict[int, str]

    @property
    def subgraph(self):
        return self.tree.subgraphs[0]

    def tensor(self, index: int):
        return self.subgraph.tensors[index]

    def name(self, index: int) -> str:
        raw = self.tensor(index).name
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)

    def op_name(self, operator) -> str:
        code = self.tree.operatorCodes[operator.opcodeIndex]
        number = max(code.builtinCode, code.deprecatedBuiltinCode)
        name = self.ops.get(number, f"builtin {number}")
        if name == "CUSTOM":
            custom = code.customCode
            return f"CUSTOM '{custom.decode('utf-8', 'replace') if isinstance(custom, bytes) else custom}'"
        return name

    def refuse(self, k: int, operator, why: str) -> ModelError:
        out = self.name(operator.outputs[0]) if len(operator.outputs) else "?"
        return ModelError(f"{self.path}: operator {k} ({self.op_name(operator)}) -> '{out}': {why}")

    def type_name(self, index: int) -> str:
        return self.types.get(self.tensor(index).type, str(self.tensor(index).type))

    def array(self, index: int) -> np.ndarray:
        """A constant tensor's value, in its shape; a ModelError when it has no data or the wrong size."""
        tensor = self.tensor(index)
        buffer = self.tree.buffers[tensor.buffer] if 0 <= tensor.buffer < len(self.tree.buffers) else None
        raw = None if buffer is None else buffer.data
        if (raw is None or len(raw) == 0) and buffer is not None and buffer.offset > 1:  # stored after the flatbuffer
            raw = self.data[buffer.offset:buffer.offset + buffer.size]
        dtype = _DTYPES.get(self.type_name(index))
        shape = tuple(int(d) for d in (tensor.shape if tensor.shape is not None else ()))
        if raw is None or len(raw) == 0 or dtype is None or len(raw) != np.dtype(dtype).itemsize * math.prod(shape):
            raise ModelError(f"{self.path}: tensor '{self.name(index)}' ({self.type_name(index)}, shape "
                             f"{list(shape)}) has no constant data of its size")
        return np.frombuffer(bytes(raw), dtype=dtype).reshape(shape)

    def quantization(self, index: int) -> tuple[np.ndarray, np.ndarray, int]:
        """(scales float32, zero points int64, quantized dimension) of tensor ``index``; a ModelError if none."""
        q = self.tensor(index).quantization
        if q is None or q.scale is None or len(q.scale) == 0:
            raise ModelError(f"{self.path}: tensor '{self.name(index)}' ({self.type_name(index)}) has no "
                             "quantization parameters: only full-integer quantized models are converted")
        scale = np.asarray(q.scale, np.float32)
        zero = np.asarray(q.zeroPoint if q.zeroPoint is not None else np.zeros(len(scale)), np.int64)
        if len(zero) != len(scale) or not np.all(np.isfinite(scale)) or np.any(scale <= 0):
            raise ModelError(f"{self.path}: tensor '{self.name(index)}' has invalid quantization parameters "
                             f"(scales {scale.tolist()[:4]}, zero points {zero.tolist()[:4]})")
        return scale, zero, int(q.quantizedDimension)


def convert(path: Path, directory: Path) -> Model:
    """The registered loader of ``.tflite`` (``assay.model_formats``): the file copied into the cache folder as the
    model's ``tflite`` file beside its ONNX conversion (``model.onnx``)."""
    import onnx

    schema = _schema()
    tree, data = read(path)
    graph = _Graph(Path(path), tree, data, _names(schema.BuiltinOperator), _names(schema.TensorType))
    proto, in_shape, out_shape = to_onnx(graph)
    try:
        onnx.checker.check_model(proto)  # a conversion defect shows here, not as a generator's or a runtime's error
    except onnx.checker.ValidationError as error:
        raise ModelError(f"{path}: the ONNX conversion is invalid ({' '.join(str(error).split())[:300]})") from None
    shutil.copyfile(path, directory / "model.tflite")
    onnx.save(proto, str(directory / "model.onnx"))
    channels_last = [tensors.default_layout(len(s), channels_last=True) for s in (in_shape, out_shape)]
    channels_first = [tensors.default_layout(len(s), channels_last=False) for s in (in_shape, out_shape)]
    return Model(name=Path(path).stem, files={"onnx": directory / "model.onnx", "tflite": directory / "model.tflite"},
                 input_shape=in_shape, output_shape=out_shape, layout=channels_last[0], output_layout=channels_last[1],
                 file_layouts={"tflite": tuple(channels_last), "onnx": tuple(channels_first)},
                 input_domain=(float(INT8_RANGE[0]), float(INT8_RANGE[1])), tier="user",
                 description=f"TensorFlow Lite file {Path(path).name} (full-integer int8), converted to an ONNX "
                             "QOperator graph")


def _sample_shape(graph: _Graph, index: int, what: str) -> tuple[int, ...]:
    """The shape of one sample of the graph's input or output: [1, H, W, C] -> (H, W, C), [1, F] -> (F,)."""
    shape = [int(d) for d in graph.tensor(index).shape]
    if len(shape) not in (2, 4) or shape[0] != 1 or min(shape) < 1:
        raise ModelError(f"{graph.path}: {what} '{graph.name(index)}' has shape {shape}; [1, H, W, C] or [1, F] is "
                         "supported")
    return tuple(shape[1:])


def _channels_first(shape: tuple[int, ...]) -> list[int]:
    return [shape[-1], *shape[:-1]] if len(shape) == 3 else list(shape)


def to_onnx(graph: _Graph) -> tuple[object, tuple[int, ...], tuple[int, ...]]:
    """(the ONNX QOperator ``ModelProto``, the input's and the output's sample shape, channels-last)."""
    from onnx import TensorProto, helper

    if len(graph.tree.subgraphs or ()) != 1:
        raise ModelError(f"{graph.path}: {len(graph.tree.subgraphs or ())} subgraphs (one is supported)")
    sub = graph.subgraph
    inputs, outputs = (list(values) if values is not None else [] for values in (sub.inputs, sub.outputs))
    if len(inputs) != 1 or len(outputs) != 1:
        raise ModelError(f"{graph.path}: {len(inputs)} inputs and {len(outputs)} outputs (one each is supported)")
    first, last = int(inputs[0]), int(outputs[0])
    for index, what in ((first, "input"), (last, "output")):
        if graph.type_name(index) != "INT8":
            raise ModelError(f"{graph.path}: {what} '{graph.name(index)}' is {graph.type_name(index)}: "
                             f"{_not_full_integer(graph)}")
    in_shape, out_shape = _sample_shape(graph, first, "input"), _sample_shape(graph, last, "output")
    builder = _Builder(graph)
    names = builder.names
    for k in _live(graph, last):
        operator = sub.operators[k]
        op = graph.op_name(operator)
        convert_op = _CONVERTERS.get(op)
        if convert_op is None:
            raise graph.refuse(k, operator, "not converted (the operators converted: "
                                            f"{', '.join(sorted(_CONVERTERS))}; docs/quantized.md)")
        convert_op(builder, k, operator)
    batch = "N"
    onnx_graph = helper.make_graph(
        builder.nodes, "tflite", [helper.make_tensor_value_info(names[first], TensorProto.INT8,
                                                                [batch, *_channels_first(in_shape)])],
        [helper.make_tensor_value_info(names[last], TensorProto.INT8, [batch, *_channels_first(out_shape)])],
        builder.initializers)
    proto = helper.make_model(onnx_graph, opset_imports=[helper.make_opsetid("", 13),
                                                         helper.make_opsetid("com.microsoft", 1)],
                              producer_name="assay harness.models.tflite")
    proto.ir_version = 8
    return proto, in_shape, out_shape


def _not_full_integer(graph: _Graph) -> str:
    """Why a model whose input or output is not int8 is not converted, naming what it is."""
    kinds = {graph.type_name(i) for i in range(len(graph.subgraph.tensors))}
    if "INT16" in kinds:
        what = "an int16-activation model (16x8 quantization)"
    elif "INT8" in kinds and "FLOAT32" in kinds:
        what = "a dynamic-range or float-I/O quantized model (float32 activations or interface)"
    elif "FLOAT16" in kinds:
        what = "a float16 model"
    elif kinds <= {"FLOAT32", "INT32", "INT64"}:
        what = "a float32 model"
    else:
        what = "a model of types " + ", ".join(sorted(kinds))
    return f"{what}; only full-integer int8 models (int8 input and output) are converted (docs/quantized.md)"


def _live(graph: _Graph, output: int) -> list[int]:
    """The operators the output depends on, in the file's order; a RESHAPE depends on its data input alone (it
    takes its static output shape), so the int32 shape arithmetic before it is dead and dropped. A dead operator of
    another kind is converted too (refused if unsupported): nothing is dropped silently but shape arithmetic."""
    sub = graph.subgraph
    producer = {int(out): k for k, operator in enumerate(sub.operators) for out in operator.outputs}
    needed, stack = set(), [output]
    while stack:
        k = producer.get(stack.pop())
        if k is None or k in needed:
            continue
        needed.add(k)
        operator = sub.operators[k]
        inputs = list(operator.inputs)[:1] if graph.op_name(operator) == "RESHAPE" else list(operator.inputs)
        stack.extend(int(i) for i in inputs if i >= 0)
    return [k for k, operator in enumerate(sub.operators) if k in needed or graph.op_name(operator) not in SHAPE_OPS]


class _Builder:
    """The ONNX nodes and initializers being written, and each TFLite tensor's ONNX name."""

    def __init__(self, graph: _Graph):
        self.graph = graph
        self.nodes: list = []
        self.initializers: list = []
        self.made: set[str] = set()
        used: set[str] = set()
        self.names: dict[int, str] = {}
        for index in range(len(graph.subgraph.tensors)):
            base = re.sub(r"[^A-Za-z0-9_]", "_", graph.name(index).split(";")[0])[:48].strip("_") or "t"
            name = base if base not in used and not base[0].isdigit() else f"t{index}_{base}"
            used.add(name)
            self.names[index] = name

    def constant(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        if name not in self.made:  # a tensor's scale and zero point, made once for its producer and its users
            self.made.add(name)
            self.initializers.append(numpy_helper.from_array(np.array(value, order="C"), name))  # 0-d stays 0-d
        return name

    def activation(self, k: int, operator, index: int, what: str) -> tuple[str, str]:
        """(scale, zero point) initializers of an int8 activation quantized per tensor."""
        graph = self.graph
        if graph.type_name(index) != "INT8":
            raise graph.refuse(k, operator, f"{what} '{graph.name(index)}' is {graph.type_name(index)} (int8 "
                                            "activations are converted)")
        scale, zero, _ = graph.quantization(index)
        if len(scale) != 1:
            raise graph.refuse(k, operator, f"{what} '{graph.name(index)}' is quantized per axis (activations per "
                                            "tensor are converted)")
        if not INT8_RANGE[0] <= int(zero[0]) <= INT8_RANGE[1]:
            raise graph.refuse(k, operator, f"{what} '{graph.name(index)}' has zero point {int(zero[0])}, outside "
                                            "the int8 range")
        name = self.names[index]
        return (self.constant(f"{name}_scale", scale.reshape(())),
                self.constant(f"{name}_zero_point", zero.astype(np.int8).reshape(())))

    def weights(self, k: int, operator, index: int, axis: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """A constant int8 weight tensor and its scales (one per output channel, ``axis`` of the TFLite tensor)."""
        graph = self.graph
        if graph.type_name(index) != "INT8":
            raise graph.refuse(k, operator, f"weights '{graph.name(index)}' are {graph.type_name(index)} (int8 "
                                            "weights are converted)")
        value = graph.array(index)
        scale, zero, dimension = graph.quantization(index)
        if np.any(zero != 0):
            raise graph.refuse(k, operator, f"weights '{graph.name(index)}' have a nonzero zero point (TFLite's "
                                            "int8 weights are symmetric)")
        if len(scale) == 1:
            scale = np.full(channels, scale[0], np.float32)
        elif dimension != axis or len(scale) != channels:
            raise graph.refuse(k, operator, f"weights '{graph.name(index)}' are quantized along axis {dimension} "
                                            f"({len(scale)} scales); per output channel (axis {axis}) is converted")
        return value, scale

    def bias(self, k: int, operator, channels: int) -> str:
        """The int32 bias initializer (TFLite adds it to the accumulator as it is, as QLinearConv and QGemm do), or
        '' when the operator has none."""
        graph = self.graph
        index = int(operator.inputs[2]) if len(operator.inputs) > 2 else -1
        if index < 0:
            return ""
        if graph.type_name(index) != "INT32":
            raise graph.refuse(k, operator, f"bias '{graph.name(index)}' is {graph.type_name(index)} (int32 biases "
                                            "are converted)")
        value = graph.array(index).reshape(-1)
        if len(value) != channels:
            raise graph.refuse(k, operator, f"bias '{graph.name(index)}' has {len(value)} values for {channels} "
                                            "channels")
        return self.constant(self.names[index], value.astype(np.int32))

    def check_activation(self, k: int, operator, options, output: int) -> None:
        """Accept a fused activation only where its clamp of the output's integers (TFLite's
        ``CalculateActivationRangeQuantized``) is the whole int8 range: the QLinear ops have no clamp."""
        graph = self.graph
        number = getattr(options, "fusedActivationFunction", 0) if options is not None else 0
        name = ACTIVATIONS.get(number, f"activation {number}")
        if name == "NONE":
            return
        if name not in _ACTIVATION_RANGES:
            raise graph.refuse(k, operator, f"fused activation {name} is not converted")
        scale, zero, _ = graph.quantization(output)
        low, high = _ACTIVATION_RANGES[name]

        def quantize(value: float) -> int:  # TfLiteRound of a float32 quotient: half away from zero
            real = float(np.float32(value) / np.float32(scale[0]))
            return int(zero[0]) + int(math.copysign(math.floor(abs(real) + 0.5), real))

        clamp = (INT8_RANGE[0] if low is None else max(INT8_RANGE[0], quantize(low)),
                 INT8_RANGE[1] if high is None else min(INT8_RANGE[1], quantize(high)))
        if clamp != INT8_RANGE:
            raise graph.refuse(k, operator, f"fused {name} clamps the output to {list(clamp)}, not a no-op on its "
                                            f"int8 range (scale {float(scale[0]):.6g}, zero point {int(zero[0])}); "
                                            "a clamp is not converted")

    def node(self, op: str, inputs: list[str], output: int, k: int, domain: str = "", **attrs) -> None:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [self.names[output]], name=f"op{k}_{op}", domain=domain,
                                           **attrs))


def _pads(graph: _Graph, k: int, operator, padding: int, size: tuple[int, int], kernel: tuple[int, int],
          strides: tuple[int, int], dilations: tuple[int, int], out: tuple[int, int]) -> list[int]:
    """ONNX pads [top, left, bottom, right] as TFLite computes them (``ComputePaddingHeightWidth``): SAME puts
    half the total before (rounded down), the rest after; VALID none. The output size must be TFLite's."""
    before, after = [], []
    for n, f, s, d, o in zip(size, kernel, strides, dilations, out):
        effective = (f - 1) * d + 1
        expected = (n + s - 1) // s if padding == 0 else (n + s - effective) // s
        if o != expected:
            raise graph.refuse(k, operator, f"output size {o} where TFLite computes {expected}")
        total = max((o - 1) * s + effective - n, 0) if padding == 0 else 0
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def _conv(builder: _Builder, k: int, operator) -> None:
    """CONV_2D and DEPTHWISE_CONV_2D -> QLinearConv (depthwise: group = the input's channels)."""
    graph = builder.graph
    depthwise = graph.op_name(operator) == "DEPTHWISE_CONV_2D"
    x, w, y = int(operator.inputs[0]), int(operator.inputs[1]), int(operator.outputs[0])
    options = operator.builtinOptions
    x_shape, y_shape = [int(d) for d in graph.tensor(x).shape], [int(d) for d in graph.tensor(y).shape]
    if len(x_shape) != 4 or len(y_shape) != 4:
        raise graph.refuse(k, operator, f"input shape {x_shape}, output shape {y_shape} (NHWC is converted)")
    channels = y_shape[3]
    value, w_scale = builder.weights(k, operator, w, 3 if depthwise else 0, channels)
    if depthwise:  # [1, kh, kw, C_in x multiplier] -> [C_out, 1, kh, kw]
        if value.shape[0] != 1 or value.shape[3] != channels or channels % x_shape[3]:
            raise graph.refuse(k, operator, f"depthwise weights of shape {list(value.shape)} for {x_shape[3]} input "
                                            f"and {channels} output channels")
        weight, group = value.transpose(3, 0, 1, 2), x_shape[3]
    else:  # [C_out, kh, kw, C_in] -> [C_out, C_in, kh, kw]
        if value.shape[0] != channels or value.shape[3] != x_shape[3]:
            raise graph.refuse(k, operator, f"weights of shape {list(value.shape)} for {x_shape[3]} input and "
                                            f"{channels} output channels")
        weight, group = value.transpose(0, 3, 1, 2), 1
    builder.check_activation(k, operator, options, y)
    strides = (int(options.strideH), int(options.strideW))
    dilations = (int(options.dilationHFactor) or 1, int(options.dilationWFactor) or 1)
    kernel = (int(weight.shape[2]), int(weight.shape[3]))
    pads = _pads(graph, k, operator, int(options.padding), (x_shape[1], x_shape[2]), kernel, strides, dilations,
                 (y_shape[1], y_shape[2]))
    name = builder.names[w]
    inputs = [builder.names[x], *builder.activation(k, operator, x, "input"),
              builder.constant(name, np.ascontiguousarray(weight)), builder.constant(f"{name}_scale", w_scale),
              builder.constant(f"{name}_zero_point", np.zeros(channels, np.int8)),
              *builder.activation(k, operator, y, "output")]
    bias = builder.bias(k, operator, channels)
    builder.node("QLinearConv", inputs + ([bias] if bias else []), y, k, kernel_shape=list(kernel),
                 strides=list(strides), dilations=list(dilations), pads=pads, group=group)


def _fully_connected(builder: _Builder, k: int, operator) -> None:
    """FULLY_CONNECTED -> QGemm (com.microsoft), B = the [out, in] weights with transB=1."""
    graph = builder.graph
    x, w, y = int(operator.inputs[0]), int(operator.inputs[1]), int(operator.outputs[0])
    options = operator.builtinOptions
    x_shape, y_shape = [int(d) for d in graph.tensor(x).shape], [int(d) for d in graph.tensor(y).shape]
    if len(x_shape) != 2 or len(y_shape) != 2 or x_shape[0] != 1:
        raise graph.refuse(k, operator, f"input shape {x_shape}, output shape {y_shape} ([1, F] is converted)")
    if options is not None and getattr(options, "weightsFormat", 0) != 0:
        raise graph.refuse(k, operator, "shuffled weights are not converted")
    channels = y_shape[1]
    value, w_scale = builder.weights(k, operator, w, 0, channels)
    if value.shape != (channels, x_shape[1]):
        raise graph.refuse(k, operator, f"weights of shape {list(value.shape)} for {x_shape[1]} inputs and "
                                        f"{channels} outputs")
    builder.check_activation(k, operator, options, y)
    name = builder.names[w]
    inputs = [builder.names[x], *builder.activation(k, operator, x, "input"), builder.constant(name, value),
              builder.constant(f"{name}_scale", w_scale),
              builder.constant(f"{name}_zero_point", np.zeros(channels, np.int8)), builder.bias(k, operator, channels),
              *builder.activation(k, operator, y, "output")]
    builder.node("QGemm", inputs, y, k, domain="com.microsoft", transB=1)


class _Window(NamedTuple):
    x: int
    y: int
    quantization: list  # the input's then the output's scale and zero point names
    kernel: tuple[int, int]
    strides: tuple[int, int]
    pads: list[int]
    whole: bool  # the window is the whole map, unpadded


def _pool_window(builder: _Builder, k: int, operator, what: str) -> _Window:
    """The input and output of AVERAGE_POOL_2D or MAX_POOL_2D (``what``), their quantization (the same in and out,
    as TFLite's int8 pooling requires), its window, strides and the explicit pads TFLite computes."""
    graph = builder.graph
    x, y = int(operator.inputs[0]), int(operator.outputs[0])
    options = operator.builtinOptions
    x_shape, y_shape = [int(d) for d in graph.tensor(x).shape], [int(d) for d in graph.tensor(y).shape]
    if len(x_shape) != 4 or len(y_shape) != 4:
        raise graph.refuse(k, operator, f"input shape {x_shape}, output shape {y_shape} (NHWC is converted)")
    x_q, y_q = builder.activation(k, operator, x, "input"), builder.activation(k, operator, y, "output")
    if not _same_quantization(graph, x, y):
        raise graph.refuse(k, operator, f"input and output quantized differently (TFLite's int8 {what} pooling "
                                        "requires the same scale and zero point)")
    builder.check_activation(k, operator, options, y)
    kernel, strides = (int(options.filterHeight), int(options.filterWidth)), (int(options.strideH),
                                                                              int(options.strideW))
    pads = _pads(graph, k, operator, int(options.padding), (x_shape[1], x_shape[2]), kernel, strides, (1, 1),
                 (y_shape[1], y_shape[2]))
    return _Window(x, y, [*x_q, *y_q], kernel, strides, pads, kernel == (x_shape[1], x_shape[2]) and not any(pads))


def _average_pool(builder: _Builder, k: int, operator) -> None:
    """AVERAGE_POOL_2D -> QLinearGlobalAveragePool (a window of the whole map) or QLinearAveragePool."""
    w = _pool_window(builder, k, operator, "average")
    inputs = [builder.names[w.x], *w.quantization]
    if w.whole:
        builder.node("QLinearGlobalAveragePool", inputs, w.y, k, domain="com.microsoft", channels_last=0)
    else:
        builder.node("QLinearAveragePool", inputs, w.y, k, domain="com.microsoft", kernel_shape=list(w.kernel),
                     strides=list(w.strides), pads=w.pads, count_include_pad=0, channels_last=0)


def _max_pool(builder: _Builder, k: int, operator) -> None:
    """MAX_POOL_2D -> MaxPool on the integers (the same scale and zero point in and out, as TFLite requires; padded
    taps take no part in either)."""
    w = _pool_window(builder, k, operator, "max")
    builder.node("MaxPool", [builder.names[w.x]], w.y, k, kernel_shape=list(w.kernel), strides=list(w.strides),
                 pads=w.pads)


def _add(builder: _Builder, k: int, operator) -> None:
    """ADD of two int8 tensors of one shape -> QLinearAdd (com.microsoft): TFLite's ADD arithmetic (left shift 20)
    is the fixed-point rule's QLinearAdd."""
    graph = builder.graph
    a, b, y = int(operator.inputs[0]), int(operator.inputs[1]), int(operator.outputs[0])
    shapes = [[int(d) for d in graph.tensor(index).shape] for index in (a, b, y)]
    if shapes[0] != shapes[1] or shapes[0] != shapes[2]:
        raise graph.refuse(k, operator, f"operands of shapes {shapes[0]} and {shapes[1]} (the same shape is "
                                        "converted, no broadcast)")
    if any(graph.tree.buffers[graph.tensor(index).buffer].data is not None for index in (a, b)):
        raise graph.refuse(k, operator, "a constant operand is not converted")
    builder.check_activation(k, operator, operator.builtinOptions, y)
    inputs = [builder.names[a], *builder.activation(k, operator, a, "first operand"), builder.names[b],
              *builder.activation(k, operator, b, "second operand"), *builder.activation(k, operator, y, "output")]
    builder.node("QLinearAdd", inputs, y, k, domain="com.microsoft")


def _reshape(builder: _Builder, k: int, operator) -> None:
    """RESHAPE of [1, 1, 1, C] or [1, F] to [1, F] -> Flatten: the same element order channels-first."""
    graph = builder.graph
    x, y = int(operator.inputs[0]), int(operator.outputs[0])
    x_shape, y_shape = [int(d) for d in graph.tensor(x).shape], [int(d) for d in graph.tensor(y).shape]
    if not (len(y_shape) == 2 and y_shape[0] == 1 and math.prod(x_shape) == y_shape[1] and x_shape[0] == 1
            and (len(x_shape) == 2 or (len(x_shape) == 4 and x_shape[1] == x_shape[2] == 1))):
        raise graph.refuse(k, operator, f"reshape of {x_shape} to {y_shape}: [1, 1, 1, C] or [1, F] to [1, F] is "
                                        "converted (another would need a transpose to channels-last order)")
    builder.activation(k, operator, x, "input")
    if not _same_quantization(graph, x, y):
        raise graph.refuse(k, operator, "input and output quantized differently (a RESHAPE moves integers)")
    builder.node("Flatten", [builder.names[x]], y, k, axis=1)


def _same_quantization(graph: _Graph, a: int, b: int) -> bool:
    """Whether tensors ``a`` and ``b`` have the same scales and zero points."""
    return all(np.array_equal(p, q) for p, q in zip(graph.quantization(a)[:2], graph.quantization(b)[:2]))


_CONVERTERS = {"CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "FULLY_CONNECTED": _fully_connected,
               "AVERAGE_POOL_2D": _average_pool, "MAX_POOL_2D": _max_pool, "ADD": _add, "RESHAPE": _reshape}
