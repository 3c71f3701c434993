"""Oracle adequacy by mutation: seeded mutants of the generated C, each built and judged like the real code.

For one (model, generator, variant) item: the code is generated, every source
is compiled once to an object, and the clean code runs on the inputs of each
of ``seeds`` input seeds (a verdict other than pass is a false alarm). Then
each mutant (``operators``) is one text edit of one file, made into a program
(``programs``): every code mutant of a file in one schema build that picks the
mutant at run time (``schema``, gcc -O0 in the sandbox as every build of generated C:
``harness.runners.compiling.run_compiler``), a weight mutant's element written into the clean
executable, or, as the checked fallback (``--builds per-mutant``), its file compiled again and linked with the
clean objects and the driver into an executable (``harness.runners.native``, run in the sandbox as all
generated code: ``harness.sandbox``). A mutant runs the judged inputs in batches (``FIRST_BATCH``, then
``GROWTH`` times more each time), the inputs that killed the most mutants so far first (``_Order``), and stops
at the first batch with a failing input; a survivor has run every input. The verdict is the oracle's rule
(``Rule``, ``--tolerance``):
fixed, ``harness.core.oracle.compare`` against the reference outputs computed once; derived,
``|C - float64| <= bound`` per output (the semantic stage's rule, figures shared through
``harness.core.refcache``), and where the manifest names the layers' output buffers, for a mutant that rule
leaves alive, every layer within its local bound from the C's own input to it (``_LayerCheck``,
``harness.core.layerlocal``: the semantic stage's layer-local verdict); a layer outside it kills the mutant. A
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
- ``review`` (the derived rule only): within the derived bound on every input, outside the fixed tolerance
  (``atol + rtol |reference|``) on some: ``assay semantic``'s default verdict passes such code with a ``review``
  line naming it, so the user sees it, but no rigorous rule fails it (a correct float32 implementation summing in
  another order could give the same outputs). Counted as a survivor, never as killed.

Why programs made once rather than ``host.build`` per mutant: that compiles every source each time, and the
weights file of LeNet-5 takes ~0.5 s of the ~0.6 s; hundreds of mutants would spend minutes compiling the
same unchanged file, and even the mutated file alone took most of a mutant that the first inputs kill. The
flags and defines are the host profile's, the driver and its guard words the targets' (``target_driver.c``).
Why an executable rather than the host runner's library in its Python worker: the worker's start (~0.2 s of
interpreter and cffi) was most of a small network's mutant.
"""

from __future__ import annotations

import difflib
import hashlib
import queue
import re
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from harness import references
from harness.core import inputsets, intermediate, layerlocal, oracle, quantized, refcache
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
from harness.binary import elf
from harness.runners import RunError, arenacheck, native, probed
from harness.targets import HOST
from harness.references import bounds as derived_bounds
from harness.references import float64, integer
from harness.stages.mutate import bounds, detect, operators, programs, split
from harness.stages.mutate.spec import SPEC

