"""The WCET stage's contract (``harness.contract``): ``wcet.json``, schema ``assay-wcet/1``."""

from __future__ import annotations

from harness.contract import ERROR, FAIL, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED, Option, StageSpec

SPEC = StageSpec(
    name="wcet",
    result_file="wcet.json",
    schema="assay-wcet/1",
    key_fields=("model", "generator", "variant", "target", "opt", "timing", "engine", "n_inputs", "seed"),
    verdicts=(PASS, FAIL, ERROR, UNBOUNDED, NOT_SUPPORTED, NOT_MEASURED),
    passing=(PASS,),
    # unbounded loops in another tool's code are a finding about that tool, not a failure; a bound on an
    # analysis-only target has nothing to be checked against
    neutral=(UNBOUNDED, NOT_SUPPORTED, NOT_MEASURED),
    reports=("table4.md", "layers.md"),
    default_targets="arm7tdmi,cortex-m4f",
    options=(  # with the timing options every measuring stage shares (harness.measurement.options)
        Option("--inputs", 20, "seeded inputs measured per model under QEMU (default {default})", type=int,
               field="n_inputs"),
        Option("--engine", "builtin", "comma-separated engines: builtin (default, no OTAWA needed), otawa (owcet on "
               "PATH or ../shared/otawa-bin unpacked) and/or both (the built-in bound cross-checked against OTAWA: "
               "agreement per function, the first instruction decoded otherwise, the OTAWA error that explains it)",
               field="engines",
               to_setting=lambda text: tuple(part.strip() for part in text.split(",") if part.strip())),
        Option("--otawa-script", "trivial", "OTAWA script for --engine otawa: trivial, generic, stm32 or a path "
               "(default {default})"),
        Option("--otawa-timeout", 120.0, "seconds allowed for one owcet run (default {default})", type=float),
        Option("--redo", False, "recompute items already in wcet.json", action="store_true"),
    ),
)
