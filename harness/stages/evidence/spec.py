"""The evidence stage's contract (``harness.contract``): ``evidence.json`` at the root of the package, schema
``assay-evidence/2``, from the results of the stages it runs. Its options are declared here once: ``assay
evidence``'s and the defaults of ``run.Settings``."""

from __future__ import annotations

from pathlib import Path

from harness.contract import DEFAULT_GENERATORS, FAIL, MODEL_SEED, PASS, SEED, WORK, Option, StageSpec
from harness.core.inputsets import SETS


def names(text: str) -> list[str]:
    """'uniform, corners' -> ['uniform', 'corners']."""
    return [part.strip() for part in text.split(",") if part.strip()]


SPEC = StageSpec(
    name="evidence",
    result_file="evidence.json",
    schema="assay-evidence/2",
    verdicts=(PASS, FAIL, "incomplete"),  # incomplete: the package of a build cut short
    passing=(PASS,),
    consumes=("semantic", "memory", "met", "wcet", "mutate"),
    options=(
        Option("--models", None, "zoo names or model files (comma-separated, repeatable)", action="append", field=""),
        Option("--generators", DEFAULT_GENERATORS, "comma-separated generators (default {default})", field=""),
        Option("--targets", "host,cortex-m4f", "comma-separated targets (default {default}); the host always runs",
               field=""),
        Option("--inputs", 1000, "test inputs (default {default})", type=int, field="n_inputs"),
        Option("--wcet-inputs", 20, "inputs measured under QEMU for cycles and the WCET check (default {default})",
               type=int),
        SEED,
        MODEL_SEED,
        Option("--timeout", 600.0, "seconds allowed for one batch (default {default})", type=float),
        Option("--shard-size", None, "run the semantic and measured-cycles stages in shards of K inputs (resumable; "
               "same records, docs/sharding.md)", type=int, metavar="K"),
        Option("--mutants", None, "mutation analysis (assay mutate) on a seeded sample of this many mutants per code "
               "(default: all of them; 0: not run)", type=int),
        Option("--input-sets", ",".join(SETS), "test input sets (docs/evidence.md): uniform (the --inputs every stage "
               "runs), corners (domain corners and edges), thresholds (points on activation boundaries), coverage "
               "(coverage-directed); default all four", to_setting=names),
        Option("--set-inputs", 200, "inputs of each input set but the uniform one (default {default})", type=int),
        Option("--jobs", 2, "stages, Assay's own test run and mutants run at a time (default {default})", type=int),
        Option("--out", Path("reports/evidence"), "the package folder; OUT.zip is written beside it (default "
               "{default})", type=Path, field=""),
        Option("--work", WORK.default, "where stage runs, builds and caches go (default {default}/)", type=Path,
               field="work_dir"),
        Option("--tor-tests", None, "which of Assay's own tests to run for the tool qualification data (pytest "
               "arguments; default: every test tagged with a requirement but the slow ones, on 2 workers); 'none' to "
               "leave it out", metavar="PYTEST_ARGS"),
        Option("--level", "A", "DO-178C software level of the verified software (A-D): the DO-330 kit's Tool "
               "Qualification Plan determines Assay's TQL for it (default {default})", choices=("A", "B", "C", "D")),
        Option("--sign-key", None, "sign the package with this Ed25519 private key (PEM, e.g. openssl genpkey "
               "-algorithm ed25519): OUT.sig beside it, checked by 'assay evidence verify --public-key'", type=Path,
               metavar="KEY.pem"),
        Option("--tor-junit", None, "use this JUnit XML of Assay's test suite (e.g. CI's pytest --junitxml) instead "
               "of running the tests", type=Path, metavar="FILE"),
    ),
)