SCHEMA = SPEC.schema
KEY_FIELDS = SPEC.key_fields
FIRST_BATCH = 16  # inputs a mutant runs first, those that killed the most mutants so far: most die on them
GROWTH = 4  # each later batch is this many times the one before, until every input has run
WINDOW = 16  # a mutant's order of the inputs counts the kills of the mutants judged this many or more before it
# the clean code's state at each layer costs an instrumented build, a run of every judged input and a check per
# layer, the weight mutants' FAST_OPT build a compile of every source: worth it for an item's mutants, not for a
# sample of a few (``--max-mutants``)
SPLIT_FROM = 32
RELATIVES = (1e-3, 1e-5, 1e-7)
INTEGER_SEARCH = 4096  # uniform points of the domain an integer constant survivor runs on (``_integer_detectability``)
KILL_TARGET = 0.99  # of the non-equivalent code mutants (issue 9)
UP_TO_ROUNDING = ("softmax shift invariance",)  # rules equal in real arithmetic only: the error must not grow
DETECTORS = ("oracle", "runner", "sanitizer", "bounds")
PROBABLY_EQUIVALENT = "probably_equivalent"  # a survivor whose first layer output after the mutation is the clean one
REVIEW = "review"  # derived rule: a survivor the fixed tolerance fails, which the default verdict flags for review
CLASSES = ("not_reached", REVIEW, "below_precision", "tolerance", PROBABLY_EQUIVALENT)  # of the survivors
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
    workers: int = SPEC.default("workers")  # items analysed at a time, each in a process (nor do they)
    builds: str = SPEC.default("builds")  # schemata, or per-mutant (programs.BUILDS)
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
                                       **({"tolerance_rule": DERIVED, "bounds": refcache.bounds_identity(),
                                           "layer_local": layerlocal.identity()}
                                          if settings.tolerance == DERIVED else {}),
                                       max_mutants=settings.max_mutants, sanitize=settings.sanitize,
                                       input_sets=list(settings.input_sets), set_inputs=settings.set_inputs,
                                       builds=settings.builds, stage=tree_digest(STAGE_DIR),
                                       checks=_checks_digest())
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
    detectability search uses, the layer outputs a split run starts from, the reading of the executable a weight
    mutant is written into and a quantized model's integer arbiter (a change there must not reuse old records)."""
    return digest([Path(module.__file__).read_bytes().hex()
                   for module in (arenacheck, inputsets, intermediate, float64, derived_bounds, probed, elf, integer,
                                  quantized)])


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
    integer (a quantized model, whatever ``--tolerance`` says; named after the arbiter's reference,
    ``integer-<rule>``): the integer arbiter's outputs under the requantization rule the code declares as
    ``exact``, a bound of 0, the semantic stage's verdict of such code (``harness.core.quantized``): any output
    bit off the arbiter's kills. ``fallback`` says why a run judges by the fixed rule (an op without a bound, no
    float64 figure, no declared requantization rule, an op the integer arbiter refuses)."""

    name: str
    atol: float
    rtol: float
    exact: np.ndarray | None = None  # derived: the float64 outputs of the batch; integer: the arbiter's
    bound: np.ndarray | None = None  # derived: the bound of every output of the batch; integer: zeros
    fallback: str | None = None

    def judge(self, outputs: np.ndarray, expected: np.ndarray, rows: np.ndarray | None = None
              ) -> tuple[str, str | None, float | None]:
        """The verdict on the batch's inputs ``rows`` (default its first ``len(outputs)``), its cause (naming an
        input by its row in the batch), and the largest |C - reference|."""
        rows = np.arange(len(outputs)) if rows is None else rows
        fixed = oracle.compare(outputs, expected[rows], self.atol, self.rtol)
        if self.bound is None:
            return fixed.verdict, _rows_named(fixed.cause, rows), fixed.max_abs_error
        derived = oracle.compare_to_bound(outputs, self.exact[rows], self.bound[rows])
        return derived.verdict, _rows_named(derived.cause, rows), fixed.max_abs_error

    def failing(self, outputs: np.ndarray, expected: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per input of ``rows``, whether it fails the rule (an output outside the tolerance, NaN or Inf): the
        inputs that killed a mutant, which later mutants run first (``_Order``)."""
        c = outputs.astype(np.float64).reshape(len(outputs), -1)
        if self.bound is None:
            r = expected[rows].astype(np.float64).reshape(len(outputs), -1)
            with np.errstate(invalid="ignore"):
                outside = np.abs(c - r) > self.atol + self.rtol * np.abs(r)
            return outside.any(axis=1) | ~np.isfinite(c).all(axis=1) | ~np.isfinite(r).all(axis=1)
        exact, bound = (a[rows].reshape(len(outputs), -1) for a in (self.exact, self.bound))
        with np.errstate(invalid="ignore"):
            outside = np.abs(c - exact) > bound
        return outside.any(axis=1) | ~np.isfinite(c).all(axis=1)

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


def _rows_named(cause: str | None, rows: np.ndarray) -> str | None:
    """``cause`` with each "input #k" (the k-th of a batch) named by its row ``rows[k]`` of the judged inputs."""
    return None if cause is None else re.sub(r"input #(\d+)", lambda m: f"input #{rows[int(m.group(1))]}", cause)


def rule_for(model: Model, settings: Settings, inputs: np.ndarray, timings: dict, code: GeneratedCode) -> Rule:
    """The rule ``settings.tolerance`` names on ``inputs``; derived takes the float64 outputs and the bound (for the
    order of accumulation ``code``'s manifest declares) from the cache the semantic stage fills
    (``harness.core.refcache``), and falls back to fixed, saying why. A quantized model's rule is the integer one
    (``integer_rule``) whatever ``settings.tolerance`` says."""
    atol, rtol = settings.tolerances(model)
    if quantized.is_quantized(model):
        return integer_rule(model, settings, inputs, timings, code)
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


def integer_rule(model: Model, settings: Settings, inputs: np.ndarray, timings: dict, code: GeneratedCode) -> Rule:
    """A quantized model's rule on ``inputs``: bit for bit against the integer arbiter under the requantization
    rule ``code``'s manifest declares (``harness.core.quantized``, the semantic stage's yardstick, cached); the fixed
    rule, saying why, when the code declares none (or one the arbiter does not know) or the arbiter refuses the
    graph."""
    atol, rtol = settings.tolerances(model)
    declared = quantized.quantization_rule(code.manifest)
    why = quantized.not_applicable(declared)
    if why is not None:
        return Rule(FIXED, atol, rtol, fallback=f"{why}: {refcache.FALLBACK}")
    start = time.perf_counter()
    try:
        exact = np.asarray(quantized.integer_outputs(model, settings, declared, inputs), np.float64)
    except Exception as exc:  # an op or pattern the arbiter refuses, by name: the rule changes, visibly
        kind = "" if isinstance(exc, USER_ERRORS) else f"{type(exc).__name__}: "
        return Rule(FIXED, atol, rtol, fallback=f"integer arbiter not available ({kind}{exc}): {refcache.FALLBACK}")
    timings["arbiter_s"] = timings.get("arbiter_s", 0.0) + time.perf_counter() - start
    return Rule(quantized.reference_name(declared), atol, rtol, exact, np.zeros(exact.shape))


