"""The measured-execution stage's contract (``harness.contract``): ``met.json``, schema ``assay-met/2``."""

from __future__ import annotations

from harness.contract import ERROR, NOT_SUPPORTED, PASS, Option, StageSpec

SPEC = StageSpec(
    name="met",
    result_file="met.json",
    schema="assay-met/2",  # /2: a measured record's verdict is ``pass`` (was ``ok``)
    key_fields=("model", "generator", "variant", "target", "opt", "timing", "n_inputs", "seed"),
    verdicts=(PASS, NOT_SUPPORTED, ERROR),
    passing=(PASS,),
    neutral=(NOT_SUPPORTED,),
    reports=("table2.md",),
    default_targets="arm7tdmi,cortex-m4f",
    options=(  # with the timing options every measuring stage shares (harness.measurement.options)
        Option("--inputs", 100, "seeded inputs measured per model under QEMU (default {default})", type=int,
               field="n_inputs"),
        Option("--redo", False, "recompute items already in met.json", action="store_true"),
        Option("--shard-size", None, "count the inputs in shards of K, kept in OUT/shards/: a killed run resumes "
               "with the missing ones; the records are those of an unsharded run (docs/sharding.md)", type=int,
               metavar="K", field=""),
    ),
)
