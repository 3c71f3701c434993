"""Oracle adequacy by mutation: seeded mutants of the generated C, each built and judged like the real code.

For one (model, generator, variant) item: the code is generated, every source
is compiled once to an object, and the clean code runs on the inputs of each
of ``seeds`` input seeds (a verdict other than pass is a false alarm). Then
each mutant (``operators``) is one text edit of one file: only that file is
compiled again (gcc -O0 in the sandbox, as every build of generated C:
``harness.runners.compiling.run_compiler``) and linked with the clean objects and the
driver into an executable (``harness.runners.native``, run in the sandbox as all generated code:
``harness.sandbox``), which runs on the first ``FIRST_BATCH`` inputs
and, unless that already kills it, on all of them; the verdict is the oracle's rule (``Rule``, ``--tolerance``):
fixed, ``harness.core.oracle.compare`` against the reference outputs computed once; derived,
``|C - float64| <= bound`` per output (the semantic stage's rule, figures shared through
``harness.core.refcache``). A
crash, a hang, a damaged guard word or NaN is a kill too. A code-mutant survivor
that is not judged equivalent also runs under AddressSanitizer and UBSan
(``harness.runners.sanitized``); a report kills it. Last, its file goes through the static subscript
bounds check (``bounds``): an index that leaves its array, or the tensors its layer takes and makes in the
arena (the manifest's places), for some iteration, on a path that only some data takes (so no run saw it),
kills it too. A mutant judged equivalent by a rule that holds only in real
arithmetic (``UP_TO_ROUNDING``: softmax shift invariance) is equivalent only when its largest error is no
larger than the clean code's; otherwise it is judged like any other mutant. Survivors are classified:

- ``not_reached``: no output bit differs from the clean code's on any input (the input domain
  never exercises the change, or the mutant is equivalent without a rule that proves it);
- ``below_precision``: outputs differ, but the mutant's largest error against the reference is
  no larger than the clean code's own;
- ``tolerance``: the mutant is farther from the reference than the clean code, within the tolerance.

Why the stage builds its own objects instead of calling ``host.build`` per
mutant: that compiles every source each time, and the weights file of LeNet-5
takes ~0.5 s of the ~0.6 s; hundreds of mutants would spend minutes compiling
the same unchanged file. The flags and defines are the host profile's, the
driver and its guard words the targets' (``target_driver.c``). Why an executable
rather than the host runner's library in its Python worker: the worker's start
(~0.2 s of interpreter and cffi) was most of a small network's mutant.
"""

from __future__ import annotations

import difflib
import queue
import shutil
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import references, targets
from harness.core import inputsets, intermediate, oracle, refcache
from harness.core import plan as core_plan
from harness.core.fingerprint import item_fingerprint
from harness.core.inputs import make_inputs
from harness.core.pipeline import from_code_layout, generate_code, item_dir, to_code_layout
from harness.core.plan import Item, Plan, expand, load_model
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.digests import digest, tree_digest
from harness.errors import USER_ERRORS, AssayError, ConfigError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.runners import RunError, arenacheck, host, native, sanitized
from harness.runners.compiling import DRIVERS_DIR, driver_defines, run_compiler
from harness.targets import HOST
from harness.references import bounds as derived_bounds
from harness.references import float64
from harness.stages.mutate import bounds, detect, operators
from harness.stages.mutate.spec import SPEC

SCHEMA = SPEC.schema
KEY_FIELDS = SPEC.key_fields
FIRST_BATCH = 20  # inputs tried first: most mutants die on them, and the rest need not run
RELATIVES = (1e-3, 1e-5, 1e-7)
KILL_TARGET = 0.99  # of the non-equivalent code mutants (issue 9)
UP_TO_ROUNDING = ("softmax shift invariance",)  # rules equal in real arithmetic only: the error must not grow
DETECTORS = ("oracle", "runner", "sanitizer", "bounds")
STAGE_DIR = Path(__file__).resolve().parent
PREFERRED_REFERENCES = ("keras", "onnxruntime")
FIXED, DERIVED = "fixed", "derived"  # the oracle's rules (``--tolerance``, ``Rule``)


