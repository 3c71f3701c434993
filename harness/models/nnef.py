"""NNEF folders (``graph.nnef`` + one ``.dat`` file per variable): written from ONNX, read into ONNX.

NNEF (Khronos, version 1.0.5) is the format the ERTS 2024 paper
(shared/papers/nnef-formal-description-erts2024.txt) picks as the unambiguous
specification of a trained model: a textual graph with a formal syntax and
semantics in which every choice is written out.

- ``export_onnx`` writes a model as NNEF from its ONNX file with every
  implicit choice made explicit: the padding of each side of each axis (a
  Keras ``same`` window pads bottom/right only, §II.C; ONNX ``auto_pad`` and
  ``ceil_mode`` are resolved into numbers), the border rule of every pooling
  (``ignore`` or ``constant``), NCHW layout (NNEF's own), each activation as
  its own instruction, ``reshape`` with the full target shape (no ``0`` or
  ``-1``). Each layer's result variable is named after the ONNX node (itself
  named after the Keras layer), so the NNEF text, the generator's manifest and
  the multi-item descriptions speak of the same layers. This writer is ours
  rather than ``nnef-tools``' ONNX converter because that one renames every
  tensor (``conv1``, ``relu1``...) and loses the trace to the source layers;
  the ``.dat`` files are written by Khronos' ``nnef`` package.
- ``convert_to_onnx`` turns a user's NNEF folder into ONNX for the references
  (ONNX Runtime) with Khronos' ``nnef-tools`` converter, which is independent
  of both our writer and the generator's NNEF front end (``codegen.frontend_nnef``),
  so a misreading in one of them shows up as a disagreement.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from harness.errors import ModelError
from harness.models import names

GRAPH_FILE = "graph.nnef"
# Words of the NNEF grammar that cannot name a tensor.
_KEYWORDS = frozenset({"version", "extension", "fragment", "graph", "tensor", "integer", "scalar", "logical", "string",
                       "true", "false", "for", "in", "if", "else", "yield", "length_of", "shape_of", "range_of"})


def is_folder(path: Path) -> bool:
    """Whether ``path`` is an NNEF folder: a directory holding ``graph.nnef`` (or named ``*.nnef``)."""
    path = Path(path)
    return path.is_dir() and ((path / GRAPH_FILE).is_file() or path.suffix.lower() == ".nnef")


def folder_sha256(folder: Path) -> str:
    """SHA-256 over the names and bytes of the graph and tensor files of an NNEF folder."""
    hasher = hashlib.sha256()
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in (".nnef", ".dat", ".quant")):
        hasher.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


# --- import: NNEF -> ONNX with nnef-tools --------------------------------------------------


def read(folder: Path):
    """The NNEF graph of ``folder`` with shapes (Khronos' parser); a ModelError naming the cause otherwise."""
    import nnef

    folder = Path(folder)
    if not (folder / GRAPH_FILE).is_file():
        raise ModelError(f"{folder}: not an NNEF folder (no {GRAPH_FILE})")
    try:
        graph = nnef.load_graph(str(folder))
        nnef.infer_shapes(graph)
    except (nnef.Error, OSError, ValueError) as error:
        raise ModelError(f"{folder}: invalid NNEF ({' '.join(str(error).split())})") from None
    return graph


def convert_to_onnx(folder: Path, onnx_path: Path) -> None:
    """Write ``folder``'s NNEF graph as ONNX with ``nnef-tools`` (its nnef_to_onnx converter)."""
    import onnx
    from nnef_tools.conversion.nnef_to_onnx import Converter
    from nnef_tools.io.nnef import Reader
    from nnef_tools.io.onnx import Writer
    from nnef_tools.optimization.nnef_optimizer import Optimizer

    read(folder)  # the parser's message for a bad file, before the converter's
    converter = Converter()
    reader = Reader(decomposed=converter.decomposed_operations(), custom_shapes=converter.defined_shapes())
    try:
        graph = Optimizer()(reader(str(folder)), only_required=True)
        graph.sort()
        Writer()(converter(graph), str(onnx_path))
    except Exception as error:  # noqa: BLE001 - the converter raises plain Exceptions and assertions
        raise ModelError(f"{folder}: nnef-tools cannot convert it to ONNX "
                         f"({type(error).__name__}: {' '.join(str(error).split())})") from None
    model = onnx.load(str(onnx_path))
    # nnef-tools lists the weights as graph inputs too; a reference would then treat them as inputs.
    weights = {init.name for init in model.graph.initializer}
    kept = [value for value in model.graph.input if value.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, str(onnx_path))


# --- export: ONNX -> NNEF, every choice explicit -------------------------------------------


def identifier(name: str) -> str:
    """``name`` as an NNEF identifier: ASCII, a letter first (``harness.models.names``), not a keyword."""
    ident = names.identifier(name, "t")
    return f"t_{ident}" if ident in _KEYWORDS else ident


def _shape(values) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _pairs(pairs) -> str:
    return "[" + ", ".join(f"({int(a)}, {int(b)})" for a, b in pairs) + "]"


def _number(value: float) -> str:
    text = repr(float(np.float32(value)))
    return text if "inf" not in text else ("1e38" if value > 0 else "-1e38")


class _Writer:
    """One ONNX graph rendered as NNEF instructions; ``reject`` names the node for anything not expressible."""

    def __init__(self, model, source: str) -> None:
        from onnx import numpy_helper

        self.source = source
        self.graph = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        self.consts = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
        self.shapes: dict[str, tuple[int, ...]] = {}
        for value in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
            dims = value.type.tensor_type.shape.dim
            if all(d.HasField("dim_value") for d in dims):
                self.shapes[value.name] = tuple(int(d.dim_value) for d in dims)
        self.names: dict[str, str] = {}  # ONNX tensor -> NNEF identifier
        self.used: set[str] = set()
        self.variables: dict[str, np.ndarray] = {}  # NNEF identifier -> data
        self.lines: list[str] = []

    def fresh(self, name: str) -> str:
        ident = identifier(name)
        while ident in self.used:
            ident += "_"
        self.used.add(ident)
        return ident

    def reject(self, node, why: str) -> ModelError:
        return ModelError(f"{self.source}: node '{node.name}' ({node.op_type}) {why}; it cannot be written as NNEF")

    def attr(self, node, key: str, default=None):
        from onnx import helper

        for attribute in node.attribute:
            if attribute.name == key:
                value = helper.get_attribute_value(attribute)
                return value.decode() if isinstance(value, bytes) else value
        return default

    def tensor(self, node, k: int = 0) -> str:
        if k >= len(node.input) or node.input[k] not in self.names:
            raise self.reject(node, f"reads '{node.input[k] if k < len(node.input) else ''}', which is not a tensor "
                                    "computed from the input")
        return self.names[node.input[k]]

    def const(self, node, k: int, what: str) -> np.ndarray:
        if k >= len(node.input) or node.input[k] not in self.consts:
            raise self.reject(node, f"needs a constant {what} (input {k})")
        return self.consts[node.input[k]]

    def variable(self, name: str, data: np.ndarray) -> str:
        ident = self.fresh(name)
        self.variables[ident] = np.ascontiguousarray(data, dtype=np.float32)
        return ident

    def operand(self, node, k: int, rank: int) -> str:
        """Input ``k``: a computed tensor, or a constant as a variable of the output's rank (leading 1s)."""
        source = node.input[k]
        if source in self.names:
            return self.names[source]
        value = self.const(node, k, "operand")
        value = value.reshape((1,) * (rank - value.ndim) + value.shape) if value.ndim < rank else value
        return self.variable(f"{node.name}_{k}", value)

    def emit(self, node, expression: str) -> None:
        ident = self.fresh(node.name or node.output[0])
        self.names[node.output[0]] = ident
        self.lines.append(f"{ident} = {expression};")

    def out_shape(self, node) -> tuple[int, ...]:
        if node.output[0] not in self.shapes:
            raise self.reject(node, "has an output whose shape ONNX shape inference cannot tell")
        return self.shapes[node.output[0]]


def _window(w: _Writer, node, size: tuple[int, int], kernel, ceil_mode: bool) -> tuple[list, list, list]:
    """(stride, dilation, [(top, bottom), (left, right)]) with auto_pad and ceil_mode resolved into pads."""
    import math

    strides = list(w.attr(node, "strides", [1, 1]))
    dilations = list(w.attr(node, "dilations", [1, 1]))
    auto_pad = w.attr(node, "auto_pad", "NOTSET")
    reach = [(k - 1) * d + 1 for k, d in zip(kernel, dilations)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pairs = []
        for n, s, r in zip(size, strides, reach):
            total = max((math.ceil(n / s) - 1) * s + r - n, 0)
            small = total // 2
            begin = small if auto_pad == "SAME_UPPER" else total - small
            pairs.append([begin, total - begin])
    elif auto_pad in ("NOTSET", "VALID"):
        pads = list(w.attr(node, "pads", [0, 0, 0, 0])) if auto_pad == "NOTSET" else [0, 0, 0, 0]
        pairs = [[pads[0], pads[2]], [pads[1], pads[3]]]
    else:
        raise w.reject(node, f"has auto_pad={auto_pad!r}")
    if ceil_mode:  # the last, partial window reads padding added at the end, which the border rule ignores
        for k, (n, s, r) in enumerate(zip(size, strides, reach)):
            span = n + sum(pairs[k]) - r
            count = -(-span // s) + 1
            if (count - 1) * s >= n + pairs[k][0]:
                count -= 1
            pairs[k][1] += max((count - 1) * s + r - (n + sum(pairs[k])), 0)
    return strides, dilations, pairs


def _conv(w: _Writer, node) -> None:
    x = w.tensor(node)
    weight = w.const(node, 1, "weight")
    if w.attr(node, "group", 1) != 1:
        raise w.reject(node, f"has group={w.attr(node, 'group')}")
    size = w.shapes.get(node.input[0], (0, 0, 0, 0))[2:]
    strides, dilations, pairs = _window(w, node, size, weight.shape[2:], False)
    filt = w.variable(f"{node.name}_filter", weight)
    bias = w.variable(f"{node.name}_bias", w.const(node, 2, "bias").reshape(1, -1)) if len(node.input) > 2 and \
        node.input[2] else "0.0"
    w.emit(node, f"conv({x}, {filt}, {bias}, border = 'constant', padding = {_pairs(pairs)}, "
                 f"stride = {_shape(strides)}, dilation = {_shape(dilations)}, groups = 1)")


def _pool(w: _Writer, node) -> None:
    x = w.tensor(node)
    kernel = list(w.attr(node, "kernel_shape"))
    ceil_mode = bool(w.attr(node, "ceil_mode", 0))
    include = node.op_type == "AveragePool" and bool(w.attr(node, "count_include_pad", 0))
    if include and ceil_mode:
        raise w.reject(node, "counts padding (count_include_pad=1) with ceil_mode=1")
    if w.attr(node, "storage_order", 0):
        raise w.reject(node, "has storage_order=1")
    strides, dilations, pairs = _window(w, node, w.shapes[node.input[0]][2:], kernel, ceil_mode)
    border = "constant" if include else "ignore"
    op = "max_pool" if node.op_type == "MaxPool" else "avg_pool"
    w.emit(node, f"{op}({x}, size = {_shape([1, 1, *kernel])}, border = '{border}', "
                 f"padding = {_pairs([(0, 0), (0, 0), *pairs])}, stride = {_shape([1, 1, *strides])}, "
                 f"dilation = {_shape([1, 1, *dilations])})")


def _global_pool(w: _Writer, node) -> None:
    op = "max_reduce" if node.op_type == "GlobalMaxPool" else "mean_reduce"
    w.emit(node, f"{op}({w.tensor(node)}, axes = [2, 3])")


def _gemm(w: _Writer, node) -> None:
    x = w.tensor(node)
    if w.attr(node, "transA", 0) or w.attr(node, "alpha", 1.0) != 1.0 or w.attr(node, "beta", 1.0) != 1.0:
        raise w.reject(node, "has transA, alpha or beta; only Y = A B' + C is written")
    weight = w.const(node, 1, "B")
    weight = weight if w.attr(node, "transB", 0) else weight.T  # NNEF linear's filter is [outputs, inputs]
    filt = w.variable(f"{node.name}_filter", weight)
    bias = "0.0"
    if len(node.input) > 2 and node.input[2]:
        c = w.const(node, 2, "C")
        if c.size != weight.shape[0]:
            raise w.reject(node, f"has C of shape {list(c.shape)}; one value per output is written")
        bias = w.variable(f"{node.name}_bias", c.reshape(1, -1))
    w.emit(node, f"linear({x}, {filt}, {bias})")


def _matmul(w: _Writer, node) -> None:
    if node.input[0] not in w.names or node.input[1] not in w.consts or len(w.shapes[node.input[0]]) != 2:
        raise w.reject(node, "is not X [1, K] times a constant matrix")
    matrix = w.variable(f"{node.name}_matrix", w.consts[node.input[1]])
    w.emit(node, f"matmul({w.tensor(node)}, {matrix}, transposeA = false, transposeB = false)")


def _binary(w: _Writer, node) -> None:
    op = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}[node.op_type]
    rank = len(w.out_shape(node))
    w.emit(node, f"{op}({w.operand(node, 0, rank)}, {w.operand(node, 1, rank)})")


def _activation(op: str, params=None):
    def write(w: _Writer, node) -> None:
        extra = "".join(f", {key} = {_number(value)}" for key, value in (params(w, node) if params else []))
        w.emit(node, f"{op}({w.tensor(node)}{extra})")
    return write


def _clip(w: _Writer, node) -> None:
    if w.opset < 11:
        low, high = w.attr(node, "min", -np.inf), w.attr(node, "max", np.inf)
    else:
        low = float(w.const(node, 1, "min")) if len(node.input) > 1 and node.input[1] else -np.inf
        high = float(w.const(node, 2, "max")) if len(node.input) > 2 and node.input[2] else np.inf
    w.emit(node, f"clamp({w.tensor(node)}, {_number(low)}, {_number(high)})")


def _softmax(w: _Writer, node) -> None:
    rank = len(w.out_shape(node))
    axis = w.attr(node, "axis", 1 if w.opset < 13 else -1) % rank
    axes = list(range(axis, rank)) if w.opset < 13 else [axis]
    w.emit(node, f"softmax({w.tensor(node)}, axes = {_shape(axes)})")


def _reshape(w: _Writer, node) -> None:
    w.emit(node, f"reshape({w.tensor(node)}, shape = {_shape(w.out_shape(node))}, axis_start = 0, axis_count = -1)")


def _copy(w: _Writer, node) -> None:
    w.emit(node, f"copy({w.tensor(node)})")


def _transpose(w: _Writer, node) -> None:
    rank = len(w.out_shape(node))
    perm = list(w.attr(node, "perm", list(range(rank - 1, -1, -1))))
    w.emit(node, f"transpose({w.tensor(node)}, axes = {_shape(perm)})")


def _pad(w: _Writer, node) -> None:
    x = w.tensor(node)
    rank = len(w.shapes[node.input[0]])
    if w.attr(node, "mode", "constant") != "constant":
        raise w.reject(node, f"has mode={w.attr(node, 'mode')!r}")
    if w.opset < 11:
        pads, value, axes = list(w.attr(node, "pads")), float(w.attr(node, "value", 0.0)), list(range(rank))
    else:
        pads = [int(p) for p in w.const(node, 1, "pads")]
        value = float(w.const(node, 2, "value").reshape(-1)[0]) if len(node.input) > 2 and node.input[2] else 0.0
        axes = [int(a) % rank for a in w.const(node, 3, "axes")] if len(node.input) > 3 and node.input[3] else \
            list(range(rank))
    per_axis = {a: (pads[k], pads[k + len(axes)]) for k, a in enumerate(axes)}
    pairs = [per_axis.get(a, (0, 0)) for a in range(rank)]
    w.emit(node, f"pad({x}, padding = {_pairs(pairs)}, border = 'constant', value = {_number(value)})")


def _concat(w: _Writer, node) -> None:
    rank = len(w.out_shape(node))
    items = ", ".join(w.tensor(node, k) for k in range(len(node.input)))
    w.emit(node, f"concat([{items}], axis = {w.attr(node, 'axis') % rank})")


def _batch_norm(w: _Writer, node) -> None:
    x = w.tensor(node)
    names = ("scale", "offset", "mean", "variance")
    values = {what: w.variable(f"{node.name}_{what}", w.const(node, k, what).reshape(1, -1))
              for k, what in enumerate(names, start=1)}
    w.emit(node, f"batch_normalization({x}, {values['mean']}, {values['variance']}, {values['offset']}, "
                 f"{values['scale']}, epsilon = {_number(w.attr(node, 'epsilon', 1e-5))})")


_WRITERS = {
    "Conv": _conv, "MaxPool": _pool, "AveragePool": _pool, "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool, "Gemm": _gemm, "MatMul": _matmul, "Add": _binary, "Sub": _binary,
    "Mul": _binary, "Div": _binary, "Relu": _activation("relu"), "Tanh": _activation("tanh"),
    "Sigmoid": _activation("sigmoid"), "Softplus": _activation("softplus"),
    "LeakyRelu": _activation("leaky_relu", lambda w, n: [("alpha", w.attr(n, "alpha", 0.01))]),
    "Elu": _activation("elu", lambda w, n: [("alpha", w.attr(n, "alpha", 1.0))]),
    "Clip": _clip, "Softmax": _softmax, "Flatten": _reshape, "Reshape": _reshape, "Squeeze": _reshape,
    "Unsqueeze": _reshape, "Identity": _copy, "Dropout": _copy, "Transpose": _transpose, "Pad": _pad,
    "Concat": _concat, "BatchNormalization": _batch_norm,
}


def export_onnx(onnx_path: Path, out_dir: Path, name: str) -> dict:
    """Write the ONNX model ``onnx_path`` as the NNEF folder ``out_dir``; return a summary (layers, variables).

    The input must have its batch axis (``[N, ...]``, docs/zoo.md): NNEF
    tensors always carry it, and it is written as 1.
    """
    import nnef
    import onnx

    source = Path(onnx_path).name
    model = onnx.load(str(onnx_path))
    consts = {init.name for init in model.graph.initializer}
    inputs = [value for value in model.graph.input if value.name not in consts]
    if len(inputs) != 1 or len(model.graph.output) != 1:
        raise ModelError(f"{source}: NNEF export needs one input and one output")
    dims = inputs[0].type.tensor_type.shape.dim
    if not dims or not (dims[0].HasField("dim_param") or not dims[0].HasField("dim_value")
                        or (dims[0].dim_value == 1 and len(dims) in (2, 4))):
        raise ModelError(f"{source}: NNEF export needs an input with a batch axis ([N, ...], docs/zoo.md)")
    dims[0].Clear()
    dims[0].dim_value = 1
    for value in model.graph.output:
        if value.type.tensor_type.HasField("shape") and value.type.tensor_type.shape.dim:
            value.type.tensor_type.shape.dim[0].Clear()
            value.type.tensor_type.shape.dim[0].dim_value = 1
    model = onnx.shape_inference.infer_shapes(model)
    writer = _Writer(model, source)
    x = writer.fresh(inputs[0].name)
    writer.names[inputs[0].name] = x
    for node in model.graph.node:
        if node.op_type == "Constant":
            from onnx import numpy_helper

            writer.consts[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
            continue
        handler = _WRITERS.get(node.op_type)
        if handler is None or node.domain not in ("", "ai.onnx"):
            raise writer.reject(node, "is not supported by the NNEF writer")
        if not node.name:
            node.name = f"{node.op_type.lower()}_{len(writer.lines)}"
        handler(writer, node)
    output = model.graph.output[0].name
    if output not in writer.names:
        raise ModelError(f"{source}: the output '{output}' is not computed from the input")
    result = writer.names[output]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.dat"):
        stale.unlink()
    for ident, data in writer.variables.items():
        with open(out_dir / f"{ident}.dat", "wb") as stream:
            nnef.write_tensor(stream, data)
    declarations = [f"{x} = external<scalar>(shape = {_shape(writer.shapes[inputs[0].name])});"]
    declarations += [f"{ident} = variable<scalar>(shape = {_shape(data.shape)}, label = '{ident}');"
                     for ident, data in writer.variables.items()]
    text = [f"# {identifier(name)}: written by Assay from {source}. Layout NCHW (batch axis 1); every padding is",
            "# given per side, every border rule and activation explicitly (docs/nnef.md).",
            "version 1.0;", "", f"graph {identifier(name)}({x}) -> ({result})", "{",
            *(f"    {line}" for line in declarations + writer.lines), "}", ""]
    (out_dir / GRAPH_FILE).write_text("\n".join(text))
    return {"graph": str(out_dir / GRAPH_FILE), "layers": len(writer.lines), "variables": len(writer.variables),
            "input": x, "output": result}
