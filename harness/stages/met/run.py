"""Measured execution (paper Tables 2 and 3): instructions and cycles per input and per layer.

An *item* is one (model, generator, variant, target, optimisation level). Its
code is generated, cross-built and run under QEMU on seeded inputs with the
counting plugin (``harness.measurement.execcount``); the exact per-instruction counts are
then priced by each requested timing model (``wcet.timing``, the definitions
the WCET analyzer uses), giving one record per timing model:

- ``instructions`` and ``cycles``: min, median and max over the inputs;
- ``per_input``: the per-input totals, in input order;
- ``layers``: the same figures per manifest layer, plus the generated code
  outside any layer (bucket 0); per input they sum to the total.

Records go to ``met.json`` as they are computed (schema ``assay-met/1``); a
re-run skips items whose records are all there. ``report.write_table2`` renders them.
Every failure inside an item becomes an ``error`` record with a one-line cause.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from harness import runners
from harness.core.plan import Item
from harness.core.provenance import tool_versions
from harness.core.results import ResultStore
from harness.core.oracle import NOT_SUPPORTED
from harness.errors import USER_ERRORS, AssayError, NotSupported
from harness.measurement.cycles import Figures, Settings, content_key, count_item, price, stats
from wcet import timing

SCHEMA = "assay-met/1"
KEY_FIELDS = ("model", "generator", "variant", "target", "opt", "timing", "n_inputs", "seed")
OK, ERROR = "ok", "error"
STAGE = "met"  # work subdirectory, so a concurrent semantic campaign's code is left alone


def open_store(path: Path) -> ResultStore:
    """``met.json``: records keyed by KEY_FIELDS, written as they come (harness.core.results)."""
    return ResultStore(path, SCHEMA, KEY_FIELDS)


def _base_record(item: Item, timing_name: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "timing": timing_name, "n_inputs": settings.n_inputs, "seed": settings.seed}


def run_item(item: Item, settings: Settings, store: ResultStore) -> list[dict]:
    """Count, price and store one item; never raises for faults of the item (they become error records)."""
    fingerprint = content_key(item, settings)
    if not settings.redo and fingerprint is not None:
        previous = store.find_all([_base_record(item, name, settings) for name in item.checks], fingerprint)
        if previous is not None:
            return previous
    seconds: dict[str, float] = {}
    provenance: dict = {"tools": tool_versions()}
    models = [timing.get(name, **settings.timing_options.get(name, {})) for name in item.checks]
    refused = False
    try:
        counts, code, _ = count_item(item, settings, STAGE, seconds, provenance)
        manifest = code.manifest
        cause = None
    except NotSupported as exc:  # the generator's own refusal, as in the semantic campaign
        counts, manifest, cause, refused = None, {}, str(exc), True
    except (runners.RunError, *USER_ERRORS) as exc:
        counts, manifest, cause = None, {}, str(exc)
    except Exception as exc:  # a generator crash is a verdict, not the campaign's end
        counts, manifest, cause = None, {}, f"{type(exc).__name__}: {exc}"
    records = []
    for model in models:
        record = _base_record(item, model.name, settings)
        record.update(timing_params=model.params(), seconds=dict(seconds), provenance=provenance,
                      fingerprint=fingerprint)
        try:
            if refused:
                record.update(verdict=NOT_SUPPORTED, cause=cause)
            elif counts is None:
                raise AssayError(cause)
            else:
                start = time.perf_counter()
                figures = price(counts, model)
                record["seconds"]["price_s"] = time.perf_counter() - start
                record.update(verdict=OK, cause=None, **summarise(figures, manifest))
        except USER_ERRORS as exc:  # TimingError: an instruction the model has no timing for
            record.update(verdict=ERROR, cause=str(exc))
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


def summarise(figures: Figures, manifest: dict) -> dict:
    """The record fields for one timing model: totals, per input, per layer."""
    instructions = figures.instructions.sum(axis=1)
    cycles = figures.cycles.sum(axis=1)
    layers = []
    manifest_layers = manifest.get("layers", [])
    for bucket, name in enumerate(figures.bucket_names):
        layer = manifest_layers[bucket - 1] if bucket > 0 else None
        layers.append({"bucket": bucket, "index": layer["index"] if layer else None, "name": name,
                       "op": layer.get("op") if layer else None,
                       "instructions": stats(figures.instructions[:, bucket]),
                       "cycles": stats(figures.cycles[:, bucket])})
    return {"instructions": stats(instructions), "cycles": stats(cycles),
            "per_input": {"instructions": instructions.tolist(), "cycles": cycles.tolist()},
            "layers": layers}
