"""The semantic-preservation campaign: model -> generator -> build -> run -> compare.

An *item* is one (model, generator, variant, target, optimisation level); running
it produces one record per reference. Every failure inside an item (generator
exception, compile error, crash, hang, NaN) becomes an ``error`` record with a
one-line cause, and the next item runs. Records go to the ``ResultStore`` as
soon as they exist; an item whose records are all there is skipped unless
``redo`` is set.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import references, runners, targets
from harness.targets import HOST
from harness.core.inputs import campaign_inputs, campaign_sha256, make_inputs, user_inputs
from harness.core.pipeline import (build_once, from_code_layout, generate_code, item_dir, private_build,
                                   to_code_layout)
from harness.core import arbiter, layerlocal, oracle
from harness.core.quantized import integer_outputs, is_quantized, not_applicable, quantization_rule, reference_rule
from harness.core.refcache import (ARBITER, FALLBACK, BrokenBound, bounds_identity, derived_bound,
                                   reference_outputs)
from harness.core.fingerprint import item_fingerprint
from harness.core.plan import Item, Plan, expand, load_model
from harness.core.provenance import record_provenance
from harness.core.results import SOURCE, ResultStore
from harness.core.shards import Shard
from harness.digests import digest
from harness.errors import USER_ERRORS, NotSupported
from harness.generators.generated import GeneratedCode
from harness.models import user_files, zoo
from harness.models.model import FLOAT_COUNTERPART, Model
from harness.references import bounds, integer
from harness.stages.semantic import bitcompare, decisions, exportcheck, parallel, sanitize
from harness.stages.semantic.settings import Settings

DERIVED = "derived"  # --tolerance derived: |C - float64| <= the bound of a correct float32 implementation


def plan(models: list[str], generator_specs: list[str], reference_names: list[str],
         target_names: list[str], settings: Settings) -> Plan:
    """Expand the campaign into items; a model that cannot be loaded is reported, not fatal."""
    refs = [references.get(name) for name in reference_names]

    def checks_for(model: Model | None, _profile) -> tuple[str, ...]:
        return tuple(ref.name for ref in refs if model is None or ref.supports(model))

    return expand(models, generator_specs, target_names, settings, checks_for)


def base_record(item: Item, model: Model | None, reference: str, settings: Settings) -> dict:
    atol, rtol = settings.tolerances(model) if model else (settings.atol, settings.rtol)
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "reference": reference, "n_inputs": settings.n_inputs, "seed": settings.seed,
            "model_seed": settings.model_seed, "tolerance": atol, "rtol": rtol,
            "input_domain": model.domain_json() if model else None}


def content_key(item: Item, model: Model, settings: Settings) -> str:
    quantized = {"integer_arbiter": digest([Path(integer.__file__).read_text()])} if is_quantized(model) else {}
    return item_fingerprint(item, model, settings, references=sorted(item.checks), **quantized,
                            tolerances=settings.tolerances(model), arbiter=settings.arbiter,
                            **({"tolerance_rule": DERIVED, "bounds": bounds_identity(), "layer_local":
                                layerlocal.identity(), "derived_inputs": settings.derived_inputs}
                               if settings.tolerance == DERIVED else {}),
                            sanitize=settings.sanitize,
                            parallel=settings.parallel.__dict__ if settings.parallel else None)


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Run one item and store one record per reference; never raises for item faults.

    A stored item is reused only when its records' content key (model bytes, generator, toolchain,
    inputs, tolerances, tools) equals this run's; anything that changed runs again.
    """
    timings: dict[str, float] = {}
    provenance: dict = record_provenance()
    model: Model | None = None
    fingerprint = bits = None
    warnings: list[str] = []
    failure = oracle.ERROR  # the verdict when no outputs exist
    order: bounds.Order | None = None
    rule: str | None = None  # the requantization rule the code declares (a quantized model)
    layers: dict | None = None  # the layer-local verdict (--tolerance derived)
    rows: np.ndarray | None = None  # the inputs the derived rule judges (derived_rows)
    checked: dict = {}  # what the parallel run checked (parallel.py), filled as far as it got
    try:
        model = load_model(item.model, settings)
        fingerprint = content_key(item, model, settings)
        if not settings.redo:
            previous = store.find_all([base_record(item, model, ref, settings) for ref in item.checks], fingerprint)
            if previous is not None:
                return previous
        provenance["model_sha256"] = model.sha256()
        code = generate_code(item, model, settings, timings, provenance)
        warnings += model_mismatch(code, model)
        order = bounds.Order.from_manifest(code.manifest)
        rule = quantization_rule(code.manifest)
        if settings.parallel is not None:
            code, outputs = parallel.generate_and_run(item, model, code, settings.parallel, settings, timings,
                                                      checked)
        else:
            outputs = build_and_run(item, item.target, code, model, settings, timings, provenance)
            sanitize.check(item, code, model, settings, provenance, timings)
            rows = derived_rows(item, model, settings, outputs) if settings.tolerance == DERIVED else None
            layers = layer_local(item, code, model, settings, timings, order, rows)
        cause = None
        bits = keep_outputs(item, model, code, outputs, settings, compare_bits=settings.parallel is None)
    except NotSupported as exc:  # the generator's own refusal: not supported, not an error
        outputs, cause, failure = None, str(exc), oracle.NOT_SUPPORTED
    except USER_ERRORS as exc:
        outputs, cause = None, str(exc)
    except Exception as exc:  # an unexpected fault is a verdict too, not the campaign's end
        outputs, cause = None, f"internal error: {user_files.cause(exc)}"
    return store_records(item, model, settings, store,
                         Outcome(outputs, cause, failure, bits, warnings, order, layers, rows, rule),
                         fingerprint, timings, provenance, checked)


