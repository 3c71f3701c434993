"""The memory stage's contract (``harness.contract``): ``memory.json``, schema ``assay-memory/2``."""

from __future__ import annotations

from harness.contract import ERROR, FAIL, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED, Option, StageSpec

SPEC = StageSpec(
    name="memory",
    result_file="memory.json",
    schema="assay-memory/2",  # /2: the record's ``status`` became ``verdict``
    key_fields=("model", "generator", "variant", "target", "opt"),
    verdicts=(PASS, UNBOUNDED, NOT_SUPPORTED, NOT_MEASURED, FAIL, ERROR),
    passing=(PASS,),
    neutral=(NOT_SUPPORTED, NOT_MEASURED),
    reports=("table5.md",),
    default_targets="arm7tdmi,cortex-m4f,cortex-a15",
    options=(  # assay memory's own options; run.Settings' defaults
        Option("--inputs", 100, "test inputs run under QEMU for the measured stack (default {default})", type=int,
               field="n_inputs"),
        Option("--paint", 16384, "bytes painted below main's stack pointer for the measurement (default {default})",
               type=int),
        Option("--timeout", 600.0, "seconds allowed for one measurement run (default {default})", type=float),
    ),
)
