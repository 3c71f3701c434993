"""The exploration stage's contract (``harness.contract``): one ``explore.json`` document per model, schema
``assay-explore/1``, from the semantic, memory, met and wcet stages' results. Its options are declared here once:
``assay explore``'s and the defaults of ``run.Settings``."""

from __future__ import annotations

from harness.contract import DEFAULT_GENERATORS, PER_MODEL, Option, StageSpec

SPEC = StageSpec(
    name="explore",
    result_file="explore.json",
    schema="assay-explore/1",
    reports=("pareto.md", "index.html"),
    consumes=("semantic", "memory", "met", "wcet"),
    per=PER_MODEL,
    options=(
        Option("--model", None, "a trained zoo model: digits-cnn, digits-mlp or tabular-ae (assay zoo list)",
               required=True),
        Option("--steps", 10, "J: configurations j = 0..J (default {default})", type=int),
        Option("--target", "cortex-m4f", "QEMU target profile (default {default})"),
        Option("--timing", None, "timing model for measured cycles and WCET (default: the target's own)"),
        Option("--retrain-epochs", 0, "E: retrain each pruned configuration for E epochs, seeded by --seed "
               "(default {default})", type=int),
        Option("--slack", 0.01, "sensitivity threshold T = the unpruned model's error + SLACK (default {default}; the "
               "paper's T is the unpruned error itself, --slack 0)", type=float),
        # sizes such as 96k: the command turns them into bytes (run.parse_size) for Settings.ram_limit, rom_limit
        Option("--ram-limit", None, "RAM budget, e.g. 96k (the paper's CPU2/CPU3 scratchpad)", field=""),
        Option("--rom-limit", None, "ROM budget, e.g. 1M", field=""),
        Option("--inputs", 20, "seeded inputs run under QEMU per configuration for met, wcet and the measured stack "
               "(default {default})", type=int),
        Option("--semantic-inputs", 100, "seeded inputs of the semantic oracle per configuration (default {default})",
               type=int),
        Option("--generator", DEFAULT_GENERATORS, "generator (default {default})"),
        Option("--variant", "keras", "the generator variant whose figures are explored (default {default})"),
        Option("--timeout", 600.0, "seconds allowed for one run (default {default})", type=float),
        Option("--jobs", 2, "stages run at once (default {default})", type=int),
    ),
)
