"""``assay conformance``: the conformance cases against every selected generator and variant.

Exit status: 0 when every result passed or is not supported, 1 when any failed or had an error,
2 for bad input (an unknown generator, a case pattern matching nothing).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import csv_list


def cmd_conformance(args: argparse.Namespace) -> int:
    from harness.stages.conformance import run
    from harness.stages.conformance.report import counts, write_conformance_report

    settings = run.Settings(generators=csv_list(args.generators), out=args.out,
                            patterns=[p for value in args.cases or [] for p in csv_list(value)] or None,
                            n_inputs=args.inputs, seed=args.seed, work_dir=args.work, jobs=args.jobs,
                            timeout=args.timeout)
    run.check_settings(settings)
    quiet = args.quiet
    document = run.run(settings, progress=lambda line: None if quiet else print(line, file=sys.stderr))
    paths = write_conformance_report(args.out / run.FILE_NAME, args.out)
    for name, row in counts(document["results"]).items():
        print(f"{name}: " + ", ".join(f"{row[v]} {v}" for v in run.VERDICTS))
    for path in [args.out / run.FILE_NAME, *paths]:
        print(f"report: {path}")
    bad = [r for r in document["results"] if r["verdict"] in (run.FAIL, run.ERROR)]
    return 1 if bad else 0


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "conformance", help="conformance suite: single-layer and small-graph models against every generator",
        description="Builds the conformance cases (one small Keras 3 model per layer type and option, seeded "
                    "weights, cached in WORK/conformance), runs them through `assay semantic` once per generator "
                    "(host, references keras and onnxruntime) and writes OUT/conformance.json and "
                    "OUT/conformance.md, a matrix case x generator (variant); each failing or erring case gets "
                    "its model copied into OUT/repro/ and the command that reproduces it.")
    parser.add_argument("--generators", default="assay-v2",
                        help="comma-separated generators; NAME:V1+V2 keeps some variants only, e.g. "
                             "acetone-nnet:6loops:default (default assay-v2)")
    parser.add_argument("--cases", action="append",
                        help="comma-separated shell patterns of case names, e.g. 'dense*,conv_same*' (default all; "
                             "repeatable)")
    parser.add_argument("--inputs", type=int, default=100, help="test inputs per case (default 100)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the test inputs (default 0)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="generators run at the same time, each in its own process (default 1)")
    parser.add_argument("--timeout", type=float, help="seconds allowed for one generator's whole run (default none)")
    parser.add_argument("--out", type=Path, default=Path("reports/conformance"),
                        help="conformance.json, conformance.md and repro/ go here (default reports/conformance)")
    parser.add_argument("--work", type=Path, default=Path("generated"),
                        help="where the cases, the generated C, builds and stage runs go (default generated/)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(func=cmd_conformance)