@dataclass
class Outcome:
    """What running an item's code gave: its outputs (canonical layout), or the cause and verdict of none."""

    outputs: np.ndarray | None
    cause: str | None = None
    failure: str = oracle.ERROR  # the verdict when there are no outputs
    bits: dict | None = None  # the bit-for-bit comparison with the host (non-host targets)
    warnings: list[str] = field(default_factory=list)
    order: bounds.Order | None = None  # the order of accumulation the code's manifest declares (derived bound)
    layer_local: dict | None = None  # the layer-local verdict's figures (``layer_local``), None when not judged
    rows: np.ndarray | None = None  # the inputs the derived rule judges (``derived_rows``), made once per item
    rule: str | None = None  # the requantization rule the code's manifest declares (``quantization_rule``)


def derived_rows(item: Item, model: Model, settings: Settings, outputs: np.ndarray) -> np.ndarray:
    """The campaign inputs the derived rule judges (``--derived-inputs N``): a seeded sample of N, then every input
    some reference's fixed tolerance does not pass (NaN included), so that the derived rule, which decides, judges
    every input the fixed one would have failed; all of them with N = 0 or N >= the campaign's size. Why a sample:
    the bound costs 10-100 times the C's run per input (docs/semantic.md, "Cost")."""
    count = len(outputs)
    if settings.derived_inputs <= 0 or settings.derived_inputs >= count or is_quantized(model):
        # every input of a quantized model: its integer arbiter costs no more than a reference
        return np.arange(count)
    chosen = sanitize.sample(count, settings.derived_inputs, settings.seed)
    atol, rtol = settings.tolerances(model)
    c = np.asarray(outputs, np.float64).reshape(count, -1)
    outside = np.zeros(count, bool)
    for ref_name in item.checks:
        try:
            r = np.asarray(reference_outputs(ref_name, model, settings), np.float64).reshape(count, -1)
        except Exception:  # that reference's record says why it has no outputs
            continue
        if r.shape == c.shape:
            with np.errstate(invalid="ignore"):
                outside |= ~(np.abs(c - r) <= atol + rtol * np.abs(r)).all(axis=1)
    return np.concatenate([chosen, np.setdiff1d(np.flatnonzero(outside), chosen)])


