"""The conformance suite's contract (``harness.contract``): ``conformance.json``, schema
``assay-conformance/1``, one verdict per (case, generator, variant): from the semantic stage's records (the
Keras suite) or from the node cases' own runs (``--suite onnx-node``). Its
options are declared here once: ``assay conformance``'s and the defaults of ``run.Settings``."""

from __future__ import annotations

from pathlib import Path

from harness.contract import DEFAULT_GENERATORS, ERROR, FAIL, NOT_SUPPORTED, PASS, SEED, WORK, Option, StageSpec

SPEC = StageSpec(
    name="conformance",
    result_file="conformance.json",
    schema="assay-conformance/1",
    verdicts=(PASS, FAIL, ERROR, NOT_SUPPORTED),
    passing=(PASS,),
    neutral=(NOT_SUPPORTED,),
    reports=("conformance.md",),
    consumes=("semantic",),
    options=(
        Option("--suite", "keras", "keras: Assay's single-layer Keras cases through assay semantic; onnx-node: the "
               "ONNX backend node tests of the installed onnx package, on their own inputs (default {default})",
               choices=("keras", "onnx-node")),
        Option("--generators", DEFAULT_GENERATORS, "comma-separated generators; NAME:V1+V2 keeps some variants only, "
               "e.g. acetone-nnet:6loops:default (default {default})", field=""),
        Option("--cases", None, "comma-separated shell patterns of case names, e.g. 'dense*,conv_same*' (default all; "
               "repeatable)", action="append", field=""),
        Option("--inputs", 100, "test inputs per case (default {default})", type=int, field="n_inputs"),
        SEED,
        Option("--jobs", 1, "generators run at the same time, each in its own process (default {default})", type=int),
        Option("--timeout", None, "seconds allowed for one generator's whole run (default none)", type=float),
        Option("--out", Path("reports/conformance"), "conformance.json, conformance.md and repro/ go here (default "
               "{default})", type=Path, field=""),
        Option("--work", WORK.default, "where the cases, the generated C, builds and stage runs go (default "
               "{default}/)", type=Path, field="work_dir"),
        Option("--quiet", False, "no progress lines", action="store_true", field=""),
    ),
)