@dataclass(frozen=True)
class Settings(core_plan.Settings):
    """The defaults are the options' (``spec``)."""

    n_inputs: int = SPEC.default("n_inputs")
    timeout: float = SPEC.default("timeout")
    redo: bool = SPEC.default("redo")
    seeds: int = SPEC.default("seeds")  # input seeds the clean code must pass on (no false alarm)
    reference: str | None = SPEC.default("reference")  # default: the first of PREFERRED_REFERENCES supporting it
    atol: float | None = SPEC.default("atol")
    rtol: float | None = SPEC.default("rtol")
    tolerance: str = SPEC.default("tolerance")  # the oracle's rule: FIXED or DERIVED (``Rule``)
    weights_per_array: int = SPEC.default("weights_per_array")
    max_mutants: int | None = SPEC.default("max_mutants")  # a seeded sample of the mutants, for quick runs
    sanitize: int = SPEC.default("sanitize")  # inputs each survivor and the clean code run under the sanitizers
    jobs: int = SPEC.default("jobs")  # mutants judged at a time (the results do not depend on it)
    input_sets: tuple[str, ...] = SPEC.default("input_sets")  # judged on: the uniform inputs, then the other sets
    set_inputs: int = SPEC.default("set_inputs")  # inputs of each set but the uniform one

    def tolerances(self, model: Model) -> tuple[float, float]:
        return (model.tolerance if self.atol is None else self.atol,
                model.rtol if self.rtol is None else self.rtol)


def open_store(path: Path) -> ResultStore:
    return ResultStore.of(SPEC, path)


def plan(models: list[str], generator_specs: list[str], settings: Settings, variants: list[str] | None = None) -> Plan:
    """The items: every (model, generator, variant) on the host, or only the ``variants`` named."""
    campaign = expand(models, generator_specs, [HOST], settings, lambda _model, _profile: ())
    if variants:
        campaign.items = [i for i in campaign.items if i.variant in variants or i.variant == core_plan.UNLOADED]
    return campaign


def run_item(item: Item, settings: Settings, store: ResultStore) -> dict:
    """Run the mutation analysis of one item and store its record; item faults become an ``error`` record."""
    record: dict = {"model": item.model, "generator": item.generator, "variant": item.variant,
                    "n_inputs": settings.n_inputs, "seed": settings.seed, "seeds": settings.seeds}
    start = time.perf_counter()
    try:
        model = load_model(item.model, settings)
        fingerprint = item_fingerprint(item, model, settings, seeds=settings.seeds, reference=settings.reference,
                                       tolerances=settings.tolerances(model), weights=settings.weights_per_array,
                                       **({"tolerance_rule": DERIVED, "bounds": refcache.bounds_identity()}
                                          if settings.tolerance == DERIVED else {}),
                                       max_mutants=settings.max_mutants, sanitize=settings.sanitize,
                                       input_sets=list(settings.input_sets), set_inputs=settings.set_inputs,
                                       stage=tree_digest(STAGE_DIR), checks=_checks_digest())
        previous = None if settings.redo else store.find_all([record], fingerprint)
        if previous is not None:
            return previous[0]
        record.update(_analyse(item, model, settings), fingerprint=fingerprint)
    except USER_ERRORS as exc:
        record.update(verdict=oracle.ERROR, cause=str(exc))
    except Exception as exc:  # an unexpected fault is a verdict too
        record.update(verdict=oracle.ERROR, cause=f"internal error: {type(exc).__name__}: {exc}")
    record["seconds"] = time.perf_counter() - start
    store.put(record)
    return record


def _checks_digest() -> str:
    """The bytes of the code outside the stage that decides verdicts here: the arena-region check, the input sets,
    the reference's intermediate outputs, the float64 evaluation and the derived bound the weight mutants'
    detectability search uses (a change there must not reuse old records)."""
    return digest([Path(module.__file__).read_bytes().hex()
                   for module in (arenacheck, inputsets, intermediate, float64, derived_bounds)])


def reference_for(model: Model, settings: Settings) -> str:
    if settings.reference:
        if not references.get(settings.reference).supports(model):
            raise ConfigError(f"reference {settings.reference} does not support {model.name}")
        return settings.reference
    for name in PREFERRED_REFERENCES:
        if references.get(name).supports(model):
            return name
    raise ConfigError(f"no reference among {', '.join(PREFERRED_REFERENCES)} supports {model.name}")


