"""The ONNX backend node tests as a conformance suite: ``assay conformance --suite onnx-node``.

ONNX backends prove conformance with these cases (the ONNX Backend Scoreboard counts them). Their generators
ship with the installed ``onnx`` package (``onnx.backend.test.case.node``: one module per op whose
``export`` functions build a one-node model and compute its inputs and expected outputs with NumPy), so
nothing is downloaded: the module of each op in ``OPS`` is imported and its cases kept when every node's op
is in ``OPS`` (the CNN and MLP inference ops of issue 26; none in training mode) and the first input and an
output are float32. A
case with several float32 outputs (Split) becomes one case per output, ``<case>.<output>``, each a model
exposing that output alone; other outputs (MaxPool's int64 indices) are left out.

Each case is prepared as a model the harness can run (``prepare``): the first input is the data; every
other input (a weight, a bias, a shape, axes, scales) becomes an initialiser holding the case's value. A
batch is split into samples when the samples are independent: ONNX Runtime, fed each sample alone and the
batch twice over, must give the case's expected outputs (a Softmax over axis 0, or an Add whose other
operand varies along axis 0, fails this and keeps its declared shape as one sample). A split model's first
axis is symbolic, which the loader and the generator's front end read as the batch axis (docs/zoo.md).
Prepared cases are cached in ``<work>/onnx-node/<onnx version>/`` with ``cases.json``, so collecting
(about 25 s for every op) happens once per onnx version.

Every case then runs through every selected generator and variant on the host (``harness.core.pipeline``:
generate, build, run in the host runner's worker process) on the case's own inputs, and is compared with
both the case's expected outputs (``expected``) and ONNX Runtime (``onnxruntime``) with the case's own
tolerance (rtol 1e-3, atol 1e-7, the backend test runner's). A generator's refusal is ``not supported``,
and so is a case the harness cannot load (several outputs, an input that is not float32 data).

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
from harness.digests import digest
from harness.errors import USER_ERRORS, ConfigError, ModelError, NotSupported
from harness.stages.conformance.run import Settings, combine, write_document

SUITE = "onnx-node"
CACHE_DIR = "onnx-node"
PREPARER_VERSION = 3
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


def collect(ops: tuple[str, ...] = OPS) -> list[tuple[str, object]]:
    """(op, onnx TestCase) of every float32 node case of ``ops`` whose nodes all have ops in ``OPS``."""
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
            if (all(node.op_type in OPS and node.domain in ("", "ai.onnx") and not _training(node)
                    for node in graph.node)
                    and graph.input and graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
                    and any(np.asarray(o).dtype == np.float32 for o in outputs)):
                found.append((op, case))
    return found


def _training(node) -> bool:
    """A node in training mode (BatchNormalization's batch statistics): not inference, not in the suite."""
    return any(attribute.name == "training_mode" and attribute.i for attribute in node.attribute)


def outputs_of(case) -> list[int]:
    """The indices of the case's float32 outputs (MaxPool's int64 indices are left out)."""
    return [k for k, output in enumerate(case.data_sets[0][1]) if np.asarray(output).dtype == np.float32]


def prepare(op: str, case, output: int, name: str, folder: Path) -> NodeCase:
    """Write ``folder/<name>.onnx`` (other inputs as initialisers, only output ``output``, axis 0 symbolic
    when the batch splits) and ``folder/data.npz``; return the prepared case."""
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    graph = model.graph
    inputs, outputs = case.data_sets[0]
    values = dict(zip([value.name for value in graph.input], inputs))
    for value in list(graph.input)[1:]:
        graph.initializer.append(numpy_helper.from_array(np.asarray(values[value.name]), value.name))
        graph.input.remove(value)
    kept = graph.output[output]
    for value in [value for value in graph.output if value is not kept]:
        graph.output.remove(value)
    x, expected = np.asarray(inputs[0]), np.asarray(outputs[output])
    split = _separable(model, x, expected, case.rtol, case.atol)
    if split:
        for value in [graph.input[0], *graph.output]:
            value.type.tensor_type.shape.dim[0].dim_param = "N"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.onnx"
    path.write_bytes(model.SerializeToString(deterministic=True))
    np.savez(folder / "data.npz", x=x, expected=expected)
    return NodeCase(name, op, str(path), str(folder / "data.npz"), split, float(case.rtol), float(case.atol))


def _separable(model, x: np.ndarray, expected: np.ndarray, rtol: float, atol: float) -> bool:
    """Whether axis 0 of the data is a batch of independent samples: with axis 0 made symbolic, ONNX Runtime
    gives the expected output for each sample alone and for the batch repeated twice."""
    import onnx
    import onnxruntime

    if x.ndim < 2 or expected.ndim < 1 or expected.shape[0] != x.shape[0]:
        return False
    trial = onnx.ModelProto()
    trial.CopyFrom(model)
    for value in [trial.graph.input[0], *trial.graph.output]:
        value.type.tensor_type.shape.dim[0].dim_param = "N"
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 4  # a refused trial is the answer, not a warning for the user
    try:
        session = onnxruntime.InferenceSession(trial.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        alone = [session.run(None, {name: x[k:k + 1]}) for k in range(len(x))]
        twice = session.run(None, {name: np.concatenate([x, x])})
    except Exception:  # noqa: BLE001 - ONNX Runtime refuses a symbolic axis the op cannot take: not separable
        return False

    def close(got: np.ndarray, want: np.ndarray) -> bool:
        return got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol)

    one_by_one = np.concatenate([run[0] for run in alone])
    return close(one_by_one, expected) and close(twice[0], np.concatenate([expected, expected]))


def cases(work_dir: Path, patterns: list[str] | None = None) -> list[NodeCase]:
    """The prepared cases (prepared and cached on first use), those matching ``patterns`` when given; a
    pattern matching no case is a ConfigError naming it."""
    import onnx

    # the op list is part of the key: an op added to OPS must not be missing from an older cache's cases
    folder = Path(work_dir) / CACHE_DIR / f"onnx-{onnx.__version__}-v{PREPARER_VERSION}-{digest(OPS)[:8]}"
    index = folder / "cases.json"
    folder.mkdir(parents=True, exist_ok=True)
    with exclusive(folder / ".prepare.lock"):  # one process prepares, the others wait and read the index
        if not index.is_file():
            prepared = []
            for op, case in collect():
                outputs = outputs_of(case)
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
    stage_settings = plan.Settings(work_dir=settings.work_dir / "onnx-node-runs", timeout=settings.timeout or 600.0)
    data = np.load(case.data)
    try:
        model = plan.load_model(case.model, stage_settings)
        samples = data["x"].reshape(-1, *model.input_shape)
        expected = data["expected"].reshape(len(samples), *model.output_shape)
        variants = generator.variants(model)
    except (ModelError, ValueError) as error:  # a case the harness cannot express: no generator can be asked
        cause = str(error).replace(case.model, Path(case.model).name)  # the case's file, not the cache's path
        return [{"case": case.name, "generator": generator.name, "variant": UNLOADED, "verdict": NOT_SUPPORTED,
                 "max_abs_error": None, "errors": {}, "cause": f"not loaded: {cause}"}]
    wanted = {EXPECTED: expected, "onnxruntime": _reference("onnxruntime", model, samples)}
    exact = functools.cache(lambda: _float64(case, model, samples))  # once per case, only if some C ran
    results = []
    for variant in variants:
        item = Item(case.model, generator.name, variant, TARGET, REFERENCES)
        outputs, verdict, cause = None, ERROR, None
        try:
            code = generate_code(item, model, stage_settings, {}, {})
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
        records = [_record(reference, outputs, wanted[reference], verdict, cause, case) for reference in REFERENCES]
        if outputs is not None:
            records = [_judge_reference(r, outputs, wanted, exact(), case) for r in records]
        result = combine(case.name, generator.name, variant, records)
        defects = [f"{r['reference']}: {r['reference_defect']}" for r in records if r.get("reference_defect")]
        if defects:
            result["reference_defects"] = defects
        if outputs is not None:
            result["arbiter"] = _arbitrate(outputs, wanted, exact())
        results.append(result)
    return results


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
