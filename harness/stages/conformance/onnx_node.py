"""The ONNX backend node tests as a conformance suite: ``assay conformance --suite onnx-node``.

ONNX backends prove conformance with these cases (the ONNX Backend Scoreboard counts them). Their generators
ship with the installed ``onnx`` package (``onnx.backend.test.case.node``: one module per op whose
``export`` functions build a one-node model and compute its inputs and expected outputs with NumPy), so
nothing is downloaded: the module of each op in ``OPS`` is imported and its cases kept when every node's op
is in ``OPS`` (the CNN and MLP inference ops of issue 26; none in training mode) and the first input and an
output are float32; a case of a quantized op (``QUANTIZED``, issue 42) is kept whatever its types (below). A
case with several float32 outputs (Split) becomes one case per output, ``<case>.<output>``, each a model
exposing that output alone; other outputs (MaxPool's int64 indices) are left out.

Each case is prepared as a model the harness can run (``prepare``): the first input is the data; every
other input (a weight, a bias, a shape, axes, scales) becomes an initialiser holding the case's value. A
batch is split into samples when the samples are independent: ONNX Runtime, fed each sample alone and the
batch twice over, must give the case's expected outputs (a Softmax over axis 0, or an Add whose other
operand varies along axis 0, fails this and keeps its declared shape as one sample). A split model's first
axis is symbolic, which the loader and the generator's front end read as the batch axis (docs/zoo.md).
Quantized cases (docs/conformance.md, "Quantized cases"), prepared by the same rule (scales and zero points become
initialisers), plus: the data input and the output must be of a type Assay's float32 ABI carries, one whose every
value is a float32 (float32, the 8-, 16-, 4- and 2-bit integers, float8, float4, float16: each value as it is;
docs/quantized.md, "Integer graph inputs and outputs"), or ConvInteger's and MatMulInteger's int32 output when a
range proof bounds it by 2^24 (``_int32_refusal``); any other is refused at preparation by name (``refused``: not
supported, never a failure). ONNX Runtime's refusal of a quantized case in its own words ("not supported") is judged
by the integer arbiter (``_unavailable``). Every output of a quantized case is a case of its own, as Split's. A case
ONNX Runtime has no kernel for at its declared opset (QuantizeLinear-28) is declared at the newest lower opset it
loads, when ONNX's reference evaluator gives the expected output there bit for bit (``_runnable``; recorded as
``opset``); one it has no kernel for at any opset (float4e2m1) is compared with its expected outputs alone, and its
result says why (``_no_kernel``, ``unavailable_references``).
Prepared cases are cached in ``<work>/onnx-node/<onnx version>/`` with ``cases.json``, so collecting
(about 25 s for every op) happens once per onnx version.

Every case then runs through every selected generator and variant on the host (``harness.core.pipeline``:
generate, build, run in the host runner's worker process) on the case's own inputs, and is compared with
both the case's expected outputs (``expected``) and ONNX Runtime (``onnxruntime``) with the case's own
tolerance (rtol 1e-3, atol 1e-7, the backend test runner's). A generator's refusal is ``not supported``,
and so is a case the harness cannot load or prepare (a dimension of size 0, a type the ABI does not carry).

A quantized case is compared bit for bit (tolerance 0) and judged by the integer arbiter
(``harness.references.integer``) instead of float64 (``_judge_integer``): a reference that differs from the C passes,
with ``rule_difference`` saying why, only at an op that requantizes (``REQUANTIZING``) when the C equals the arbiter
under the rule its manifest declares bit for bit, the reference is within 1 LSB of the C everywhere (the most two
roundings of one requantization can differ) and ONNX Runtime equals the arbiter under its own rule. ONNX's
expected outputs round the float product half to even, the C follows TFLite's fixed-point rule: where they differ
the arbiter, not the expected output, decides.

Every result whose C ran also gets the float64 arbiter's figure (``arbiter``: |C - f64|, |ONNX Runtime - f64|
and |expected - f64|, max over the case's samples, and which is closest; ``harness.core.arbiter``), the case's
graph evaluated in float64 by ``harness.references.float64``, or ``{"error": "arbiter not available: <cause>"}``
naming the op and attribute it lacks, shown on stderr and in conformance.md, never silent. The arbiter changes
one verdict only: when ONNX Runtime alone disagrees (the C within the case's tolerance of the expected
outputs and of float64, the expected outputs within it of float64, ONNX Runtime outside it), ONNX Runtime is
the one in defect, not the generator: its record passes with ``reference_defect`` saying so, and the result
lists it (``reference_defects``; e.g. Resize ``align_corners`` downsampling, where ONNX Runtime divides by the
rounded output length and ONNX's reference by the exact one, onnx/onnx#2462). A C that departs from float64
as ONNX Runtime does still fails against the expected outputs.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from harness import generators, references, runners, targets
from harness.core import plan
from harness.core.arbiter import closest
from harness.core.locks import exclusive
from harness.core.oracle import ERROR, FAIL, NOT_SUPPORTED, PASS, compare
from harness.core.pipeline import build_code, from_code_layout, generate_code, to_code_layout
from harness.core.plan import UNLOADED, Item
from harness.core.quantized import not_applicable, quantization_rule, reference_name
from harness.digests import digest
from harness.errors import USER_ERRORS, ConfigError, ModelError, NotSupported
from harness.references.integer import ONNXRUNTIME
from harness.stages.conformance.run import Settings, combine, write_document
from harness.tensors import abi_dtype

SUITE = "onnx-node"
CACHE_DIR = "onnx-node"
PREPARER_VERSION = 5
EXPECTED = "expected"  # the case's own expected outputs, a reference beside ONNX Runtime
REFERENCES = (EXPECTED, "onnxruntime")
ARBITER = "float64"  # the reference registry's float64 evaluation of the case's graph
UNAVAILABLE = "arbiter not available"
STDERR_LINES = 10  # more results without an arbiter figure than this: one summary line on stderr
TARGET = "host"

# The ops of CNN and MLP inference: those issue 26 lists, and the arithmetic, activations and shape ops
# such networks are made of.
OPS = ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Gemm", "MatMul",
       "BatchNormalization", "Relu", "LeakyRelu", "Elu", "Selu", "Sigmoid", "Tanh", "Softplus", "Softsign",
       "Softmax", "LogSoftmax", "HardSigmoid", "HardSwish", "PRelu", "Exp", "Log", "Sqrt", "Neg", "Abs",
       "Reciprocal", "Sum", "Max", "Min", "Mean", "Add", "Sub", "Mul", "Div", "ReduceMean", "ReduceMax",
       "ReduceSum", "ReduceL2", "Slice", "Split", "Concat", "Resize", "Upsample", "LRN", "Clip", "Flatten",
       "Reshape", "Transpose", "Pad", "Identity", "Gelu")
# The quantized ops (issue 42, docs/quantized.md): every case of their modules is kept whatever its types, and a type
# the ABI cannot carry is refused by name at preparation (module docstring).
QUANTIZED = ("QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
             "DynamicQuantizeLinear")
# The ops that requantize an int32 accumulator: where Assay's fixed-point rule and a float rounding may differ by
# 1 LSB (docs/quantized.md, "How far the two rules can differ").
REQUANTIZING = ("QLinearConv", "QLinearMatMul")
# ONNX Runtime's own words when it has no kernel for what a quantized case declares (``_unavailable``).
REFUSED_BY_REFERENCE = ("is not supported", "not supported now", "NOT_IMPLEMENTED")
# An int32 output (ConvInteger, MatMulInteger) crosses the ABI when a range proof bounds it by this: every integer up
# to 2^24 is a float32 (``_int32_refusal``).
EXACT_INT32 = 2**24
# The case module of an op whose module is not named ``op.lower()``.
_MODULES = {"BatchNormalization": "batch_normalization"}
_COLLECTED: dict[str, list] = {}  # op -> its TestCases, this process's (a module runs its exports once)


@dataclass(frozen=True)
class NodeCase:
    """One prepared node case: its model file, its samples and expected outputs (``data``), how it was made."""

    name: str
    op: str
    model: str  # the prepared .onnx file
    data: str  # .npz: x (the data input as given), expected (the first output as given)
    split: bool  # the batch (axis 0) is split into samples
    rtol: float
    atol: float
    quantized: bool = False  # a case of a QUANTIZED op: compared bit for bit, judged by the integer arbiter
    refused: str | None = None  # why the case cannot be made a model (a type the ABI does not carry): not supported
    opset: int | None = None  # the opset the model declares instead of the case's, for ONNX Runtime (``_runnable``)
    no_kernel: str | None = None  # why ONNX Runtime cannot run the case at any opset (``_no_kernel``): not compared


def collect(ops: tuple[str, ...] = OPS + QUANTIZED) -> list[tuple[str, object]]:
    """(op, onnx TestCase) of every node case of ``ops`` whose nodes all have ops in ``OPS`` or ``QUANTIZED``: of a
    float op, when its first input and an output are float32; of a quantized op, every one."""
    import importlib

    import onnx
    import onnx.backend.test.case.node as node_cases

    node_cases._TargetOpType = None  # noqa: SLF001 - the generators' own filter: none, every case of the module
    found = []
    for op in ops:
        if op not in _COLLECTED:
            before = len(node_cases._NodeTestCases)  # noqa: SLF001 - where the generators append their cases
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # NumPy overflow warnings of the generators' own expectations
                importlib.import_module(f"onnx.backend.test.case.node.{_MODULES.get(op, op.lower())}")
            _COLLECTED[op] = node_cases._NodeTestCases[before:]  # noqa: SLF001
        for case in _COLLECTED[op]:
            graph = case.model.graph
            inputs, outputs = case.data_sets[0]
            if (all(node.op_type in OPS + QUANTIZED and node.domain in ("", "ai.onnx") and not _training(node)
                    for node in graph.node)
                    and (op in QUANTIZED or graph.input and graph.input[0].type.tensor_type.elem_type ==
                         onnx.TensorProto.FLOAT and any(np.asarray(o).dtype == np.float32 for o in outputs))):
                found.append((op, case))
    return found


def _training(node) -> bool:
    """A node in training mode (BatchNormalization's batch statistics): not inference, not in the suite."""
    return any(attribute.name == "training_mode" and attribute.i for attribute in node.attribute)


def outputs_of(case, op: str) -> list[int]:
    """The indices of the case's outputs: float32 ones (MaxPool's int64 indices are left out); of a quantized op,
    every one (a type the ABI does not carry is refused at preparation)."""
    return [k for k, output in enumerate(case.data_sets[0][1])
            if op in QUANTIZED or np.asarray(output).dtype == np.float32]


def _abi_refusal(case, output: int) -> str | None:
    """Why the case's data input or output ``output`` cannot cross the float32 ABI (its type is not one whose every
    value is a float32, ``harness.tensors.ABI_ELEMENT_TYPES``, or the case's values are not of it), or None."""
    from onnx import TensorProto

    graph = case.model.graph
    inputs, outputs = case.data_sets[0]
    for role, value, data in (("data input", graph.input[0], inputs[0]),
                              ("output", graph.output[output], outputs[output])):
        elem_type = value.type.tensor_type.elem_type
        if role == "output" and elem_type == TensorProto.INT32 and _array(data).dtype == np.int32:
            return _int32_refusal(case)
        if abi_dtype(elem_type) is None or _array(data).dtype != abi_dtype(elem_type):
            return f"its {role} '{value.name}' is {TensorProto.DataType.Name(elem_type)}; the ABI carries float32 " \
                   "and the types whose every value is a float32 (8-, 16-, 4- and 2-bit integers, float8, float4, " \
                   "float16)"
    return None


def _int32_refusal(case) -> str | None:
    """Why the int32 output of a ConvInteger or MatMulInteger case is not carried exactly by the float32 ABI, or None
    when a range proof shows every output value has |y| <= 2^24 (so it is a float32): the data input ranges over its
    type, the weights and zero points are the case's constants (inputs 1, 2 and 3), and no output exceeds the sum
    over a channel's taps of |w - w_zp| max |x - x_zp|. The C writes ``(float) y``, the references' int32 outputs
    are converted the same way, and both are compared bit for bit (docs/quantized.md, "int32 outputs")."""
    graph = case.model.graph
    inputs = case.data_sets[0][0]
    if len(graph.node) != 1 or graph.node[0].op_type not in ("ConvInteger", "MatMulInteger"):
        return f"its output '{graph.output[0].name}' is INT32 and not ConvInteger's or MatMulInteger's; no range " \
               "proof of it"
    x, w = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
    zeros = [np.asarray(inputs[k]).astype(np.int64) if len(inputs) > k else np.zeros(1, np.int64) for k in (2, 3)]
    if x.dtype not in (np.int8, np.uint8):
        return f"its data input is {x.dtype}; the range proof of an int32 output takes int8 and uint8 inputs"
    info = np.iinfo(x.dtype)
    reach = max(abs(int(info.min) - int(zeros[0].reshape(-1)[0])), abs(int(info.max) - int(zeros[0].reshape(-1)[0])))
    channel = 0 if graph.node[0].op_type == "ConvInteger" else w.ndim - 1  # per-channel weight zero points
    w_zero = zeros[1].reshape(-1)
    shape = [w_zero.size if k == channel else 1 for k in range(w.ndim)]
    taps = np.moveaxis(np.abs(w - w_zero.reshape(shape)), channel, 0).reshape(w.shape[channel], -1).sum(axis=1)
    bound = int(taps.max(initial=0)) * reach
    if bound > EXACT_INT32:
        return f"its output '{graph.output[0].name}' is INT32 and can reach |y| = {bound} (from the input's range, " \
               f"the weights and zero points), above 2^24 = {EXACT_INT32}: not every value is a float32"
    return None


def _array(data) -> np.ndarray:
    """A case's input or output as an array: the case generators give float8, int4, int2 and float4 values as
    TensorProtos."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(data) if isinstance(data, TensorProto) else np.asarray(data)


def prepare(op: str, case, output: int, name: str, folder: Path) -> NodeCase:
    """Write ``folder/<name>.onnx`` (other inputs as initialisers, only output ``output``, axis 0 symbolic
    when the batch splits) and ``folder/data.npz``; return the prepared case (refused, without files, when its
    data or output cannot cross the ABI)."""
    import onnx
    from onnx import numpy_helper

    quantized = op in QUANTIZED
    refused = _abi_refusal(case, output) if quantized else None
    if refused:
        return NodeCase(name, op, "", "", False, float(case.rtol), float(case.atol), quantized, refused)

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    inputs, outputs = case.data_sets[0]
    values = dict(zip([value.name for value in graph.input], inputs))
    for value in list(graph.input)[1:]:
        graph.initializer.append(numpy_helper.from_array(_array(values[value.name]), value.name))
        graph.input.remove(value)
    kept = graph.output[output]
    for value in [value for value in graph.output if value is not kept]:
        graph.output.remove(value)
    x, expected = _array(inputs[0]), _array(outputs[output])
    opset = _runnable(model, x, expected) if quantized else None
    no_kernel = _no_kernel(model) if quantized and opset is None else None
    split = _separable(model, x, expected, case.rtol, case.atol)
    if split:
        for value in [graph.input[0], *graph.output]:
            value.type.tensor_type.shape.dim[0].dim_param = "N"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.onnx"
    path.write_bytes(model.SerializeToString(deterministic=True))
    np.savez(folder / "data.npz", x=x.astype(np.float32), expected=expected.astype(np.float32))  # exact (the ABI)
    rtol, atol = (0.0, 0.0) if quantized else (float(case.rtol), float(case.atol))  # integer arithmetic: bit for bit
    return NodeCase(name, op, str(path), str(folder / "data.npz"), split, rtol, atol, quantized, opset=opset,
                    no_kernel=no_kernel)


def _session(model):
    """An ONNX Runtime session of ``model`` (one thread, quiet), or the exception that refused it."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # a refused trial is the answer, not a warning for the user
    try:
        return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 - the caller decides what a refusal means
        return error


def _runnable(model, x: np.ndarray, expected: np.ndarray) -> int | None:
    """A quantized case ONNX Runtime has no kernel for at its declared opset (onnx 1.23 writes QuantizeLinear-28,
    ONNX Runtime 1.32 implements up to 25): ``model`` re-declared in place at the newest lower opset ONNX Runtime
    loads, at which ONNX's own reference evaluator gives the case's expected output bit for bit (the later versions
    add types and attributes only); that opset, or None when the model is kept as it is."""
    from onnx.reference import ReferenceEvaluator

    declared = model.opset_import[0].version
    if not isinstance(_session(model), Exception):
        return None
    trial = type(model)()
    for opset in range(declared - 1, 9, -1):
        trial.CopyFrom(model)
        trial.opset_import[0].version = opset
        if isinstance(_session(trial), Exception):
            continue
        (value,) = ReferenceEvaluator(trial).run(None, {trial.graph.input[0].name: x})
        if np.asarray(value).dtype == expected.dtype and np.array_equal(value, expected):
            model.opset_import[0].version = opset
            return opset
        return None
    return None


def _no_kernel(model) -> str | None:
    """Why ONNX Runtime cannot run ``model`` at all: it has no kernel for it (NOT_IMPLEMENTED) at its declared opset
    and loads it at no lower one (ONNX Runtime 1.32 has no float4e2m1 QuantizeLinear, DequantizeLinear or Cast); None
    when it loads at some opset or refuses it for another reason (an error then, as any reference's)."""
    import onnxruntime

    declared = model.opset_import[0].version
    trial = type(model)()
    first = None
    for opset in range(declared, 9, -1):
        trial.CopyFrom(model)
        trial.opset_import[0].version = opset
        error = _session(trial)
        if not isinstance(error, Exception):
            return None
        first = first or str(error)
    if "NOT_IMPLEMENTED" not in first:
        return None
    reason = first.split("NOT_IMPLEMENTED :", 1)[1].strip().split(". ")[0]
    return f"onnxruntime {onnxruntime.__version__} has no kernel for it at opset {declared} nor loads it at a lower " \
           f"one ({reason})"


def _separable(model, x: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether axis 0 of the data is a batch of independent samples: with axis 0 made symbolic, ONNX Runtime
    gives the expected output for each sample alone and for the batch repeated twice."""
    import onnx

    if x.ndim < 2 or expected.ndim < 1 or expected.shape[0] != x.shape[0]:
        return False
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    for value in [trial.graph.input[0], *trial.graph.output]:
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    session = _session(trial)
    try:
        if isinstance(session, Exception):
            raise session
        name = session.get_inputs()[0].name
        alone = [session.run(None, {name: x[k:k + 1]}) for k in range(len(x))]
        twice = session.run(None, {name: np.concatenate([x, x])})
    except Exception:  # noqa: BLE001 - ONNX Runtime refuses a symbolic axis the op cannot take: not separable
        return False

    def close(got: np.ndarray, want: np.ndarray) -> bool:  # in float64: uint8 differences would wrap
        return got.shape == want.shape and np.allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)

    one_by_one = np.concatenate([run[0] for run in alone])
    expected = expected.astype(np.float64)
    return close(one_by_one, expected) and close(twice[0], np.concatenate([expected, expected]))


def cases(work_dir: Path, patterns: list[str] | None = None) -> list[NodeCase]:
    """The prepared cases (prepared and cached on first use), those matching ``patterns`` when given; a
    pattern matching no case is a ConfigError naming it."""
    import onnx

    # the op list is part of the key: an op added to OPS must not be missing from an older cache's cases
    folder = Path(work_dir) / CACHE_DIR / f"onnx-{onnx.__version__}-v{PREPARER_VERSION}-{digest(OPS + QUANTIZED)[:8]}"
    index = folder / "cases.json"
    folder.mkdir(parents=True, exist_ok=True)
    with exclusive(folder / ".prepare.lock"):  # one process prepares, the others wait and read the index
        if not index.is_file():
            prepared = []
            for op, case in collect():
                outputs = outputs_of(case, op)
                for output in outputs:
                    name = case.name if len(outputs) == 1 else f"{case.name}.{case.model.graph.output[output].name}"
                    prepared.append(prepare(op, case, output, name, folder / name))
            temporary = index.with_name(f".{index.name}.tmp")
            temporary.write_text(json.dumps([asdict(case) for case in prepared], indent=1) + "\n")
            temporary.replace(index)
    prepared = [NodeCase(**entry) for entry in json.loads(index.read_text())]
    if not patterns:
        return prepared
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(case.name, p) for case in prepared)]
    if unmatched:
        raise ConfigError(f"no onnx-node case matches {', '.join(repr(p) for p in unmatched)} "
                          f"({len(prepared)} cases, e.g. test_relu, test_conv_with_strides_padding)")
    return [case for case in prepared if any(fnmatch.fnmatchcase(case.name, p) for p in patterns)]


def run_case(case: NodeCase, spec: str, settings: Settings) -> list[dict]:
    """One result per variant of generator ``spec`` for ``case`` (``combine``d over both references)."""
    generator = generators.get(spec)
    if case.refused:
        return [{"case": case.name, "generator": generator.name, "variant": UNLOADED, "verdict": NOT_SUPPORTED,
                 "max_abs_error": None, "errors": {}, "cause": f"not prepared: {case.refused}"}]
    stage_settings = plan.Settings(work_dir=settings.work_dir / "onnx-node-runs", timeout=settings.timeout or 600.0)
    data = np.load(case.data)
    try:
        model = plan.load_model(case.model, stage_settings)
        # the ABI's float32 values: an int8/uint8 input or output as its integers (exact)
        samples = data["x"].astype(np.float32).reshape(-1, *model.input_shape)
        expected = data["expected"].astype(np.float32).reshape(len(samples), *model.output_shape)
        variants = generator.variants(model)
    except (ModelError, ValueError) as error:  # a case the harness cannot express: no generator can be asked
        cause = str(error).replace(case.model, Path(case.model).name)  # the case's file, not the cache's path
        return [{"case": case.name, "generator": generator.name, "variant": UNLOADED, "verdict": NOT_SUPPORTED,
                 "max_abs_error": None, "errors": {}, "cause": f"not loaded: {cause}"}]
    compared = (EXPECTED,) if case.no_kernel else REFERENCES  # a reference with no kernel for the case: named
    wanted = {EXPECTED: expected}
    if "onnxruntime" in compared:
        wanted["onnxruntime"] = _reference("onnxruntime", model, samples)
    exact = functools.cache(lambda: _float64(case, model, samples))  # once per case, only if some C ran
    integer = functools.cache(lambda rule: _reference(reference_name(rule), model, samples))  # quantized cases
    results = []
    for variant in variants:
        item = Item(case.model, generator.name, variant, TARGET, REFERENCES)
        outputs, verdict, cause, rule = None, ERROR, None, None
        try:
            code = generate_code(item, model, stage_settings, {}, {})
            rule = quantization_rule(code.manifest)
            built = build_code(item, TARGET, code, stage_settings, {}, {})
            outcome = runners.for_kind(targets.get(TARGET).kind).run(built, to_code_layout(samples, model, code),
                                                                     stage_settings.timeout)
            outputs = from_code_layout(outcome.outputs, model, code)
        except NotSupported as error:
            verdict, cause = NOT_SUPPORTED, str(error)
        except USER_ERRORS as error:
            cause = str(error)
        except Exception as error:  # noqa: BLE001 - a fault is this case's verdict, not the suite's end
            cause = f"internal error: {type(error).__name__}: {error}"
        records = [_record(reference, outputs, wanted[reference], verdict, cause, case) for reference in compared]
        if outputs is not None and case.quantized:
            records = [_judge_integer(r, outputs, wanted, rule, integer, case) for r in records]
        elif outputs is not None:
            records = [_judge_reference(r, outputs, wanted, exact(), case) for r in records]
        result = combine(case.name, generator.name, variant, records)
        for key in ("reference_defect", "rule_difference", "reference_unavailable"):
            notes = [f"{r['reference']}: {r[key]}" for r in records if r.get(key)]
            if notes:
                result[f"{key}s"] = notes
        if case.no_kernel:
            result["unavailable_references"] = [f"onnxruntime: {case.no_kernel}"]
        if outputs is not None:
            result["arbiter"] = _integer_arbiter(outputs, wanted, rule, integer) if case.quantized else \
                _arbitrate(outputs, wanted, exact())
        results.append(result)
    return results


def _judge_integer(record: dict, outputs: np.ndarray, wanted: dict, rule: str | None, integer, case: NodeCase) -> dict:
    """A quantized case's record as it is (bit for bit), unless the C and the reference differ only where the
    rounding rules do (module docstring): a case of a requantizing op whose C equals the integer arbiter under the
    rule its manifest declares bit for bit, the reference within 1 LSB of the C everywhere, and ONNX Runtime equal
    to the arbiter under its own rule. Then a pass saying why they differ (``rule_difference``)."""
    if record["verdict"] == ERROR:
        return _unavailable(record, outputs, wanted, rule, integer)
    if record["verdict"] != FAIL or case.op not in REQUANTIZING:
        return record
    why_not = not_applicable(rule)
    mine = integer(rule) if why_not is None else why_not
    if isinstance(mine, str) or not np.array_equal(outputs, mine):
        return {**record, "cause": f"{record['cause']}; the C " + (
            f"is not judged by the integer arbiter: {mine}" if isinstance(mine, str) else
            f"departs from the integer arbiter under its declared rule '{rule}' by {_distance(outputs, mine):g}")}
    theirs = wanted[record["reference"]]
    apart = np.abs(outputs.astype(np.float64) - theirs)
    if apart.max(initial=0.0) > 1:
        return record
    how = "ONNX's reference rounds the float product half to even"
    if record["reference"] != EXPECTED:
        own = integer(ONNXRUNTIME)
        if isinstance(own, str) or not np.array_equal(theirs, own):
            return {**record, "cause": f"{record['cause']}; {record['reference']} departs from the integer arbiter "
                                       f"under its own rule '{ONNXRUNTIME}'"}
        how = f"{record['reference']} equals the integer arbiter under its own rule '{ONNXRUNTIME}' bit for bit"
    return {**record, "verdict": PASS, "cause": None,
            "rule_difference": f"differs from the C by 1 LSB at {int(np.count_nonzero(apart))} of {apart.size} "
                               f"outputs, where the rounding rules differ: the C equals the integer arbiter under "
                               f"its declared rule '{rule}' bit for bit; {how}"}


def _unavailable(record: dict, outputs: np.ndarray, wanted: dict, rule: str | None, integer) -> dict:
    """ONNX Runtime's erring record of a quantized case it refuses in its own words (``REFUSED_BY_REFERENCE``: no
    kernel for what the case declares, e.g. ConvInteger's per-channel weight zero points) as it is, unless the C, the
    case's expected outputs and the integer arbiter under the C's declared rule all agree bit for bit: then a pass
    naming the refusal (``reference_unavailable``), the exact arbiter standing in for ONNX Runtime as ONNX's reference
    evaluator does at a lower opset (``_runnable``). Any other error stays an error."""
    cause = wanted.get(record["reference"])
    if record["reference"] == EXPECTED or not isinstance(cause, str) or \
            not any(words in cause for words in REFUSED_BY_REFERENCE):
        return record
    mine = integer(rule) if not_applicable(rule) is None else None
    if not isinstance(mine, np.ndarray) or not (np.array_equal(outputs, mine) and
                                                np.array_equal(wanted[EXPECTED], mine)):
        return record
    return {**record, "verdict": PASS, "cause": None, "max_abs_error": None,
            "reference_unavailable": f"{cause.strip()}; the C, the case's expected outputs and the integer arbiter "
                                     f"under the C's declared rule '{rule}' agree bit for bit"}


def _distance(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want), initial=0.0)) if got.shape == want.shape else np.inf


def _integer_arbiter(outputs: np.ndarray, wanted: dict, rule: str | None, integer) -> dict:
    """A quantized case's C, ONNX Runtime and expected outputs against the integer arbiter (``yardstick``): the C and
    the expected outputs under the C's declared rule, ONNX Runtime under its own."""
    why_not = not_applicable(rule)
    values = {"C": outputs, **wanted}
    yardsticks = {name: own for name, own in {"C": rule, EXPECTED: rule, "onnxruntime": ONNXRUNTIME}.items()
                  if name in values and not isinstance(values[name], str)}  # ONNX Runtime's only where it ran
    for name, own in yardsticks.items():
        failed = why_not or next((v for v in (integer(own), values[name]) if isinstance(v, str)), None)
        if failed:
            return {"error": f"{UNAVAILABLE}: {failed}"}
    theirs = "; onnxruntime under its own" if "onnxruntime" in yardsticks else ""
    return {"yardstick": f"integer arbiter ({rule}{theirs})",
            "errors": {name: _distance(values[name], integer(own)) if name in yardsticks else None
                       for name in ("C", EXPECTED, "onnxruntime")}}  # None: that reference did not run


def _judge_reference(record: dict, outputs: np.ndarray, wanted: dict, exact: np.ndarray | str,
                     case: NodeCase) -> dict:
    """``record`` as it is, unless it is ONNX Runtime's failure where ONNX Runtime alone departs from the case's
    expected outputs and from float64 (module docstring): then a pass naming the reference's defect."""
    if record["reference"] == EXPECTED or record["verdict"] != FAIL or isinstance(exact, str) \
            or exact.shape != outputs.shape:
        return record
    mine = wanted[record["reference"]]

    def within(values: np.ndarray, of: np.ndarray) -> bool:
        return compare(values, of, case.atol, case.rtol).verdict != FAIL

    if not (within(outputs, wanted[EXPECTED]) and within(outputs, exact) and within(wanted[EXPECTED], exact)) \
            or within(mine, exact):
        return record
    departure = float(np.max(np.abs(mine.astype(np.float64) - exact)))
    return {**record, "verdict": PASS, "cause": None,
            "reference_defect": f"departs from the case's expected outputs and from float64 by {departure:.3g}; "
                                f"the C agrees with both (C vs {record['reference']}: {record['cause']})"}


def _float64(case: NodeCase, model, samples: np.ndarray) -> np.ndarray | str:
    """The case's graph evaluated in float64 on its samples, or why not ("arbiter not available: <cause>")."""
    try:
        return references.get(ARBITER).run(model, samples)
    except USER_ERRORS as error:
        return f"{UNAVAILABLE}: {str(error).replace(case.model, Path(case.model).name)}"
    except Exception as error:  # noqa: BLE001 - the arbiter is advice: its fault is named, the case goes on
        return f"{UNAVAILABLE}: {type(error).__name__}: {error}"


def _arbitrate(outputs: np.ndarray, wanted: dict, exact: np.ndarray | str) -> dict:
    """C, ONNX Runtime and the expected outputs against float64: the figures and which is closest."""
    if isinstance(exact, str):
        return {"error": exact}
    failed = [value for value in wanted.values() if isinstance(value, str)]
    if failed:  # a reference that did not run has no distance to float64
        return {"error": f"{UNAVAILABLE}: {failed[0]}"}
    if exact.shape != outputs.shape:
        return {"error": f"{UNAVAILABLE}: float64 outputs of shape {exact.shape[1:]}, the C's {outputs.shape[1:]}"}
    return closest(outputs, {name: wanted[name] for name in ("onnxruntime", EXPECTED)}, exact).as_dict()


def _reference(name: str, model, samples: np.ndarray) -> np.ndarray | str:
    try:
        return references.get(name).run(model, samples)
    except Exception as error:  # noqa: BLE001 - the reference's failure is an error verdict, named
        return f"reference {name} failed: {type(error).__name__}: {error}"


def _record(reference: str, outputs, wanted, verdict: str, cause: str | None, case: NodeCase) -> dict:
    record = {"reference": reference, "tolerance": case.atol, "rtol": case.rtol}
    if outputs is None:
        return {**record, "verdict": verdict, "cause": cause, "max_abs_error": None}
    if isinstance(wanted, str):
        return {**record, "verdict": ERROR, "cause": wanted, "max_abs_error": None}
    comparison = compare(outputs, wanted, case.atol, case.rtol)
    return {**record, "verdict": comparison.verdict, "cause": comparison.cause,
            "max_abs_error": comparison.max_abs_error}


def run(settings: Settings, progress=print) -> dict:
    """Prepare the cases, run every selected generator on them, write ``OUT/conformance.json``; return it."""
    for spec in settings.generators:  # an unknown name fails here, before anything is prepared
        generators.get(spec)
    start = time.perf_counter()
    selected = cases(settings.work_dir, settings.patterns)
    progress(f"conformance: {len(selected)} onnx-node cases ready in {time.perf_counter() - start:.1f} s")

    def one(spec: str) -> list[dict]:
        results = []
        for number, case in enumerate(selected, 1):
            results += run_case(case, spec, settings)
            if number % 25 == 0 or number == len(selected):
                progress(f"conformance: {spec}: {number}/{len(selected)} cases")
        return results

    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:
        runs = list(pool.map(one, settings.generators))
    _show_unavailable([result for results in runs for result in results])
    import onnx

    document = {
        "suite": SUITE,
        "onnx_version": onnx.__version__,
        "generators": settings.generators,
        "references": list(REFERENCES),
        "target": TARGET,
        "cases": [{"name": case.name, "checks": case.op, "op": case.op, "split": case.split, "file": case.model}
                  for case in selected],
        "results": [_with_reproducer(result) for results in runs for result in results],
    }
    return write_document(document, settings)


def _show_unavailable(results: list[dict]) -> None:
    """One stderr line per result whose C ran without an arbiter figure (one summary line when there are many):
    shown even with --quiet, never silent."""
    missing = [r for r in results if "error" in r.get("arbiter", {})]
    if len(missing) > STDERR_LINES:
        names = ", ".join(dict.fromkeys(r["case"] for r in missing))
        print(f"conformance: {UNAVAILABLE} for {len(missing)} results (causes in conformance.md): {names}",
              file=sys.stderr)
        return
    for r in missing:
        print(f"conformance: {r['case']} / {r['generator']} ({r['variant']}): {r['arbiter']['error']}",
              file=sys.stderr)


def _with_reproducer(result: dict) -> dict:
    """A failing or erring result with the command that runs its case alone on its generator."""
    if result["verdict"] in (ERROR, FAIL):
        result["reproducer"] = {"command": f"assay conformance --suite {SUITE} --cases {result['case']} "
                                           f"--generators {result['generator']}"}
    return result