@dataclass(frozen=True)
class Rule:
    """The oracle's verdict rule on a batch of inputs (``--tolerance``).

    fixed: every output within ``atol + rtol |reference|`` of the reference. derived: every output within the
    bound of a correct float32 implementation of the float64 evaluation, ``|C - f64| <= bound``
    (``harness.references.bounds``, the semantic stage's rule): a mutant inside the bound cannot be told, by its
    outputs alone, from some correct float32 implementation, so only one outside it is a detected defect.
    ``fallback`` says why a derived run judges by the fixed rule (an op without a bound, no float64 figure)."""

    name: str
    atol: float
    rtol: float
    exact: np.ndarray | None = None  # derived: the float64 outputs of the batch
    bound: np.ndarray | None = None  # derived: the bound of every output of the batch
    fallback: str | None = None

    def judge(self, outputs: np.ndarray, expected: np.ndarray) -> tuple[str, str | None, float | None]:
        """The verdict on the batch's first ``len(outputs)`` inputs, its cause, and the largest |C - reference|."""
        fixed = oracle.compare(outputs, expected[:len(outputs)], self.atol, self.rtol)
        if self.bound is None:
            return fixed.verdict, fixed.cause, fixed.max_abs_error
        derived = oracle.compare_to_bound(outputs, self.exact[:len(outputs)], self.bound[:len(outputs)])
        return derived.verdict, derived.cause, fixed.max_abs_error

    def above(self, outputs: np.ndarray, clean: np.ndarray) -> bool:
        """Whether a mutant's outputs leave the tolerance somewhere: fixed, farther from the clean code's than
        atol + rtol |clean|; derived, farther from float64 than the bound."""
        outputs = outputs.astype(np.float64).reshape(len(outputs), -1)
        if self.bound is None:
            clean = clean.astype(np.float64).reshape(len(outputs), -1)
            return bool(np.any(np.abs(outputs - clean) > self.atol + self.rtol * np.abs(clean)))
        return bool(np.any(np.abs(outputs - self.exact.reshape(len(outputs), -1)) >
                           self.bound.reshape(len(outputs), -1)))

    def figures(self, outputs: np.ndarray) -> dict:
        """The record's figures of the rule on ``outputs`` (the clean code's): the largest bound, |C - f64| and
        the tightness (bound / |C - f64|, smallest over outputs); only the rule's name for fixed."""
        if self.bound is None:
            return {"rule": self.name, "fallback": self.fallback}
        check = oracle.compare_to_bound(outputs, self.exact, self.bound)
        return {"rule": self.name, "fallback": None, "bound": check.bound, "c_distance": check.c_distance,
                "tightness": check.tightness}


def rule_for(model: Model, settings: Settings, inputs: np.ndarray, timings: dict, code: GeneratedCode) -> Rule:
    """The rule ``settings.tolerance`` names on ``inputs``; derived takes the float64 outputs and the bound (for the
    order of accumulation ``code``'s manifest declares) from the cache the semantic stage fills
    (``harness.core.refcache``), and falls back to fixed, saying why."""
    atol, rtol = settings.tolerances(model)
    if settings.tolerance == FIXED:
        return Rule(FIXED, atol, rtol)
    bound = refcache.derived_bound(model, settings, timings, inputs, derived_bounds.Order.from_manifest(code.manifest))
    if isinstance(bound, str):
        return Rule(FIXED, atol, rtol, fallback=bound)
    try:
        exact = refcache.reference_outputs(refcache.ARBITER, model, settings, inputs)
    except Exception as exc:  # an arbiter's fault only changes the rule, visibly
        kind = "" if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: "
        return Rule(FIXED, atol, rtol, fallback=f"arbiter not available ({kind}{exc}): {refcache.FALLBACK}")
    return Rule(DERIVED, atol, rtol, np.asarray(exact, np.float64), bound)


