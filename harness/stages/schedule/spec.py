"""The schedule stage's contract (``harness.contract``): one ``schedule.json`` document per model, schema
``assay-schedule/1``; it reads the WCET stage's per-layer bounds (its ``wcet.json``). Its options are declared
here once: ``assay schedule``'s and the defaults of ``run.Settings``."""

from __future__ import annotations

from pathlib import Path

from harness.contract import PER_MODEL, Option, StageSpec
from harness.scheduling.layers import CopyCost

SPEC = StageSpec(
    name="schedule",
    result_file="schedule.json",
    schema="assay-schedule/1",
    reports=("gantt.png", "schedule.html"),
    consumes=("wcet",),
    per=PER_MODEL,
    options=(
        Option("--model", None, "a zoo name or a model file", required=True, field=""),
        Option("--cores", None, "number of identical cores", type=int, required=True),
        Option("--algorithm", None, "ish, dsh (Kruatrachue's heuristics) or cpsat (exact, warm-started with DSH)",
               choices=("ish", "dsh", "cpsat"), required=True),
        Option("--target", "cortex-m4f", "target profile for the WCETs (default {default})"),
        Option("--timing", None, "timing model of the WCETs (default: the target's own)"),
        Option("--variant", None, "assay-v2 variant (keras or onnx; default: the model's first)"),
        Option("--time-limit", 10.0, "seconds CP-SAT may search (default {default}); the best schedule found is kept",
               type=float),
        Option("--workers", 1, "CP-SAT search workers (default {default})", type=int),
        Option("--wcet-json", None, "take per-layer WCETs from this wcet.json instead of running `assay wcet`",
               type=Path),
        Option("--inputs", 20, "inputs measured by `assay wcet` for its soundness check (default {default})", type=int,
               field="n_inputs"),
        # the provisional copy-cost model (run.Settings.cost, made by the command); its defaults are CopyCost's
        Option("--comm-fixed", None, "use the provisional copy-cost model instead of the operators' WCETs: cycles per "
               f"Writing or Reading operator (default {CopyCost.fixed})", type=int, field=""),
        Option("--comm-per-float", None, "use the provisional copy-cost model: cycles per float copied by one "
               f"operator (default {CopyCost.per_float})", type=int, field=""),
    ),
)