def layer_local(item: Item, code: GeneratedCode, model: Model, settings: Settings, timings: dict,
                order: bounds.Order | None, rows: np.ndarray | None) -> dict | None:
    """With ``--tolerance derived``, the layer-local verdict of the item's C (``harness.core.layerlocal``) on the
    inputs the derived rule judges (``derived_rows``): every layer's output read on the host and judged from the C's
    own input to the layer; None under the fixed rule. Layers are read from an instrumented host build, so an item
    of another target is not judged so (its record says why); the host item of the same code is."""
    if settings.tolerance != DERIVED or rows is None:
        return None
    if is_quantized(model):
        return {"rule": layerlocal.RULE, "judged": False, "reason": "a quantized model: the integer arbiter judges "
                                                                      "its outputs bit for bit"}
    if item.target != HOST:
        return {"rule": layerlocal.RULE, "judged": False, "reason": f"layers are read on the {HOST} build alone"}
    start = time.perf_counter()
    try:
        result = layerlocal.judge(code, model, campaign_inputs(model, settings)[rows],
                                  item_dir(item, settings) / "layer-local", settings.timeout, order, rows)
    except USER_ERRORS as exc:  # the instrumented build or its run: the end-to-end verdict stands, visibly alone
        result = {"rule": layerlocal.RULE, "judged": False, "reason": f"the probed build did not run: {exc}"}
    timings["layer_local_s"] = time.perf_counter() - start
    return result


def store_records(item: Item, model: Model | None, settings: Settings, store: ResultStore, outcome: Outcome,
                  fingerprint: str | None, timings: dict, provenance: dict, checked: dict | None = None) -> list[dict]:
    """One record per reference from the item's outputs (verdict, errors, float64 arbiter), stored.

    The one place records are made, whether the outputs came from one run or from merged shards
    (``sharded.merge``): both give the same record.
    """
    outputs, cause = outcome.outputs, outcome.cause
    derived = settings.tolerance == DERIVED
    quantized = outputs is not None and is_quantized(model)
    reference_exact: dict[str, np.ndarray | str] | None = None  # a quantized model's references' own yardsticks
    if quantized:
        exact, bound, reference_exact = integer_yardstick(model, settings, timings, outcome.rule, item.checks)
    else:
        exact = arbiter_outputs(model, settings, timings) if outputs is not None and (settings.arbiter or derived) \
            else None
    if isinstance(exact, dict):
        print(f"{item.id}: {exact['error']}", file=sys.stderr)
    rows = outcome.rows if outcome.rows is not None or outputs is None or not derived \
        else derived_rows(item, model, settings, outputs)
    judged = campaign_inputs(model, settings)[rows] if rows is not None else None
    if not quantized:
        bound = derived_bound(model, settings, timings, judged, outcome.order, rows) if rows is not None else None
    if isinstance(bound, str) and not isinstance(bound, BrokenBound):  # a broken bound is each record's error
        print(f"{item.id}: {bound}", file=sys.stderr)
    # the references sum in orders of their own: they are held to the bound of any order
    any_order = derived_bound(model, settings, timings, judged, index=rows) \
        if outcome.order and isinstance(bound, np.ndarray) and not quantized else bound
    whole = rows is not None and len(rows) == len(outputs)  # a bound of every input, not of a sample
    export = export_check(model, settings, exact, any_order if whole else None) if outputs is not None and \
        exportcheck.applies(model, item.checks) else None
    user = user_inputs(settings.inputs_from, model) if model is not None and settings.inputs_from else None
    guarantee = decisions.guarantee_inputs(model, settings, exact, bound if whole else None, outcome.order, timings) \
        if outputs is not None and decisions.applies(model, settings) else None
    records = []
    source = zoo.source_sha256(item.model)  # which content of the model file the records judge (results.SOURCE)
    for ref_name in item.checks:
        record = base_record(item, model, ref_name, settings)
        record.update({SOURCE: source}, timings=dict(timings), provenance=provenance, bits_vs_host=outcome.bits,
                      fingerprint=fingerprint, warnings=outcome.warnings, arbiter=None, parallel=checked or None,
                      tolerance_rule=settings.tolerance, inputs_from=user.summary() if user else None, decisions=None,
                      accumulation=(outcome.order.key() if outcome.order else "any") if derived else None,
                      layer_local=outcome.layer_local)
        if outputs is None:
            record.update(verdict=outcome.failure, cause=cause, max_abs_error=None,
                          median_abs_error=None, index_of_worst_input=None)
        elif export and ref_name == exportcheck.REFERENCE:
            record.update(compare_with(ref_name, model, outputs, exact, settings, record["timings"], bound=bound,
                                       reference_bound=any_order, subset=rows))
            record.update(verdict=oracle.ERROR, cause=export)
        else:
            record.update(compare_with(ref_name, model, outputs, exact, settings, record["timings"], bound=bound,
                                       reference_bound=any_order, subset=rows,
                                       reference_exact=None if reference_exact is None else reference_exact.get(
                                           ref_name, f"no integer arbiter rule for reference {ref_name}")))
            if quantized:
                record["quantized"] = integer_figures(model, settings, outputs,
                                                      reference_outputs(ref_name, model, settings), outcome.rule) \
                    if record["max_abs_error"] is not None else None
            decided = record.get("derived") or {"fallback": True}
            if "fallback" not in decided:  # the derived rule decided; the fixed one is a second opinion
                record["verdict"], record["cause"] = oracle.with_layers(record["verdict"], record["cause"],
                                                                        outcome.layer_local, decided.get("bound"))
                if record["verdict"] == oracle.PASS and decided.get("fixed_verdict") == oracle.FAIL:
                    judged_by = "bit for bit with the integer arbiter" if quantized else "within the derived bound"
                    record["review"] = f"{judged_by}, above the fixed tolerance: {decided['fixed_cause']}"
        if guarantee is not None and record.get("max_abs_error") is not None:  # the reference's outputs exist
            record["decisions"] = decisions.decide(user, outputs, reference_outputs(ref_name, model, settings),
                                                   guarantee)
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