class _Builder:
    """The clean objects of an item's code, and libraries that swap one of them for a mutated file."""

    def __init__(self, code: GeneratedCode, work: Path, opt: str):
        self.code, self.work = code, work
        self.profile = targets.get(HOST)
        self.flags = [*self.profile.flags(opt), f"-I{code.directory}", *driver_defines(code)]
        entry = code.manifest.get("entry")
        self.entry_file = entry.get("file") if isinstance(entry, dict) else None
        self.arena_checked = arenacheck.applies(code.manifest) and self.entry_file is not None
        self.entry_lines = (code.directory / self.entry_file).read_text().count("\n") if self.arena_checked else 0
        self.objects = {}
        for source in (*code.sources, native.DRIVER):
            self.objects[source.name] = self._compile(source, work / "clean" / f"{source.name}.o")

    def _compile(self, source: Path, obj: Path) -> Path:
        """Compile ``source`` to ``obj``; the entry's file with the arena-region check around every layer
        (``harness.runners.arenacheck``) when the manifest allows it and the lines are where it says."""
        obj.parent.mkdir(parents=True, exist_ok=True)
        text = source.read_text() if self.arena_checked and source.name == self.entry_file else None
        if text is not None and text.count("\n") == self.entry_lines:
            source = obj.with_name(f"checked-{source.name}")
            source.write_text(arenacheck.instrument(text, self.code.manifest, self.entry_file))
        done = run_compiler([self.profile.compiler_path(), *self.flags, "-c", str(source), "-o", str(obj)],
                            obj.parent, (self.code.directory, DRIVERS_DIR), self.code.directory)
        if done.returncode != 0:
            raise RunError(f"compile error: {host.first_diagnostic(done.stderr)}")
        return obj

    def executable(self, directory: Path, replaced: dict[str, Path] | None = None) -> Path:
        """The code linked with the driver into ``directory/assay-mutant``, with ``replaced`` sources compiled
        instead of the clean (``harness.runners.native``: a process start costs milliseconds)."""
        directory.mkdir(parents=True, exist_ok=True)
        objects = dict(self.objects)
        for file, source in (replaced or {}).items():
            objects[file] = self._compile(source, directory / f"{file}.o")
        executable = directory / "assay-mutant"
        command = [self.profile.compiler_path(), *map(str, objects.values()), "-o", str(executable),
                   *self.profile.libs]
        done = run_compiler(command, directory, (self.work / "clean",), directory)
        if done.returncode != 0:
            raise RunError(f"link error: {host.first_diagnostic(done.stderr)}")
        return executable


def _analyse(item: Item, model: Model, settings: Settings) -> dict:
    timings: dict[str, float] = {}
    provenance: dict = record_provenance()
    work = item_dir(item, settings, "mutate").resolve()  # the compiler runs in the code's directory
    code = generate_code(item, model, settings, timings, provenance, stage="mutate")
    reference = reference_for(model, settings)
    atol, rtol = settings.tolerances(model)
    start = time.perf_counter()
    builder = _Builder(code, work, settings.opt)
    clean_build = builder.executable(work / "clean")
    timings["clean_build_s"] = time.perf_counter() - start

    def run_outputs(executable: Path, inputs: np.ndarray) -> np.ndarray:
        return from_code_layout(native.run(executable, code, to_code_layout(inputs, model, code), settings.timeout),
                                model, code)

    start = time.perf_counter()
    false_alarms, inputs, expected, clean, skipped, rule = [], None, None, None, {}, None
    states = intermediate.activation_states(code, model) \
        if {"thresholds", "coverage"} & set(settings.input_sets) else None
    for seed in range(settings.seed, settings.seed + settings.seeds):
        seed_inputs = make_inputs(model, settings.n_inputs, seed)
        if seed == settings.seed:  # the judged inputs: the uniform ones, then the other sets (core.inputsets)
            others, skipped = _other_sets(model, code, settings, states)
            seed_inputs = np.concatenate([seed_inputs, *others])
        seed_expected = references.get(reference).run(model, seed_inputs)
        outputs = run_outputs(clean_build, seed_inputs)
        seed_rule = rule_for(model, settings, seed_inputs, timings, code)  # the judged seed's first: its fallback shows
        verdict, cause, max_abs_error = seed_rule.judge(outputs, seed_expected)
        false_alarms.append({"seed": seed, "verdict": verdict, "max_abs_error": max_abs_error, "cause": cause,
                             "rule": seed_rule.name})
        if seed == settings.seed:
            inputs, expected, clean, rule = seed_inputs, seed_expected, outputs, seed_rule
            if rule.fallback:
                print(f"{item.id}: {rule.fallback}", file=sys.stderr)
    timings["clean_runs_s"] = time.perf_counter() - start
    if false_alarms[0]["verdict"] != oracle.PASS:
        raise AssayError(f"the unmutated code does not pass the {rule.name} tolerance on seed {settings.seed}: "
                         f"{false_alarms[0]['cause']}")
    clean_errors = oracle.infinity_norm_errors(clean, expected)
    sample = np.sort(np.random.default_rng(settings.seed).choice(
        len(inputs), size=min(settings.sanitize, len(inputs)), replace=False))
    sampled = to_code_layout(inputs, model, code)[sample]
    clean_sanitizer = _sanitizer_report(code, None, work / "sanitized-clean", sampled, settings) \
        if settings.sanitize else None

    clean_bounds = _bounds(code, None)
    mutants = _mutants(code, settings)
    judge = _Judge(builder, run_outputs, inputs, expected, clean, clean_errors, rule, work, settings, code, model,
                   sample, {file: _bounds(code, file) for file in {m.file for m in mutants if m.relative is None}})
    start = time.perf_counter()
    results = judge.all(mutants, settings.jobs)
    timings["mutants_s"] = time.perf_counter() - start
    start = time.perf_counter()  # the oracle's tolerance: atol + rtol |f|, or the derived bound alone (its margin)
    witnesses = detect.annotate(results, code, model, *((rule.atol, rule.rtol) if rule.bound is None else (0.0, 0.0)),
                                settings.seed, float(clean_errors.max()))
    _confirm(results, mutants, witnesses, builder, run_outputs, reference, rule, model, settings, work, timings)
    timings["detectability_s"] = time.perf_counter() - start
    summary = summarise(results, false_alarms)
    return {"reference": reference, "tolerance": atol, "rtol": rtol, "tolerance_rule": rule.figures(clean),
            "input_domain": model.domain_json(),
            "opt": settings.opt, "first_batch": FIRST_BATCH,
            "input_sets": [k for k in settings.input_sets if k not in skipped], "input_sets_left_out": skipped,
            "set_inputs": settings.set_inputs, "inputs_judged": len(inputs),
            "sanitized_inputs": len(sample) if settings.sanitize else 0,
            "clean": {"max_abs_error": float(clean_errors.max()), "sanitizer": clean_sanitizer,
                      "bounds": clean_bounds},
            "false_alarms": false_alarms, "summary": summary, "mutants": results, "timings": timings,
            "provenance": provenance, **verdict_of(summary, clean_sanitizer, clean_bounds)}