def _analyse(item: Item, model: Model, settings: Settings) -> dict:
    timings: dict[str, float] = {}
    provenance: dict = record_provenance()
    work = item_dir(item, settings, "mutate").resolve()  # the compiler runs in the code's directory
    code = generate_code(item, model, settings, timings, provenance, stage="mutate")
    reference = reference_for(model, settings)
    atol, rtol = settings.tolerances(model)
    start = time.perf_counter()
    builder = programs.Builder(code, work, settings.opt)
    clean_build = builder.executable(work / "clean")
    timings["clean_build_s"] = time.perf_counter() - start

    def run_outputs(executable: Path, inputs: np.ndarray, env: dict[str, str] | None = None,
                    files: dict[str, bytes] | None = None, raw: bool = False) -> np.ndarray:
        """The outputs of ``executable`` on ``inputs`` (canonical layout), in the canonical layout (``raw``: the
        code's, as it wrote them); ``env`` and ``files``: the run's variables and files beside the inputs."""
        outputs = native.run(executable, code, to_code_layout(inputs, model, code), settings.timeout, env,
                             files=files)
        return outputs if raw else from_code_layout(outputs, model, code)

    start = time.perf_counter()
    false_alarms, skipped = [], {}
    states = intermediate.activation_states(code, model) \
        if {"thresholds", "coverage"} & set(settings.input_sets) else None
    seeds = range(settings.seed, settings.seed + settings.seeds)
    batches = {seed: make_inputs(model, settings.n_inputs, seed) for seed in seeds}
    others, skipped = _other_sets(model, code, settings, states)  # judged: the uniform inputs, then these sets
    batches[settings.seed] = np.concatenate([batches[settings.seed], *others])
    with ThreadPoolExecutor(max_workers=max(1, settings.jobs)) as pool:  # the seeds' runs, beside the references
        runs = {seed: pool.submit(run_outputs, clean_build, batches[seed]) for seed in seeds}
        checked = {seed: references.get(reference).run(model, batches[seed]) for seed in seeds}
        outputs = {seed: run.result() for seed, run in runs.items()}
    for seed in seeds:
        seed_rule = rule_for(model, settings, batches[seed], timings, code)  # the judged seed's first: its fallback
        verdict, cause, max_abs_error = seed_rule.judge(outputs[seed], checked[seed])
        false_alarms.append({"seed": seed, "verdict": verdict, "max_abs_error": max_abs_error, "cause": cause,
                             "rule": seed_rule.name})
        if seed == settings.seed:
            rule = seed_rule
            if rule.fallback:
                print(f"{item.id}: {rule.fallback}", file=sys.stderr)
    inputs, expected, clean = batches[settings.seed], checked[settings.seed], outputs[settings.seed]
    clean_layers, layer_check = _layer_check(code, model, rule, inputs, work, settings.timeout, timings)
    if layer_check is not None:
        first = false_alarms[0]  # the judged seed's: the clean code must pass every layer's bound too
        first["verdict"], first["cause"] = oracle.with_layers(first["verdict"], first["cause"], clean_layers)
        first["layer_local"] = clean_layers.get("verdict")
    timings["clean_runs_s"] = time.perf_counter() - start
    if false_alarms[0]["verdict"] != oracle.PASS:
        raise AssayError(f"the unmutated code does not pass the {rule.name} rule on seed {settings.seed}: "
                         f"{false_alarms[0]['cause']}")
    clean_errors = oracle.infinity_norm_errors(clean, expected)
    mutants = _mutants(code, settings)
    # the weight mutants' detectability search needs no run of theirs: it goes on beside everything below (``detect``)
    with ThreadPoolExecutor(max_workers=1) as beside:
        searched = beside.submit(_detectability, mutants, code, model, rule, settings.seed, float(clean_errors.max()),
                                 timings, time.perf_counter())
        sample = np.sort(np.random.default_rng(settings.seed).choice(
            len(inputs), size=min(settings.sanitize, len(inputs)), replace=False))
        sampled = to_code_layout(inputs, model, code)[sample]
        clean_sanitizer = programs.sanitizer_report(
            lambda: programs.sanitized_build(code, {}, work / "sanitized-clean", settings.opt), sampled,
            settings.timeout) if settings.sanitize else None
        clean_bounds = _bounds(code, None)
        start = time.perf_counter()
        schemata = settings.builds == programs.BUILDS[0]
        fast = programs.Builder(code, work / "fast", programs.FAST_OPT) if schemata and len(mutants) >= SPLIT_FROM \
            and settings.opt != programs.FAST_OPT and any(m.element is not None for m in mutants) else None
        made = programs.Programs(builder, mutants, clean_build, schemata, fast)
        if made.fast is not None:  # weight mutants at FAST_OPT only where the clean code gives the same bits there
            made.weights_on_fast(clean_sanitizer is None and _same_bits(run_outputs(made.fast, inputs), clean))
        timings["schemata_s"] = time.perf_counter() - start
        start = time.perf_counter()
        splitting = _split(made, code, model, inputs, clean, run_outputs, work) \
            if made.layers and len(mutants) >= SPLIT_FROM else None
        timings["split_s"] = time.perf_counter() - start
        judge = _Judge(made, run_outputs, inputs, expected, clean, clean_errors, rule, work, settings, code, sampled,
                       {file: _bounds(code, file) for file in {m.file for m in mutants if m.element is None}},
                       _Order(len(inputs)), splitting, layer_check)
        start = time.perf_counter()
        results = judge.all(mutants, settings.jobs)
        timings["mutants_s"] = time.perf_counter() - start
        found, witnesses = searched.result()
    start = time.perf_counter()
    for result in results:
        if result["id"] in found and result["status"] != "stillborn":
            result["detectability"] = found[result["id"]]
    _confirm(results, mutants, witnesses, made, run_outputs, reference, rule, model, settings, work, timings)
    timings["confirmations_s"] = time.perf_counter() - start
    start = time.perf_counter()
    _integer_detectability(results, mutants, made, run_outputs, clean_build, reference, model, settings, work,
                           timings)
    timings["integer_detectability_s"] = time.perf_counter() - start
    summary = summarise(results, false_alarms)
    return {"reference": reference, "tolerance": atol, "rtol": rtol,
            "tolerance_rule": {**rule.figures(clean), **({"layer_local": clean_layers} if clean_layers else {})},
            "input_domain": model.domain_json(),
            "opt": settings.opt, "first_batch": FIRST_BATCH, "builds": settings.builds,
            "weights_opt": programs.FAST_OPT if made.base == made.fast else settings.opt,
            "schemata": {"mutants": len(made.selection), "programs": len(made.schema_texts),
                         "left_out": {f"M{n:04d}": why for n, why in sorted(made.left_out.items())},
                         "layers": sorted(splitting.layers) if splitting else []},
            "input_sets": [k for k in settings.input_sets if k not in skipped], "input_sets_left_out": skipped,
            "set_inputs": settings.set_inputs, "inputs_judged": len(inputs),
            "sanitized_inputs": len(sample) if settings.sanitize else 0,
            "clean": {"max_abs_error": float(clean_errors.max()), "sanitizer": clean_sanitizer,
                      "bounds": clean_bounds},
            "false_alarms": false_alarms, "summary": summary, "mutants": results, "timings": timings,
            "provenance": provenance, **verdict_of(summary, clean_sanitizer, clean_bounds)}


