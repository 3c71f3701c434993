"""The semantic campaign in input shards: each shard runs alone (on any worker or host), the merge makes the
record an unsharded run makes.

``run_shard`` runs one shard of an item: the code is generated and built once
per machine (``harness.core.pipeline.generate_once``/``build_once``, whichever
worker comes first), the shard's inputs are the slice of the item's seeded
inputs (``harness.core.shards``), and the C outputs go to the ``ShardStore``
with the shard's own verdict against each reference (its slice of the
reference outputs) so a pytest item can pass or fail on it. The references'
and the float64 arbiter's outputs are computed for the whole input set by the
first shard on a machine to need them (cached on disk, under a lock): the
other workers go on with their shards meanwhile, and every record uses the
same arrays whatever the sharding. A shard already in
the store with the same content key is not run again.

``merge`` reads every shard of an item, checks that they ran the same
generated code (the SHA-256 of its sources, also against this machine's own
copy: remote hosts generate theirs) with the same content key, concatenates
their outputs in input order and hands them to ``run.store_records``, the code
that makes an unsharded run's records: same errors, median, worst input's
global index, verdict, bit comparison and float64 arbiter.
"""

from __future__ import annotations

import socket

import numpy as np

from harness.core import oracle
from harness.core.fingerprint import components_of, differences
from harness.core.pipeline import generate_once
from harness.core.plan import Item, load_model
from harness.core.provenance import record_provenance
from harness.core.results import ResultStore
from harness.core.shards import Shard, ShardStore, StoredShard, concatenate, split
from harness.errors import USER_ERRORS, ConfigError, NotSupported
from harness.references import bounds
from harness.stages.semantic import sanitize
from harness.stages.semantic.run import (DERIVED, Outcome, Settings, arbiter_outputs, base_record, content_key,
                                         model_mismatch, build_and_run, compare_with, derived_rows, keep_outputs,
                                         layer_local, quantization_rule, run_item, store_records)

OUTPUTS = "outputs"  # the shard file's array of C outputs (canonical layout)


def check_settings(settings: Settings, shard_size: int) -> None:
    """Refuse what sharding cannot do, before anything runs."""
    split(settings.n_inputs, shard_size)
    if settings.parallel is not None:
        raise ConfigError("--shard-size does not apply to parallel code (--cores N): its runs check whole traces")


def run_shard(item: Item, shard: Shard, settings: Settings, shards: ShardStore) -> StoredShard:
    """Run (or find stored) one shard of ``item``; item faults become the shard's cause, never an exception.

    A model that cannot be loaded raises (USER_ERRORS): there is no content key to store a shard under.
    """
    model = load_model(item.model, settings)
    fingerprint = content_key(item, model, settings)
    stored = None if settings.redo else shards.get(item.id, fingerprint, shard)
    if stored is not None:
        return stored
    timings: dict[str, float] = {}
    provenance: dict = {**record_provenance(), "model_sha256": model.sha256()}
    warnings: list[str] = []
    arrays: dict[str, np.ndarray] = {}
    cause, failure = None, oracle.ERROR
    try:
        code = generate_once(item, model, settings, timings, provenance)
        warnings += model_mismatch(code, model)
        arrays[OUTPUTS] = build_and_run(item, item.target, code, model, settings, timings, provenance, shard)
        if shard.index == 0:  # the sanitized sample is drawn from the whole input set: one shard runs it
            sanitize.check(item, code, model, settings, provenance, timings)
    except NotSupported as exc:
        cause, failure = str(exc), oracle.NOT_SUPPORTED
    except USER_ERRORS as exc:
        cause = str(exc)
    except Exception as exc:  # an unexpected fault is the shard's verdict, not the campaign's end
        cause = f"internal error: {type(exc).__name__}: {exc}"
    if cause is not None:
        arrays.pop(OUTPUTS, None)
        checks = [{**base_record(item, model, ref, settings), "verdict": failure, "cause": cause,
                   "max_abs_error": None} for ref in item.checks]
    else:
        checks = [{**base_record(item, model, ref, settings),
                   **compare_with(ref, model, arrays[OUTPUTS], None, settings, timings,
                                  slice(shard.start, shard.stop))} for ref in item.checks]
        if settings.arbiter:  # made here, once per machine, while other workers run their shards: the merge
            arbiter_outputs(model, settings, timings)  # finds it ready instead of computing it alone at the end
    meta = {"cause": cause, "failure": failure, "timings": timings, "provenance": provenance,
            "warnings": warnings, "checks": checks, "host": socket.gethostname()}
    shards.put(item.id, fingerprint, shard, arrays, meta)
    return shards.get(item.id, fingerprint, shard)


