"""The mutation stage's contract (``harness.contract``): ``mutation.json``, schema ``assay-mutation/1``. Its
options are declared here once: ``assay mutate``'s and the defaults of ``run.Settings``."""

from __future__ import annotations

from harness.contract import ERROR, FAIL, PASS, Option, StageSpec
from harness.core.inputsets import SETS


def names(text: str) -> tuple[str, ...]:
    """'uniform, corners' -> ('uniform', 'corners')."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


SPEC = StageSpec(
    name="mutate",
    result_file="mutation.json",
    schema="assay-mutation/1",
    key_fields=("model", "generator", "variant", "n_inputs", "seed"),
    verdicts=(PASS, FAIL, ERROR),
    passing=(PASS,),
    reports=("mutation.md",),
    options=(
        Option("--variants", None, "comma-separated generator variants (default: all, e.g. keras,onnx)", field=""),
        Option("--inputs", 1000, "test inputs (default {default})", type=int, field="n_inputs"),
        Option("--seeds", 10, "input seeds (SEED, SEED+1, ...) the unmutated code must pass on (default {default})",
               type=int),
        Option("--reference", None, "reference runtime (default keras, else onnxruntime)"),
        Option("--atol", None, "absolute tolerance (default: the model's own)", type=float),
        Option("--rtol", None, "relative tolerance (default: the model's own)", type=float),
        Option("--tolerance", "fixed", "the oracle's rule: fixed, |C - reference| <= atol + rtol x |reference| "
               "(--atol, --rtol); derived, |C - float64| <= the bound of a correct float32 implementation per output "
               "and input (docs/semantic.md; a model with an op that has no bound falls back to fixed, visibly). "
               "Default {default}", choices=("fixed", "derived")),
        Option("--weights-per-array", 2, "weights perturbed per array and relative amount (default {default})",
               type=int),
        Option("--max-mutants", None, "run a seeded sample of this many mutants (default: all)", type=int),
        Option("--sanitize", 20, "inputs each survivor and the clean code run under ASan and UBSan (default "
               "{default}; 0: none)", type=int),
        Option("--input-sets", ",".join(SETS), "inputs the mutants are judged on (docs/mutation.md): uniform "
               "(--inputs), corners, thresholds, coverage (--set-inputs each); default all four", to_setting=names),
        Option("--set-inputs", 100, "inputs of each input set but the uniform one (default {default})", type=int),
        Option("--builds", "schemata", "how mutants are built: schemata, every code mutant of a file compiled into "
               "one program that picks the mutant at run time, a weight mutant's element written into the clean "
               "executable; per-mutant, one build per mutant (the checked fallback: the same kills). Default {default}",
               choices=("schemata", "per-mutant")),
        Option("--jobs", 2, "mutants built and run at a time (default {default}; the results do not depend on it)",
               type=int),
        Option("--workers", 2, "items (model, generator, variant) analysed at a time, each in a process of its own "
               "(default {default}: one item's float64 search keeps one core busy while its mutants' short runs "
               "leave the other idle part of the time; 1: one after another in this process)", type=int),
        Option("--timeout", 600.0, "seconds allowed for one batch (default {default})", type=float),
        Option("--redo", False, "recompute items already in mutation.json", action="store_true"),
    ),
)