def _confirm(results: list[dict], mutants: list[operators.Mutant], witnesses: dict[str, np.ndarray],
             builder: _Builder, run_outputs: Callable[[Path, np.ndarray], np.ndarray], reference: str, rule: Rule,
             model: Model, settings: Settings, work: Path, timings: dict) -> None:
    """A weight mutant beyond the tolerance at its witness but within the rounding margin (``detect``): build its C
    again and run it on the witness alone against the reference, by the oracle's rule; a fail there makes it
    detectable (``confirmed_by``). The witness comes from the search, never from the test inputs."""
    for result in results:
        found = result.get("detectability") or {}
        if found.get("detectable") is not False or not found.get("beyond_tolerance"):
            continue
        mutant, witness = mutants[int(result["id"][1:])], witnesses[result["id"]]
        source = work / "witness" / mutant.file
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(mutant.apply((builder.code.directory / mutant.file).read_text()))
        try:
            outputs = run_outputs(builder.executable(work / "witness", {mutant.file: source}), witness)
        except RunError as exc:
            found.update(detectable=True, confirmed_by=f"the mutant's C at the witness: {exc}")
            continue
        judged = rule if rule.bound is None else rule_for(model, settings, witness, timings, builder.code)
        verdict, cause, _ = judged.judge(outputs, references.get(reference).run(model, witness))
        if verdict != oracle.PASS:
            found.update(detectable=True, confirmed_by=f"the mutant's C at the witness, {judged.name} rule: {cause}")


def _other_sets(model: Model, code: GeneratedCode, settings: Settings, states: inputsets.States | None
                ) -> tuple[list[np.ndarray], dict[str, str]]:
    """The input sets beyond the uniform one (``settings.input_sets``), ``settings.set_inputs`` inputs each, and
    the sets left out with the reason (those that need the reference's activation states when no reference
    gives them for this code, e.g. C from another generator without layer outputs in its manifest)."""
    sets, skipped = [], {}
    for kind in settings.input_sets:
        if kind == "uniform":
            continue
        if kind in ("thresholds", "coverage") and states is None:
            skipped[kind] = intermediate.unavailable(code, model) or "no activation states"
            continue
        sets.append(inputsets.make_set(kind, model, settings.set_inputs, settings.seed, states))
    return sets, skipped