def _layer_check(code: GeneratedCode, model: Model, rule: Rule, inputs: np.ndarray, work: Path, timeout: float,
                 timings: dict) -> tuple[dict | None, _LayerCheck | None]:
    """Under the derived rule, the clean code's layer-local verdict on the judged inputs (``harness.core.layerlocal``;
    not judged, saying why, when the manifest names no layer buffers or a layer has no bound rule) and the check
    the mutants then get (None when the clean code was not judged so: the end-to-end rule alone decides).

    Only the judged seed's inputs: the clean code's layer-local false alarms over many seeds are the semantic
    stage's to count (the same function); here the clean code must pass on the inputs that judge the mutants, or
    a layer's kill would be the clean code's own."""
    if rule.name != DERIVED:
        return None, None
    order = derived_bounds.Order.from_manifest(code.manifest)
    start = time.perf_counter()
    try:
        found = layerlocal.judge(code, model, inputs, work / "layer-local-clean", timeout, order)
    except USER_ERRORS as exc:  # the instrumented build or its run: the end-to-end rule stands, visibly alone
        found = {"rule": layerlocal.RULE, "judged": False, "reason": f"the probed build did not run: {exc}"}
    timings["layer_local_clean_s"] = time.perf_counter() - start
    return found, (_LayerCheck(model, order, timeout) if found.get("judged") else None)


@dataclass(frozen=True)
class _LayerCheck:
    """The layer-local verdict (``harness.core.layerlocal.judge``, the semantic stage's) of a mutant that the
    end-to-end derived rule leaves alive: each layer's output read from the mutant's own instrumented build
    (``harness.runners.probed``) and judged from the mutant's own input to that layer.

    Why survivors only: it costs an instrumented build of the mutant's code (every source compiled again, the
    schemata and the patched executables do not carry the probes) and a float64 evaluation of every layer per
    input (7 ms on acas-reg50 to 2.5 s on cifarnet), where the end-to-end rule costs a comparison; most mutants
    die on the first end-to-end batch, and a mutant killed there needs no second look. Why in two batches, the
    first ``FIRST_BATCH`` inputs of the mutant's order then the rest: a mutant that a layer's bound detects is
    outside it on most inputs (the cifarnet conv3 bias mutants on all of them), so the early exit keeps its cost
    to one small batch; a true survivor pays one more build."""

    model: Model
    order: derived_bounds.Order | None  # the order of accumulation the manifest declares, None: any order
    timeout: float

    def __call__(self, code: GeneratedCode, inputs: np.ndarray, order: np.ndarray, work: Path) -> dict:
        """The verdict of ``code`` on the judged ``inputs`` taken in ``order``: the first batch's that is not a
        pass (its cause naming the input by its row of the judged inputs), else the last batch's figures with the
        inputs run and the smallest margin over the batches."""
        found: dict = {}
        ran, margins = 0, []
        for rows in (order[:FIRST_BATCH], order[FIRST_BATCH:]):
            if len(rows) == 0:
                continue
            found = layerlocal.judge(code, self.model, inputs[rows], work, self.timeout, self.order)
            ran += len(rows)
            if not found.get("judged") or found["verdict"] != oracle.PASS:
                return {**found, "inputs": ran, "cause": _rows_named(found.get("cause"), rows)}
            margins += [found["margin"]] if found["margin"] is not None else []
        return {**found, "inputs": ran, "margin": min(margins, default=None)}


