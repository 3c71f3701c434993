"""The semantic-preservation campaign: model -> generator -> build -> run -> compare.

An *item* is one (model, generator, variant, target, optimisation level); running
it produces one record per reference. Every failure inside an item (generator
exception, compile error, crash, hang, NaN) becomes an ``error`` record with a
one-line cause, and the next item runs. Records go to the ``ResultStore`` as
soon as they exist; an item whose records are all there is skipped unless
``redo`` is set.
"""

from __future__ import annotations

import hashlib
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from harness import references, runners, targets
from harness.core.inputs import make_inputs
from harness.core.pipeline import build_code, from_code_layout, generate_code, item_dir, slug, to_code_layout
from harness.core.plan import Item, Plan, Settings, expand, load_model
from harness.core.provenance import tool_versions
from harness.core.results import ResultStore
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.models.model import Model
from harness.stages.semantic import bitcompare, oracle

HOST = "host"  # the target every other target is compared with bit for bit


def plan(models: list[str], generator_specs: list[str], reference_names: list[str],
         target_names: list[str], settings: Settings) -> Plan:
    """Expand the campaign into items; a model that cannot be loaded is reported, not fatal."""
    refs = [references.get(name) for name in reference_names]

    def checks_for(model: Model | None, _profile) -> tuple[str, ...]:
        return tuple(ref.name for ref in refs if model is None or ref.supports(model))

    return expand(models, generator_specs, target_names, settings, checks_for)


def _base_record(item: Item, model: Model | None, reference: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "reference": reference, "n_inputs": settings.n_inputs, "seed": settings.seed,
            "tolerance": model.tolerance if model else None,
            "input_domain": model.domain_json() if model else None}


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Run one item and store one record per reference; never raises for item faults."""
    if not settings.redo:
        previous = store.find_all([_base_record(item, None, ref, settings) for ref in item.checks])
        if previous is not None:
            return previous
    timings: dict[str, float] = {}
    provenance: dict = {"tools": tool_versions()}
    model: Model | None = None
    bits = None
    try:
        model = load_model(item.model, settings)
        provenance["model_sha256"] = model.sha256()
        code = generate_code(item, model, settings, timings, provenance)
        outputs = _build_and_run(item, item.target, code, model, settings, timings, provenance)
        np.save(_outputs_path(item, item.target, settings), outputs)
        cause = None
        if item.target != HOST:
            bits = _bits_vs_host(item, model, code, outputs, settings)
    except (runners.RunError, AssayError) as exc:
        outputs, cause = None, str(exc)
    except Exception as exc:  # an unexpected fault is a verdict too, not the campaign's end
        outputs, cause = None, f"internal error: {type(exc).__name__}: {exc}"
    records = []
    for ref_name in item.checks:
        record = _base_record(item, model, ref_name, settings)
        record.update(timings=dict(timings), provenance=provenance, bits_vs_host=bits)
        if outputs is None:
            record.update(verdict=oracle.ERROR, cause=cause, max_abs_error=None,
                          median_abs_error=None, index_of_worst_input=None)
        else:
            record.update(_compare_with(ref_name, model, outputs, settings, record["timings"]))
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


def _outputs_path(item: Item, target: str, settings: Settings) -> Path:
    """Where a target's outputs are kept, so other targets can be compared with them bit for bit."""
    directory = item_dir(item, settings)
    directory.mkdir(parents=True, exist_ok=True)
    return directory / f"outputs-{target}{settings.opt}-n{settings.n_inputs}-s{settings.seed}.npy"


def _build_and_run(item: Item, target: str, code: GeneratedCode, model: Model, settings: Settings,
                   timings: dict, provenance: dict) -> np.ndarray:
    built = build_code(item, target, code, settings, timings, provenance)
    inputs = make_inputs(model, settings.n_inputs, settings.seed)
    outcome = runners.for_kind(targets.get(target).kind).run(built, to_code_layout(inputs, model, code),
                                                             settings.timeout)
    timings.update(run_s=outcome.wall_seconds, c_run_s=outcome.c_seconds)
    return from_code_layout(outcome.outputs, model, code)


def _bits_vs_host(item: Item, model: Model, code: GeneratedCode, outputs: np.ndarray, settings: Settings) -> dict:
    """Bit-for-bit comparison of this target's outputs with the host's, for the same generated code."""
    host_path = _outputs_path(item, HOST, settings)
    if host_path.is_file():
        host_outputs = np.load(host_path)
    else:
        try:
            host_outputs = _build_and_run(item, HOST, code, model, settings, {}, {})
        except runners.RunError as exc:  # the target's own verdict still stands
            return {"error": f"host run for comparison failed: {exc}"}
        np.save(host_path, host_outputs)
    result = bitcompare.compare(outputs.astype(np.float32), host_outputs.astype(np.float32))
    return {"values": result.values, "differing_values": result.differing_values,
            "differing_inputs": result.differing_rows, "max_ulp": result.max_ulp,
            "nan_mismatches": result.nan_mismatches}


def _compare_with(ref_name: str, model: Model, outputs: np.ndarray, settings: Settings, timings: dict) -> dict:
    try:
        start = time.perf_counter()
        expected = reference_outputs(ref_name, model, settings)
        timings["reference_s"] = time.perf_counter() - start
    except Exception as exc:
        return {"verdict": oracle.ERROR, "cause": f"reference {ref_name} failed: {type(exc).__name__}: {exc}",
                "max_abs_error": None, "median_abs_error": None, "index_of_worst_input": None}
    comparison = oracle.compare(outputs, expected, model.tolerance)
    return {"verdict": comparison.verdict, "cause": comparison.cause, "max_abs_error": comparison.max_abs_error,
            "median_abs_error": comparison.median_abs_error,
            "index_of_worst_input": comparison.index_of_worst_input}


def reference_outputs(ref_name: str, model: Model, settings: Settings) -> np.ndarray:
    """Reference outputs for the campaign inputs, cached on disk per model hash, count and seed."""
    digest = hashlib.sha256(repr(sorted(model.sha256().items())).encode()).hexdigest()[:16]
    path = settings.work_dir / "references" / slug(model.name) / f"{ref_name}-n{settings.n_inputs}-s{settings.seed}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    outputs = references.get(ref_name).run(model, make_inputs(model, settings.n_inputs, settings.seed))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{id(outputs)}.tmp.npy")
    np.save(tmp, outputs)
    tmp.replace(path)
    return outputs