def _mutants(code: GeneratedCode, settings: Settings) -> list[operators.Mutant]:
    """Every mutant of the code: code mutants of the entry's file, weight mutants of the data arrays."""
    entry = code.manifest.get("entry")
    code_files = [code.directory / entry["file"]] if isinstance(entry, dict) and entry.get("file") else \
        list(code.sources)
    symbols = [s for s in code.manifest.get("symbols", {}).get("data", [])]
    found = [m for path in code_files for m in operators.code_mutants(path)]
    rng = np.random.default_rng(settings.seed)
    for path in code.sources:
        found += operators.weight_mutants(path, symbols, RELATIVES, settings.weights_per_array, rng)
    if settings.max_mutants is not None and len(found) > settings.max_mutants:
        keep = np.sort(np.random.default_rng(settings.seed).choice(len(found), settings.max_mutants, replace=False))
        found = [found[i] for i in keep]
    return found


def _bounds(code: GeneratedCode, file: str | None, text: str | None = None) -> dict:
    """The static subscript bounds check (``bounds``) of ``file`` (default: the entry's) of ``code``, or of
    ``text`` in its place: the violations as lines, and how many subscripts were and were not checked."""
    entry = code.manifest.get("entry")
    file = file or (entry.get("file") if isinstance(entry, dict) else None) or code.sources[0].name
    report = bounds.check_code(code.directory, code.manifest, file, text)
    return {"file": file, "violations": [str(v) for v in report.violations], "checked": report.checked,
            "unchecked": report.unchecked}


def _sanitizer_report(code: GeneratedCode, mutant: operators.Mutant | None, directory: Path, inputs: np.ndarray,
                      settings: Settings) -> str | None:
    """The sanitizers' one-line report on ``code`` (with ``mutant`` applied), or None when they report nothing."""
    if directory.exists():
        shutil.rmtree(directory)
    shutil.copytree(code.directory, directory / "src")
    if mutant is not None:
        path = directory / "src" / mutant.file
        path.write_text(mutant.apply(path.read_text()))
    copy = GeneratedCode.from_directory(directory / "src")
    try:
        sanitized.run(sanitized.build(copy, directory / "build", settings.opt), inputs, settings.timeout)
    except RunError as exc:
        return str(exc)
    return None