def model_mismatch(code: GeneratedCode, model: Model) -> list[str]:
    """A warning when prebuilt C says it was generated from another model than the one it is compared with."""
    source = code.manifest.get("model")  # manifest.json: {"sha256": ...}; assay.json: "model_sha256" (optional)
    declared = source.get("sha256") if isinstance(source, dict) else code.manifest.get("model_sha256")
    if declared and declared not in model.sha256().values():
        return [f"{code.directory}: its manifest says it was generated from a model with SHA-256 {declared[:12]}..., "
                f"not {model.name} ({', '.join(f'{k} {v[:12]}...' for k, v in model.sha256().items())})"]
    return []


def _outputs_path(item: Item, target: str, code: GeneratedCode, model: Model, settings: Settings) -> Path:
    """Where a target's outputs are kept, so other targets can be compared with them bit for bit.

    Keyed by the code's content and the inputs, so outputs of other code are never compared.
    """
    directory = item_dir(item, settings)
    directory.mkdir(parents=True, exist_ok=True)
    key = digest([code.source_hashes(), settings.n_inputs, settings.seed,
                  *([campaign_sha256(model, settings)] if settings.inputs_from else [])])[:16]
    return directory / f"outputs-{target}{settings.opt}-{key}.npy"


def keep_outputs(item: Item, model: Model, code: GeneratedCode, outputs: np.ndarray, settings: Settings,
                 compare_bits: bool = True) -> dict | None:
    """Keep this target's outputs for the other targets' bit comparison; return this target's comparison
    with the host's (None on the host itself or when ``compare_bits`` is off)."""
    np.save(_outputs_path(item, item.target, code, model, settings), outputs)
    return _bits_vs_host(item, model, code, outputs, settings) if item.target != HOST and compare_bits else None


def build_and_run(item: Item, target: str, code: GeneratedCode, model: Model, settings: Settings,
                  timings: dict, provenance: dict, shard: Shard | None = None) -> np.ndarray:
    """Build ``code`` for ``target`` (once per machine) and run it on the item's inputs, or a shard of them."""
    built = build_once(item, target, code, settings, timings, provenance)
    runner = runners.for_kind(targets.get(target).kind)
    if shard is None:
        outcome = runner.run(built, to_code_layout(campaign_inputs(model, settings), model, code), settings.timeout)
    else:
        inputs = to_code_layout(make_inputs(model, shard.size, settings.seed, start=shard.start), model, code)
        scratch = item_dir(item, settings) / f"run-{target}{settings.opt}-{shard.start}-{shard.stop}"
        try:
            outcome = runner.run(private_build(built, scratch), inputs, settings.timeout)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    timings.update(run_s=outcome.wall_seconds, c_run_s=outcome.c_seconds)
    return from_code_layout(outcome.outputs, model, code)