def _weight(mutant: operators.Mutant) -> dict:
    """A weight mutant's element: its array, index, value and mutated value (and its type when an integer)."""
    if mutant.dtype != "float32":
        return {"symbol": mutant.element[0], "index": mutant.element[1], "dtype": mutant.dtype,
                "value": int(mutant.original), "mutated": int(mutant.replacement)}
    return {"symbol": mutant.element[0], "index": mutant.element[1],
            "value": float(np.float32(mutant.original.rstrip("fF"))), "mutated": float(np.float32(mutant.replacement))}


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return np.array_equal(np.ascontiguousarray(a, np.float32).view(np.uint32),
                          np.ascontiguousarray(b, np.float32).view(np.uint32))


def _detectability(mutants: list[operators.Mutant], code: GeneratedCode, model: Model, rule: Rule, seed: int,
                   clean_error: float, timings: dict, started: float) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """Every float weight mutant's detectability (``detect.annotate``, decided on the domain apart from the test
    inputs), by id, and each searched one's witness; its seconds in ``timings``. The integer constants' is decided
    after their runs (``_integer_detectability``)."""
    weights = [{"id": f"M{n:04d}", "file": m.file, "status": None, "weight": _weight(m)}
               for n, m in enumerate(mutants) if m.relative is not None]
    # the oracle's tolerance: atol + rtol |f|, or the derived bound alone (its margin)
    witnesses = detect.annotate(weights, code, model, *((rule.atol, rule.rtol) if rule.bound is None else (0.0, 0.0)),
                                seed, clean_error)
    timings["detectability_s"] = time.perf_counter() - started
    return {w["id"]: w["detectability"] for w in weights if "detectability" in w}, witnesses


def _split(made: programs.Programs, code: GeneratedCode, model: Model, inputs: np.ndarray, clean: np.ndarray,
           run_outputs: Callable[..., np.ndarray], work: Path) -> split.Split | None:
    """The clean code's state at each layer a run can start at (``split``), from its layer outputs on the judged
    inputs (``harness.runners.probed``), keeping only the layers the clean code passes through: resumed there on
    the first inputs, its outputs are its own bit for bit, and stopped there, its layer output is the probed one.
    None when no layer passes (every run then starts at the beginning)."""
    try:
        built = probed.build(code, work / "probed")
        parts: dict[int, list[np.ndarray]] = {probe.index: [] for probe in built.probes}
        for _, chunk in probed.run(built, to_code_layout(inputs, model, code)):
            for probe, values in zip(built.probes, chunk):
                parts[probe.index].append(values)
    except RunError:  # no layer outputs, no split: every run starts at the beginning
        return None
    state = split.Split(made.layers, {k: np.concatenate(values) for k, values in parts.items()})
    rows = np.arange(min(FIRST_BATCH, len(inputs)))
    checked = {made.base, *(executable for executable, (file, _) in made.schema_texts.items()
                            if file == made.builder.entry_file)}
    for k in list(state.layers):
        for executable in checked:  # the weight mutants' program, and the code mutants' (no mutant selected)
            try:
                resumed = run_outputs(executable, inputs[rows], state.env(k, False), state.files(k, rows, False))
                stopped = run_outputs(executable, inputs[rows], state.env(k, True), state.files(k, rows, True),
                                      raw=True)
            except RunError:
                resumed = stopped = None
            if resumed is None or not _same_bits(resumed, clean[rows]) or stopped[:, 0].any():
                del state.layers[k]
                break
    return state if state.layers else None


def _confirm(results: list[dict], mutants: list[operators.Mutant], witnesses: dict[str, np.ndarray],
             made: programs.Programs, run_outputs: Callable[..., np.ndarray], reference: str, rule: Rule,
             model: Model, settings: Settings, work: Path, timings: dict) -> None:
    """A weight mutant beyond the tolerance at its witness but within the rounding margin (``detect``): run its
    program (``programs``) on the witness alone against the reference, by the oracle's rule; a fail there makes
    it detectable (``confirmed_by``). The witness comes from the search, never from the test inputs."""
    for result in results:
        found = result.get("detectability") or {}
        if found.get("detectable") is not False or not found.get("beyond_tolerance"):
            continue
        number = int(result["id"][1:])
        mutant, witness = mutants[number], witnesses[result["id"]]
        try:
            program = made.program(number, mutant, work / "witness")
            outputs = run_outputs(program.executable, witness, program.env)
        except RunError as exc:
            found.update(detectable=True, confirmed_by=f"the mutant's C at the witness: {exc}")
            continue
        judged = rule if rule.bound is None else rule_for(model, settings, witness, timings, made.builder.code)
        verdict, cause, _ = judged.judge(outputs, references.get(reference).run(model, witness))
        if verdict != oracle.PASS:
            found.update(detectable=True, confirmed_by=f"the mutant's C at the witness, {judged.name} rule: {cause}")