@dataclass
class _Judge:
    """Builds, runs and classifies one mutant at a time against the clean code's figures."""

    builder: _Builder
    run_outputs: Callable[[Path, np.ndarray], np.ndarray]  # executable, canonical inputs -> canonical outputs
    inputs: np.ndarray
    expected: np.ndarray  # the reference's outputs
    clean: np.ndarray  # the unmutated code's outputs
    clean_errors: np.ndarray  # per input, the unmutated code's error against the reference
    rule: Rule  # the oracle's rule on the judged inputs
    work: Path
    settings: Settings
    code: GeneratedCode
    model: Model
    sample: np.ndarray  # the inputs run under the sanitizers
    clean_bounds: dict[str, dict]  # per file with code mutants, the clean file's bounds check (``_bounds``)
    slots: queue.Queue = field(default_factory=queue.Queue)  # work folder numbers free for a mutant

    def __call__(self, number: int, mutant: operators.Mutant) -> dict:
        path = self.code.directory / mutant.file
        original = path.read_text()
        mutated = mutant.apply(original)
        result = {"id": f"M{number:04d}", "operator": mutant.operator, "file": mutant.file, "line": mutant.line,
                  "description": mutant.description, "diff": _diff(mutant.file, original, mutated),
                  "equivalent_rule": mutant.equivalent, "max_abs_error": None, "effect": None, "inputs_run": 0,
                  "detected_by": None, "cause": None, "class": None, "rule": self.rule.name}
        if mutant.element is not None:  # what the detectability search changes in the model (``detect``)
            result["weight"] = {"symbol": mutant.element[0], "index": mutant.element[1],
                                "value": float(np.float32(mutant.original.rstrip("fF"))),
                                "mutated": float(np.float32(mutant.replacement))}
        slot = self.slots.get()  # a folder of its own per mutant judged at the same time
        try:
            return self._judge(number, mutant, result, mutated, slot)
        finally:
            self.slots.put(slot)

    def all(self, mutants: list[operators.Mutant], jobs: int) -> list[dict]:
        """Every mutant's result, in order, ``jobs`` judged at a time (each builds and runs in subprocesses)."""
        for slot in range(max(1, jobs)):
            self.slots.put(slot)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(self, range(len(mutants)), mutants))

    def _judge(self, number: int, mutant: operators.Mutant, result: dict, mutated: str, slot: int) -> dict:
        directory = self.work / f"mutant-{slot}"
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / mutant.file
        source.write_text(mutated)
        try:
            built = self.builder.executable(directory, {mutant.file: source})
        except RunError as exc:
            return {**result, "status": "stillborn", "cause": str(exc)}
        outputs = None
        for count in (min(FIRST_BATCH, len(self.inputs)), len(self.inputs)):
            try:
                outputs = self.run_outputs(built, self.inputs[:count])
            except RunError as exc:
                return {**result, "status": "killed", "detected_by": "runner", "cause": str(exc), "inputs_run": count}
            verdict, cause, max_abs_error = self.rule.judge(outputs, self.expected)
            result.update(inputs_run=count, max_abs_error=max_abs_error, effect=_largest(outputs, self.clean[:count]))
            if verdict != oracle.PASS:
                return {**result, "status": "killed", "detected_by": "oracle", "cause": cause,
                        "rule_refuted": mutant.equivalent is not None}
            if count == len(self.inputs):
                break
        result["above_tolerance"] = self.rule.above(outputs, self.clean)
        if mutant.equivalent is not None:
            if any(mutant.equivalent.startswith(rule) for rule in UP_TO_ROUNDING) and \
                    oracle.infinity_norm_errors(outputs, self.expected).max() > self.clean_errors.max():
                result["cause"] = "equal only up to rounding by its rule, and its error exceeds the clean code's"
            else:
                return {**result, "status": "equivalent"}
        if self.settings.sanitize and mutant.relative is None:  # a changed constant cannot change memory accesses
            report = _sanitizer_report(self.code, mutant, self.work / f"sanitized-mutant-{slot}",
                                       to_code_layout(self.inputs, self.model, self.code)[self.sample], self.settings)
            if report is not None:
                return {**result, "status": "killed", "detected_by": "sanitizer", "cause": report}
        if mutant.relative is None:  # last: what no run saw, an access only some data would drive out of bounds
            found = _bounds(self.code, mutant.file, mutated)["violations"]
            new = [line for line in found if line not in self.clean_bounds[mutant.file]["violations"]]
            if new:
                return {**result, "status": "killed", "detected_by": "bounds",
                        "cause": f"static bounds check: {new[0]}"}
        return {**result, "status": "survived", "class": self._classify(outputs)}

    def _classify(self, outputs: np.ndarray) -> str:
        bits = [np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) for a in (outputs, self.clean)]
        if np.array_equal(*bits):
            return "not_reached"
        if oracle.infinity_norm_errors(outputs, self.expected).max() <= self.clean_errors.max():
            return "below_precision"
        return "tolerance"


def _largest(outputs: np.ndarray, clean: np.ndarray) -> float | None:
    """The largest |mutant - clean| over the outputs; None when either has NaN or Inf."""
    if not (np.isfinite(outputs).all() and np.isfinite(clean).all()):
        return None
    return float(oracle.infinity_norm_errors(outputs, clean).max())


def _diff(name: str, original: str, mutated: str) -> str:
    return "".join(difflib.unified_diff(original.splitlines(True), mutated.splitlines(True), f"a/{name}", f"b/{name}",
                                        n=0))


def is_weight(result: dict) -> bool:
    return result["operator"].startswith("weight-")