def _bits_vs_host(item: Item, model: Model, code: GeneratedCode, outputs: np.ndarray, settings: Settings) -> dict:
    """Bit-for-bit comparison of this target's outputs with the host's, for the same generated code."""
    host_path = _outputs_path(item, HOST, code, model, settings)
    if host_path.is_file():
        host_outputs = np.load(host_path)
    else:
        try:
            host_outputs = build_and_run(item, HOST, code, model, settings, {}, {})
        except runners.RunError as exc:  # the target's own verdict still stands
            return {"error": f"host run for comparison failed: {exc}"}
        np.save(host_path, host_outputs)
    result = bitcompare.compare(outputs.astype(np.float32), host_outputs.astype(np.float32))
    return {"values": result.values, "differing_values": result.differing_values,
            "differing_inputs": result.differing_rows, "max_ulp": result.max_ulp,
            "nan_mismatches": result.nan_mismatches}


def arbiter_outputs(model: Model, settings: Settings, timings: dict) -> np.ndarray | dict:
    """The float64 outputs, or {"error": "arbiter not available: cause"} when the arbiter cannot run this model
    (the op and attribute it lacks: one line on stderr and in table1.md, never silent; a library's whole message,
    frames included, only in the record's ``detail``)."""
    start = time.perf_counter()
    try:
        exact = reference_outputs(ARBITER, model, settings)
    except Exception as exc:  # the arbiter is advice: its failure never changes a fixed-tolerance verdict
        line = str(exc) if isinstance(exc, USER_ERRORS) else user_files.cause(exc)
        return {"error": f"arbiter not available: {line}", **_detail(exc)}
    timings["arbiter_s"] = time.perf_counter() - start
    return exact


def integer_yardstick(model: Model, settings: Settings, timings: dict, rule: str | None, checks: tuple[str, ...]
                      ) -> tuple[np.ndarray | dict, np.ndarray | str, dict[str, np.ndarray | str]]:
    """A quantized model's yardsticks (docs/semantic.md, "Quantized models"): the integer arbiter's outputs under
    the requantization rule the C declares, and the bound 0 (the C must equal them bit for bit); or why not (the
    record falls back to the fixed tolerance, visibly); and, per reference, the arbiter's outputs under that
    reference's own rule (``reference_rule``: ONNX Runtime's float32 requantization, LiteRT's ``litert`` rule), or
    why it has none."""
    own: dict[str, np.ndarray | str] = {}
    for ref_name in checks:
        own_rule = reference_rule(ref_name)
        if own_rule is None:
            own[ref_name] = f"no integer arbiter rule for reference {ref_name}"
            continue
        try:
            own[ref_name] = integer_outputs(model, settings, own_rule)
        except USER_ERRORS as exc:
            own[ref_name] = f"integer arbiter: {exc}"
    why = not_applicable(rule)
    if why is not None:
        return {"error": f"integer arbiter not applicable: {why}"}, f"{why}: {FALLBACK}", own
    start = time.perf_counter()
    try:
        exact = integer_outputs(model, settings, rule)
    except Exception as exc:  # an op or pattern the arbiter refuses, by name: the fixed tolerance decides, visibly
        line = str(exc) if isinstance(exc, USER_ERRORS) else user_files.cause(exc)
        return {"error": f"integer arbiter not available: {line}", **_detail(exc)}, \
            f"no integer verdict ({line}): {FALLBACK}", own
    timings["arbiter_s"] = time.perf_counter() - start
    return exact, np.zeros(exact.shape), own


def integer_figures(model: Model, settings: Settings, outputs: np.ndarray, expected: np.ndarray,
                    rule: str | None) -> dict:
    """What a quantized model's record says beside its verdict: the C's declared rule, one LSB of the output (its
    DequantizeLinear's scale), the largest |C - reference| in LSB (the two follow different documented roundings,
    so they may differ: the verdict is against the integer arbiter) and the quantization error
    (``quantization_error``)."""
    lsb = integer.output_scale(model.file("onnx"))
    distance = float(np.abs(np.asarray(outputs, np.float64) - np.asarray(expected, np.float64)).max(initial=0.0))
    return {"rule": rule, "lsb": lsb, "c_vs_reference_lsb": round(distance / lsb, 6) if lsb else None,
            **quantization_error(model, settings, outputs)}