def _integer_detectability(results: list[dict], mutants: list[operators.Mutant], made: programs.Programs,
                           run_outputs: Callable[..., np.ndarray], clean_build: Path, reference: str, model: Model,
                           settings: Settings, work: Path, timings: dict) -> None:
    """The detectability of every integer constant mutant judged by it (``is_weight``: a multiplier, a bias, an int8
    weight), decided on the domain apart from the test inputs, as the float weights' is (``detect``).

    Under the integer rule the yardstick is exact and the clean code equals it bit for bit, so no search of a
    float64 excess is needed: a killed mutant is detectable (the input that killed it is a witness), and a
    survivor runs on ``INTEGER_SEARCH`` seeded points of the domain (its corners, centre and uniform points drawn
    apart from the test inputs, ``detect.domain_points``); the first whose outputs differ from the clean code's
    is the witness, and the mutant is detectable when the integer rule fails it there against the arbiter
    (``confirmed_by``). A survivor no point separates from the clean code is not detectable on those points: a
    ±1 change of a multiplier of 2^30 or of a bias moves an accumulator's image by a fraction of an LSB, which
    shows only where it carries some output across a rounding boundary (not a proof that no input exists)."""
    judged = [r for r in results if r.get("weight", {}).get("dtype") and is_weight(r) and r["status"] != "stillborn"]
    if not judged:
        return
    points = detect.domain_points(model, np.random.default_rng([settings.seed, INTEGER_SEARCH]), INTEGER_SEARCH)
    points = points.astype(np.float32).reshape(len(points), *model.input_shape)
    clean = None
    for result in judged:
        if result["status"] == "killed":
            result["detectability"] = {"decided": True, "detectable": True, "beyond_tolerance": True,
                                       "reason": "killed by a test input: under the exact integer rule that input "
                                                 "is a witness"}
            continue
        number = int(result["id"][1:])
        try:
            clean = run_outputs(clean_build, points) if clean is None else clean
            program = made.program(number, mutants[number], work / "integer-search")
            outputs = run_outputs(program.executable, points, program.env)
        except RunError as exc:
            result["detectability"] = {"decided": True, "detectable": True, "beyond_tolerance": True,
                                       "confirmed_by": f"the mutant's C on the searched points: {exc}"}
            continue
        differs = ~np.all(np.ascontiguousarray(outputs, np.float32).view(np.uint32).reshape(len(points), -1) ==
                          np.ascontiguousarray(clean, np.float32).view(np.uint32).reshape(len(points), -1), axis=1)
        found = {"decided": True, "detectable": False, "beyond_tolerance": False, "inputs_searched": len(points)}
        if differs.any():
            row = int(np.argmax(differs))
            witness = points[row:row + 1]
            rule = rule_for(model, settings, witness, timings, made.builder.code)
            verdict, cause, _ = rule.judge(outputs[row:row + 1], references.get(reference).run(model, witness))
            found.update(witness_sha256=hashlib.sha256(witness.tobytes()).hexdigest(),
                         inputs_differing=int(differs.sum()))
            if verdict != oracle.PASS:
                found.update(detectable=True, beyond_tolerance=True,
                             confirmed_by=f"the mutant's C at the witness, {rule.name} rule: {cause}")
        else:
            found["reason"] = f"no output bit differs from the clean code's on {len(points)} points of the domain"
        result["detectability"] = found


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
    """Every mutant of the code: code mutants of the entry's file (of every source when the manifest names none:
    a ``dir:`` folder's ``assay.json``), with the zero points integer C writes as literals when the manifest
    declares a requantization rule, weight mutants of the data arrays the manifest names (``symbols.data``,
    the full manifest's or an ``assay.json``'s; none named, none made: which constants are weights is the
    generator's to say, not guessed from the C)."""
    entry = code.manifest.get("entry")
    code_files = [code.directory / entry["file"]] if isinstance(entry, dict) and entry.get("file") else \
        list(code.sources)
    symbols = [s for s in code.manifest.get("symbols", {}).get("data", [])]
    constants = operators.constant_spans(list(code.sources), symbols)  # what the range rules read of the data
    found = [m for path in code_files for m in operators.code_mutants(path, constants)]
    if quantized.quantization_rule(code.manifest) is not None:  # the zero points integer C writes as literals
        found += [m for path in code_files for m in operators.zero_point_mutants(path, code.manifest)]
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