def summarise(results: list[dict], false_alarms: list[dict]) -> dict:
    """Counts by status, operator and survivor class; the code kill rate; the weight mutants' detectability."""
    def counts(selected: list[dict]) -> dict:
        return {status: sum(r["status"] == status for r in selected)
                for status in ("killed", "survived", "stillborn", "equivalent")}

    code = [r for r in results if not is_weight(r)]
    judged = counts(code)
    live = judged["killed"] + judged["survived"]
    operators_seen = sorted({r["operator"] for r in results})
    return {"mutants": len(results), **counts(results),
            "code": {**judged, "kill_rate": judged["killed"] / live if live else None},
            "by_operator": {op: counts([r for r in results if r["operator"] == op]) for op in operators_seen},
            "detected_by": {way: sum(r["detected_by"] == way for r in results) for way in DETECTORS},
            "equivalent_by_rule": _by_rule([r for r in results if r["status"] == "equivalent"]),
            "survivor_classes": {c: sum(r["class"] == c for r in results)
                                 for c in ("not_reached", "below_precision", "tolerance")},
            "weights": weight_detectability(results),
            "rules_refuted": sum(bool(r.get("rule_refuted")) for r in results),
            "false_alarms": sum(a["verdict"] != oracle.PASS for a in false_alarms)}


def weight_detectability(results: list[dict]) -> dict:
    """The weight mutants by detectability (``detect``, decided on the domain apart from the test inputs): how many
    are detectable, how many of those the test inputs killed (the input sets' adequacy), every detectable survivor,
    the survivors beyond the tolerance at the witness but within the rounding margin (to review), those no input was
    found to detect (not a defect of the tests), the killed ones the search found no witness for, and those left
    undecided (a survivor among them is not a pass)."""
    judged = [r for r in results if "detectability" in r]
    detectable = [r for r in judged if r["detectability"]["detectable"]]
    killed = [r for r in detectable if r["status"] == "killed"]
    return {"mutants": len(judged), "detectable": len(detectable), "detectable_killed": len(killed),
            "adequacy": len(killed) / len(detectable) if detectable else None,
            "detectable_survivors": [r["id"] for r in detectable if r["status"] != "killed"],
            "review_survivors": [r["id"] for r in judged if r["detectability"]["detectable"] is False
                                 and r["detectability"]["beyond_tolerance"] and r["status"] != "killed"],
            "undetectable_survivors": sum(r["detectability"]["detectable"] is False and r["status"] != "killed"
                                          and not r["detectability"]["beyond_tolerance"] for r in judged),
            "killed_not_found_detectable": sum(r["detectability"]["detectable"] is False and r["status"] == "killed"
                                               for r in judged),
            "undecided_survivors": [r["id"] for r in judged
                                    if not r["detectability"]["decided"] and r["status"] != "killed"],
            "undecided_killed": sum(not r["detectability"]["decided"] and r["status"] == "killed" for r in judged)}


def _by_rule(equivalent: list[dict]) -> dict[str, int]:
    """How many mutants each equivalence rule judged equivalent, by the rule's name (its text up to the colon)."""
    names = [r["equivalent_rule"].split(":")[0] for r in equivalent]
    return {name: names.count(name) for name in sorted(set(names))}


def verdict_of(summary: dict, clean_sanitizer: str | None, clean_bounds: dict | None = None) -> dict:
    """pass when: no false alarm, the clean code sanitizer-clean and within bounds, >= 99 % of the live code
    mutants killed, every detectable weight mutant killed and none undecided (``weight_detectability``), no
    equivalence rule refuted; else fail."""
    reasons = []
    if summary["false_alarms"]:
        reasons.append(f"{summary['false_alarms']} false alarms on the unmutated code")
    if clean_sanitizer:
        reasons.append(f"the unmutated code under the sanitizers: {clean_sanitizer}")
    if clean_bounds and clean_bounds["violations"]:
        reasons.append(f"the unmutated code's bounds check: {clean_bounds['violations'][0]}")
    rate = summary["code"]["kill_rate"]
    if rate is not None and rate < KILL_TARGET:
        reasons.append(f"{rate:.1%} of the non-equivalent code mutants killed, below {KILL_TARGET:.0%}")
    weights = summary["weights"]
    if weights["detectable_survivors"]:
        reasons.append(f"{len(weights['detectable_survivors'])} detectable weight mutants survived (an input of the "
                       f"domain detects them, the test inputs do not): {', '.join(weights['detectable_survivors'])}")
    if weights["undecided_survivors"]:
        reasons.append(f"the detectability of {len(weights['undecided_survivors'])} surviving weight mutants is not "
                       f"decided: {', '.join(weights['undecided_survivors'])}")
    if summary["rules_refuted"]:
        reasons.append(f"{summary['rules_refuted']} mutants judged equivalent were killed (a rule is wrong)")
    return {"verdict": oracle.FAIL if reasons else oracle.PASS, "cause": "; ".join(reasons) or None}