def quantization_error(model: Model, settings: Settings, outputs: np.ndarray) -> dict:
    """The largest |C - float network| over the campaign's inputs, in real units and in LSB, where the model names
    the float network it quantizes (``FLOAT_COUNTERPART``), run by ONNX Runtime (cached like a reference): what
    quantizing cost, a property of the model that no verdict reads (docs/quantized.md); or why there is none."""
    if FLOAT_COUNTERPART not in model.files:
        return {}
    lsb = integer.real_output_scale(model.file("onnx"))  # an integer output has no real value to compare
    if not lsb:
        return {"quantization_error": None, "quantization_error_why": "the output is not dequantized by one "
                "per-tensor scale: its real value is not defined"}
    view = replace(model, files={"onnx": model.files[FLOAT_COUNTERPART]},
                   file_layouts={"onnx": model.layouts_of(FLOAT_COUNTERPART)})
    try:
        real = reference_outputs("onnxruntime", view, settings)  # the float network as ONNX Runtime runs it
    except USER_ERRORS as exc:
        return {"quantization_error": None, "quantization_error_why": f"the float network: {exc}"}
    error = float(np.abs(np.asarray(outputs, np.float64) - np.asarray(real, np.float64)).max(initial=0.0))
    return {"quantization_error": error, "quantization_error_lsb": round(error / lsb, 6)}


def _detail(exc: BaseException) -> dict:
    """``{"detail": the library's whole message}`` when its one-line cause had to shorten it, else nothing."""
    whole = user_files.detail(exc)
    return {"detail": whole} if whole else {}


def export_check(model: Model, settings: Settings, exact: np.ndarray | dict | None,
                 bound: np.ndarray | str | None) -> str | None:
    """Why Assay's export of a Keras model cannot serve as the ONNX Runtime reference, or None
    (``exportcheck``): within the model's own tolerance (zoo entry or sidecar; ``--atol``/``--rtol`` set the
    verdict rule, not what two faithful float32 evaluations may differ by) plus twice the derived bound of every
    input, else (a sample's bound, or none finite) twice Keras' own distance to float64; with neither, no
    allowance is made up."""
    try:
        keras_outputs = reference_outputs(exportcheck.KERAS, model, settings)
        onnx_outputs = reference_outputs(exportcheck.REFERENCE, model, settings)
    except Exception:  # each reference's own record says why it failed
        return None
    if isinstance(bound, np.ndarray):
        margin = 2 * bound
    elif isinstance(exact, np.ndarray):
        margin = 2 * np.abs(keras_outputs.astype(np.float64) - exact)
    elif isinstance(bound, BrokenBound):  # never a comparison with a bound that is no number
        return exportcheck.no_allowance(str(bound))
    else:
        margin = 0.0
    return exportcheck.export_fault(model, campaign_inputs(model, settings), keras_outputs,
                                    onnx_outputs, model.tolerance, model.rtol, margin=margin)