class _Order:
    """The order a mutant runs the judged inputs in: those that killed the most mutants so far first, the others in
    their own order (split-stream testing's early exit: most mutants fail on the few inputs that failed others).

    "So far" is the mutants ``WINDOW`` or more places before it, every one judged by the time it starts whatever
    ``--jobs`` is (it waits for them), so that a mutant's order, and with it its record (the inputs it ran, the
    input its cause names), does not depend on which thread finished first."""

    def __init__(self, inputs: int):
        self.kills: dict[int, np.ndarray] = {}  # mutant number -> the rows of the inputs that failed it
        self.done = 0  # every mutant numbered below is judged
        self.total = np.zeros(inputs, np.int64)  # per input, the mutants numbered below ``done`` it failed
        self.condition = threading.Condition()

    def before(self, number: int) -> np.ndarray:
        """The rows of the judged inputs in the order mutant ``number`` runs them."""
        horizon = number - WINDOW
        with self.condition:
            self.condition.wait_for(lambda: self.done >= horizon)
            counts = self.total.copy()
            for later in range(max(horizon, 0), self.done):
                counts[self.kills[later]] -= 1
        return np.argsort(-counts, kind="stable")

    def judged(self, number: int, rows: np.ndarray) -> None:
        """Mutant ``number`` is judged; the inputs of ``rows`` failed it."""
        with self.condition:
            self.kills[number] = rows
            while self.done in self.kills:
                self.total[self.kills[self.done]] += 1
                self.done += 1
            self.condition.notify_all()


def _batches(order: np.ndarray):
    """``order`` in batches of ``FIRST_BATCH`` rows, then ``GROWTH`` times more each time."""
    start, size = 0, FIRST_BATCH
    while start < len(order):
        yield order[start:start + size]
        start, size = start + size, size * GROWTH


NO_ROWS = np.zeros(0, np.int64)