def merge(item: Item, settings: Settings, shard_size: int, shards: ShardStore, store: ResultStore) -> list[dict] | None:
    """Store and return the item's records made from its shards, or None while a shard is missing."""
    model = load_model(item.model, settings)
    fingerprint = content_key(item, model, settings)
    stored = [shards.get(item.id, fingerprint, shard) for shard in split(settings.n_inputs, shard_size)]
    if any(shard is None for shard in stored):
        return None
    timings = _summed([shard.meta["timings"] for shard in stored])
    timings["shards"] = len(stored)
    first = stored[0].meta
    outcome = Outcome(None, warnings=first["warnings"])
    broken = next((shard.meta for shard in stored if shard.meta["cause"] is not None), None)
    if broken is not None:
        index, start, stop = broken["shard"]
        outcome.cause, outcome.failure = f"{Shard(index, start, stop).id}: {broken['cause']}", broken["failure"]
        return store_records(item, model, settings, store, outcome, fingerprint, timings, first["provenance"])
    try:
        code = generate_once(item, model, settings, {}, {})
        outcome.order = bounds.Order.from_manifest(code.manifest)
        outcome.rule = quantization_rule(code.manifest)
        outcome.cause = _different_code(stored, code.source_hashes())
        if outcome.cause is None:
            outcome.outputs = concatenate(stored, OUTPUTS)
            outcome.bits = keep_outputs(item, model, code, outcome.outputs, settings)
            # every layer of the C read on all the item's inputs at once, as an unsharded run reads them
            outcome.rows = derived_rows(item, model, settings, outcome.outputs) if settings.tolerance == DERIVED \
                else None
            outcome.layer_local = layer_local(item, code, model, settings, timings, outcome.order, outcome.rows)
    except USER_ERRORS as exc:
        outcome.cause = f"merging the shards: {exc}"
    return store_records(item, model, settings, store, outcome, fingerprint, timings, first["provenance"])


def run_item_sharded(item: Item, settings: Settings, shard_size: int, shards: ShardStore,
                     store: ResultStore) -> list[dict]:
    """The item in shards, one after the other (``assay semantic --shard-size K``): finished shards are kept,
    so a killed run resumes with the missing ones; the records are the unsharded run's."""
    try:
        model = load_model(item.model, settings)
    except USER_ERRORS:
        return run_item(item, settings, store)  # records the load error as an unsharded run does
    if not settings.redo:
        previous = store.find_all([base_record(item, model, ref, settings) for ref in item.checks],
                                  content_key(item, model, settings))
        if previous is not None:
            return previous
    for shard in split(settings.n_inputs, shard_size):
        run_shard(item, shard, settings, shards)
    return merge(item, settings, shard_size, shards, store)


def _different_code(stored: list[StoredShard], own: dict[str, str]) -> str | None:
    """A cause when a shard ran other generated code than this machine generates (hosts must agree)."""
    for shard in stored:
        theirs = shard.meta["provenance"].get("sources_sha256")
        if theirs != own:
            differing = sorted(name for name in {*own, *(theirs or {})} if own.get(name) != (theirs or {}).get(name))
            return (f"shard {shard.meta['shard'][0]} (host {shard.meta['host']}) ran generated code that differs from "
                    f"this host's ({socket.gethostname()}) in {', '.join(differing)}: generator or tool versions "
                    f"differ between hosts")
    return None


def other_key(own: str, meta: dict, origin: str) -> str:
    """Why a shard from ``origin`` (its host, as the controller knows it) is not merged: every component of its
    content key that differs from this host's ``own`` ("target.compiler: gcc 12.3.0 on build2, gcc 12.2.0
    here"), and the differences from the tested configuration that ``assay doctor`` found there and not here."""
    here = components_of(own)
    found = differences(here, meta["key"], origin) if here and meta.get("key") else []
    text = f"the shards from {origin} have another content key than this host's ({socket.gethostname()})"
    text += (": " + "; ".join(map(str, found))) if found else " (no components of both keys to compare)"
    theirs = meta.get("provenance", {}).get("configuration", {}).get("differences", [])
    ours = set(record_provenance()["configuration"]["differences"])
    doctor = [line for line in theirs if line not in ours]
    return text + (f"; assay doctor on {origin} only: {'; '.join(doctor)}" if doctor else "")


def _summed(per_shard: list[dict]) -> dict[str, float]:
    """Seconds per step over the shards (generation and compilation happen once, in the first to need them)."""
    total: dict[str, float] = {}
    for timings in per_shard:
        for step, seconds in timings.items():
            total[step] = total.get(step, 0.0) + seconds
    return total
