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

Records go to ``met.json`` as they are computed (schema ``assay-met/2``, ``spec``); a
re-run skips items whose records are all there. ``report.write_table2`` renders them.
A measured record's verdict is ``pass``; every failure inside an item becomes an ``error`` record with a
one-line cause.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from harness.core.plan import Item
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.core.oracle import ERROR, NOT_SUPPORTED, PASS
from harness.core.shards import Shard, ShardStore, concatenate, split
from harness.errors import USER_ERRORS, NotSupported
from harness.measurement.cycles import Figures, Settings, content_key, count_item, price, stats
from harness.stages.met.spec import SPEC
from wcet import timing

SCHEMA = SPEC.schema
KEY_FIELDS = SPEC.key_fields
STAGE = "met"  # work subdirectory, so a concurrent semantic campaign's code is left alone


def open_store(path: Path) -> ResultStore:
    """``met.json``: records keyed by KEY_FIELDS, written as they come (harness.core.results)."""
    return ResultStore.of(SPEC, path)


def _base_record(item: Item, timing_name: str, settings: Settings) -> dict:
    return {"model": item.model, "generator": item.generator, "variant": item.variant, "target": item.target,
            "opt": settings.opt, "timing": timing_name, "n_inputs": settings.n_inputs, "seed": settings.seed}


def run_item(item: Item, settings: Settings, store: ResultStore, shard_size: int | None = None,
             shards: ShardStore | None = None) -> list[dict]:
    """Count, price and store one item; never raises for faults of the item (they become error records).

    With ``shard_size``, the inputs are counted in shards kept in ``shards`` (a killed run resumes with the
    missing ones) and the records are those of an unsharded run: instructions and cycles are per input.
    """
    fingerprint = content_key(item, settings)
    if not settings.redo and fingerprint is not None:
        previous = store.find_all([_base_record(item, name, settings) for name in item.checks], fingerprint)
        if previous is not None:
            return previous
    seconds: dict[str, float] = {}
    provenance: dict = record_provenance()
    models = [timing.get(name, **settings.timing_options.get(name, {})) for name in item.checks]
    if shard_size is None or fingerprint is None:
        priced, manifest = _count_and_price(item, settings, models, seconds, provenance)
    else:
        priced, manifest = _sharded(item, settings, models, fingerprint, shard_size, shards, seconds, provenance)
    records = []
    for model in models:
        record = _base_record(item, model.name, settings)
        record.update(timing_params=model.params(), seconds=dict(seconds), provenance=provenance,
                      fingerprint=fingerprint)
        figures = priced[model.name]
        if isinstance(figures, NotSupported):  # the generator's own refusal, as in the semantic campaign
            record.update(verdict=NOT_SUPPORTED, cause=str(figures))
        elif isinstance(figures, str):
            record.update(verdict=ERROR, cause=figures)
        else:
            record.update(verdict=PASS, cause=None, **summarise(figures, manifest))
        record["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        store.put(record)
        records.append(record)
    return records


Priced = dict[str, Figures | str | NotSupported]  # timing model name -> its figures, or why it has none


def _count_and_price(item: Item, settings: Settings, models: list[timing.TimingModel], seconds: dict,
                     provenance: dict, shard: Shard | None = None) -> tuple[Priced, dict]:
    """Count the item's inputs (or a shard of them) under QEMU and price them with each timing model."""
    try:
        counts, code, _ = count_item(item, settings, STAGE, seconds, provenance, shard)
    except NotSupported as exc:
        return {model.name: exc for model in models}, {}
    except USER_ERRORS as exc:
        return {model.name: str(exc) for model in models}, {}
    except Exception as exc:  # a generator crash is a verdict, not the campaign's end
        return {model.name: f"{type(exc).__name__}: {exc}" for model in models}, {}
    priced: Priced = {}
    start = time.perf_counter()
    for model in models:
        try:
            priced[model.name] = price(counts, model)
        except USER_ERRORS as exc:  # TimingError: an instruction the model has no timing for
            priced[model.name] = str(exc)
    seconds["price_s"] = time.perf_counter() - start
    return priced, code.manifest


def _sharded(item: Item, settings: Settings, models: list[timing.TimingModel], fingerprint: str, shard_size: int,
             shards: ShardStore, seconds: dict, provenance: dict) -> tuple[Priced, dict]:
    """Count and price every missing shard, then join the shards' per-input figures in input order."""
    stored = []
    for shard in split(settings.n_inputs, shard_size):
        found = None if settings.redo else shards.get(item.id, fingerprint, shard)
        if found is None:
            shard_seconds: dict[str, float] = {}
            shard_provenance: dict = record_provenance()
            priced, manifest = _count_and_price(item, settings, models, shard_seconds, shard_provenance, shard)
            if any(isinstance(figures, NotSupported) for figures in priced.values()):
                return priced, manifest  # a refusal of the model, not of these inputs: nothing to keep
            arrays = {f"{name}.{kind}": getattr(figures, kind) for name, figures in priced.items()
                      if not isinstance(figures, str) for kind in ("instructions", "cycles")}
            causes = {name: f"{shard.id}: {cause}" for name, cause in priced.items() if isinstance(cause, str)}
            meta = {"causes": causes,
                    "bucket_names": next((f.bucket_names for f in priced.values() if not isinstance(f, str)), []),
                    "manifest": manifest, "seconds": shard_seconds, "provenance": shard_provenance}
            shards.put(item.id, fingerprint, shard, arrays, meta)
            found = shards.get(item.id, fingerprint, shard)
        stored.append(found)
    for shard in stored:
        for step, value in shard.meta["seconds"].items():
            seconds[step] = seconds.get(step, 0.0) + value
    provenance.update(stored[0].meta["provenance"])
    priced: Priced = {}
    for model in models:
        cause = next((shard.meta["causes"][model.name] for shard in stored if model.name in shard.meta["causes"]), None)
        priced[model.name] = cause if cause is not None else Figures(
            bucket_names=stored[0].meta["bucket_names"], instructions=concatenate(stored, f"{model.name}.instructions"),
            cycles=concatenate(stored, f"{model.name}.cycles"), timing=model)
    return priced, stored[0].meta["manifest"]


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