@dataclass
class _Judge:
    """Runs and classifies one mutant at a time against the clean code's figures."""

    programs: programs.Programs
    run_outputs: Callable[..., np.ndarray]  # executable, canonical inputs, environment -> canonical outputs
    inputs: np.ndarray
    expected: np.ndarray  # the reference's outputs
    clean: np.ndarray  # the unmutated code's outputs
    clean_errors: np.ndarray  # per input, the unmutated code's error against the reference
    rule: Rule  # the oracle's rule on the judged inputs
    work: Path
    settings: Settings
    code: GeneratedCode
    sampled: np.ndarray  # the inputs run under the sanitizers, in the code's layout
    clean_bounds: dict[str, dict]  # per file with code mutants, the clean file's bounds check (``_bounds``)
    order: _Order
    split: split.Split | None  # the clean code's state at the layers a run can start at, if any
    layers: _LayerCheck | None  # the layer-local verdict of the end-to-end rule's survivors, if any
    slots: queue.Queue = field(default_factory=queue.Queue)  # work folder numbers free for a mutant

    def __call__(self, number: int, mutant: operators.Mutant) -> dict:
        path = self.code.directory / mutant.file
        original = path.read_text()
        mutated = mutant.apply(original)
        result = {"id": f"M{number:04d}", "operator": mutant.operator, "file": mutant.file, "line": mutant.line,
                  "description": mutant.description, "diff": _diff(mutant.file, original, mutated),
                  "equivalent_rule": mutant.equivalent, "max_abs_error": None, "effect": None, "inputs_run": 0,
                  "detected_by": None, "cause": None, "class": None, "rule": self.rule.name, "build": None}
        if mutant.element is not None:  # what the detectability search changes in the model (``detect``)
            result["weight"] = _weight(mutant)
        slot = self.slots.get()  # a folder of its own per mutant judged at the same time
        failed = NO_ROWS
        try:
            result, failed = self._judge(number, mutant, result, mutated, slot)
            return result
        finally:
            self.slots.put(slot)
            self.order.judged(number, failed)

    def all(self, mutants: list[operators.Mutant], jobs: int) -> list[dict]:
        """Every mutant's result, in order, ``jobs`` judged at a time (each runs in subprocesses)."""
        for slot in range(max(1, jobs)):
            self.slots.put(slot)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(self, range(len(mutants)), mutants))

    def _judge(self, number: int, mutant: operators.Mutant, result: dict, mutated: str,
               slot: int) -> tuple[dict, np.ndarray]:
        """The mutant's result, and the rows of the inputs that failed it."""
        try:
            program = self.programs.program(number, mutant, self.work / f"mutant-{slot}")
        except RunError as exc:
            return {**result, "status": "stillborn", "cause": str(exc)}, NO_ROWS
        result["build"] = program.build
        layer = program.layer if self.split is not None and program.layer in self.split.layers else None
        order = self.order.before(number)
        outputs, ran, weak = np.empty_like(self.clean), 0, False
        for rows in _batches(order):
            try:
                outputs[rows] = self._run(program, layer, rows)
            except RunError as exc:  # which input of the batch is not known: its first is counted
                return {**result, "status": "killed", "detected_by": "runner", "cause": str(exc),
                        "inputs_run": ran + len(rows)}, rows[:1]
            ran += len(rows)
            seen = order[:ran]
            verdict, cause, max_abs_error = self.rule.judge(outputs[seen], self.expected, seen)
            result.update(inputs_run=ran, max_abs_error=max_abs_error, effect=_largest(outputs[seen], self.clean[seen]))
            if verdict != oracle.PASS:
                return {**result, "status": "killed", "detected_by": "oracle", "cause": cause,
                        "rule_refuted": mutant.equivalent is not None}, \
                    rows[self.rule.failing(outputs[rows], self.expected, rows)]
            # weak mutation, before the other inputs: for a code mutant, or a weight one that a rule judges equivalent
            # (a weight mutant's layer output changes on some input: its weak run would be spent for nothing)
            if layer is not None and ran == len(rows) < len(order) and \
                    (mutant.element is None or mutant.equivalent is not None):
                try:
                    weak = not self._run(program, layer, order, weak=True)[:, 0].any()
                except RunError as exc:
                    return {**result, "status": "killed", "detected_by": "runner", "cause": str(exc),
                            "inputs_run": ran}, NO_ROWS
                if weak:
                    result["weak"] = {"layer": layer, "inputs": len(order), "identical": True}
                    break
        result["above_tolerance"] = False if weak else self.rule.above(outputs, self.clean)
        if mutant.equivalent is not None:
            if weak:  # the layer's output is the clean one on every input: the network's outputs are too
                return {**result, "status": "equivalent"}, NO_ROWS
            if any(mutant.equivalent.startswith(rule) for rule in UP_TO_ROUNDING) and \
                    oracle.infinity_norm_errors(outputs, self.expected).max() > self.clean_errors.max():
                result["cause"] = "equal only up to rounding by its rule, and its error exceeds the clean code's"
            else:
                return {**result, "status": "equivalent"}, NO_ROWS
        if self.layers is not None and not weak:  # weak: every layer's output is the clean code's
            folder = self.work / f"layer-local-{slot}"
            try:
                found = self.layers(programs.mutated_code(self.code, {mutant.file: mutated}, folder / "code"),
                                    self.inputs, order, folder / "build")
            except RunError as exc:
                return {**result, "status": "killed", "detected_by": "runner",
                        "cause": f"the layer-local verdict's probed build: {exc}"}, NO_ROWS
            result["layer_local"] = found
            if found.get("judged") and found["verdict"] != oracle.PASS:
                return {**result, "status": "killed", "detected_by": "oracle", "cause": found["cause"]}, NO_ROWS
        if self.settings.sanitize and mutant.element is None:  # a changed constant cannot change memory accesses
            report = self.programs.sanitizer_report(number, mutant, self.work / f"sanitized-mutant-{slot}",
                                                    self.sampled, self.settings.timeout, self.settings.opt)
            if report is not None:
                return {**result, "status": "killed", "detected_by": "sanitizer", "cause": report}, NO_ROWS
        if mutant.element is None:  # last: what no run saw, an access only some data would drive out of bounds
            found = _bounds(self.code, mutant.file, mutated)["violations"]
            new = [line for line in found if line not in self.clean_bounds[mutant.file]["violations"]]
            if new:
                return {**result, "status": "killed", "detected_by": "bounds",
                        "cause": f"static bounds check: {new[0]}"}, NO_ROWS
        return {**result, "status": "survived", "class": PROBABLY_EQUIVALENT if weak else self._classify(outputs)}, \
            NO_ROWS

    def _run(self, program: programs.Program, layer: int | None, rows: np.ndarray, weak: bool = False) -> np.ndarray:
        """``program``'s outputs on the judged inputs ``rows``, started at ``layer`` when it is not None (``split``);
        ``weak``: stopped after that layer, the first output (in the code's layout) 0 where its output is the
        clean code's."""
        if layer is None:
            return self.run_outputs(program.executable, self.inputs[rows], program.env)
        return self.run_outputs(program.executable, self.inputs[rows], {**(program.env or {}),
                                **self.split.env(layer, weak)}, self.split.files(layer, rows, weak), raw=weak)

    def _classify(self, outputs: np.ndarray) -> str:
        return survivor_class(outputs, self.clean, self.expected, self.clean_errors, self.rule)


def survivor_class(outputs: np.ndarray, clean: np.ndarray, expected: np.ndarray, clean_errors: np.ndarray,
                   rule: Rule) -> str:
    """A survivor's class (``CLASSES``, the module docstring) from its outputs on every judged input."""
    bits = [np.ascontiguousarray(a, dtype=np.float32).view(np.uint32) for a in (outputs, clean)]
    if np.array_equal(*bits):
        return "not_reached"
    if rule.bound is not None and oracle.compare(outputs, expected, rule.atol, rule.rtol).verdict != oracle.PASS:
        return REVIEW
    if oracle.infinity_norm_errors(outputs, expected).max() <= clean_errors.max():
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
    """Whether ``result``'s mutant is judged by its detectability rather than counted in the code kill rate: a
    float weight's, or an integer constant's of an uncounted class (``operators.counted``)."""
    return not operators.counted(result["operator"])


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
            "survivor_classes": {c: sum(r["class"] == c for r in results) for c in CLASSES},
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