def compare_with(ref_name: str, model: Model, outputs: np.ndarray, exact: np.ndarray | dict | None,
                 settings: Settings, timings: dict, rows: slice = slice(None),
                 bound: np.ndarray | str | None = None, reference_bound: np.ndarray | str | None = None,
                 subset: np.ndarray | None = None, reference_exact: np.ndarray | str | None = None) -> dict:
    """The verdict and errors of ``outputs`` against reference ``ref_name``'s outputs for inputs ``rows``; with
    ``--tolerance derived`` and a bound of the inputs ``subset`` (``derived_rows``; default all), the verdict is the
    C's distance to float64 against it (``derived``), the reference's against ``reference_bound`` (any order of
    accumulation; default ``bound``) and, for a quantized model, to ``reference_exact`` (its own rule's integer
    arbiter outputs, or why it has none; default ``exact``), and the fixed rule's verdict and cause are kept beside
    it."""
    try:
        start = time.perf_counter()
        expected = reference_outputs(ref_name, model, settings)[rows]
        timings["reference_s"] = time.perf_counter() - start
    except Exception as exc:
        return {"verdict": oracle.ERROR, "cause": f"reference {ref_name} failed: {user_files.cause(exc)}",
                "max_abs_error": None, "median_abs_error": None, "index_of_worst_input": None, **_detail(exc)}
    comparison = oracle.compare(outputs, expected, *settings.tolerances(model))
    if isinstance(exact, np.ndarray) and reference_exact is None:  # a float model's float64 arbiter
        judged = arbiter.arbitrate(outputs, expected, exact[rows], ref_name).as_dict()
    elif isinstance(exact, np.ndarray):  # a quantized model's integer arbiter: its figures are the derived block's
        judged = None
    else:
        judged = exact
    result = {"verdict": comparison.verdict, "cause": comparison.cause, "max_abs_error": comparison.max_abs_error,
              "max_abs_reference": comparison.max_abs_reference, "median_abs_error": comparison.median_abs_error,
              "index_of_worst_input": comparison.index_of_worst_input, "margin": comparison.margin,
              "arbiter": judged}
    if len(model.outputs) > 1 and comparison.max_abs_error is not None:  # several outputs: each one's error, by name
        result["max_abs_error_per_output"] = oracle.per_tensor_errors(outputs, expected,
                                                                      [(t.name, t.size) for t in model.outputs])
    if settings.tolerance == DERIVED:
        picked = np.arange(len(outputs)) if subset is None else subset
        result["derived"] = {**derived_verdict(ref_name, outputs[picked], expected[picked],
                                               exact[rows][picked] if isinstance(exact, np.ndarray) else exact,
                                               bound, reference_bound, picked,
                                               reference_exact[rows][picked] if isinstance(reference_exact, np.ndarray)
                                               else reference_exact),
                             "inputs": len(picked), "fixed_verdict": comparison.verdict,
                             "fixed_cause": comparison.cause}
        if "fallback" not in result["derived"]:
            result.update(verdict=result["derived"]["verdict"], cause=result["derived"]["cause"])
    return result


def derived_verdict(ref_name: str, outputs: np.ndarray, expected: np.ndarray, exact: np.ndarray | dict | None,
                    bound: np.ndarray | str | None, reference_bound: np.ndarray | str | None = None,
                    index: np.ndarray | None = None, reference_exact: np.ndarray | str | None = None) -> dict:
    """The record's ``derived`` figures of the judged inputs (the arrays' rows; ``index``: their numbers in the
    campaign, for the cause): the C's verdict against the bound, the largest bound, the C's and the reference's
    distance to float64, the tightness (bound / |C - f64|), and a reference outside its own bound
    (``reference_bound``, default ``bound``: a reference defect, not the generator's); or ``{"fallback": why}``
    when there is no bound."""
    if not isinstance(exact, np.ndarray):
        why = exact["error"] if isinstance(exact, dict) else "no float64 outputs"
        return {"fallback": f"{why}: the fixed tolerance decides"}
    if isinstance(bound, BrokenBound):  # an error of the oracle, never a comparison with it
        return {"verdict": oracle.ERROR, "cause": f"derived tolerance: {bound}", "bound": None,
                "c_distance": float(arbiter.error(outputs, exact).max(initial=0.0)),
                "reference_distance": float(arbiter.error(expected, exact).max(initial=0.0)), "tightness": None,
                "reference_defect": None}
    if not isinstance(bound, np.ndarray):
        return {"fallback": bound or "no derived bound: the fixed tolerance decides"}
    c = oracle.compare_to_bound(outputs, exact, bound, index)
    if isinstance(reference_exact, str):  # a quantized model's reference without an integer rule of its own
        return {"verdict": c.verdict, "cause": c.cause, "bound": c.bound, "c_distance": c.c_distance,
                "reference_distance": None, "tightness": c.tightness,
                "reference_defect": f"reference {ref_name} not judged: {reference_exact}"}
    own = reference_bound if isinstance(reference_bound, np.ndarray) else bound
    r = oracle.compare_to_bound(expected, exact if reference_exact is None else reference_exact, own, index)
    defect = None if r.verdict == oracle.PASS else f"reference {ref_name} is outside its own bound: {r.cause}"
    if isinstance(reference_bound, BrokenBound):
        defect = f"reference {ref_name} not judged: its any-order {reference_bound}"
    return {"verdict": c.verdict, "cause": c.cause, "bound": c.bound, "c_distance": c.c_distance,
            "reference_distance": r.c_distance, "tightness": c.tightness, "reference_defect": defect}
