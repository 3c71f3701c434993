"""``assay conformance``: the conformance cases against every selected generator and variant.

Exit status: 0 when every result passed or is not supported, 1 when any failed or had an error,
2 for bad input (an unknown generator, a case pattern matching nothing).
"""

from __future__ import annotations

import argparse
import sys

from harness.cli import csv_list
from harness.stages.conformance.spec import SPEC


def cmd_conformance(args: argparse.Namespace) -> int:
    from harness.stages.conformance import onnx_node, run
    from harness.stages.conformance.report import counts, write_conformance_report

    settings = run.Settings(generators=csv_list(args.generators), out=args.out,
                            patterns=[p for value in args.cases or [] for p in csv_list(value)] or None,
                            **SPEC.settings_values(lambda dest: getattr(args, dest)))
    run.check_settings(settings)
    quiet = args.quiet
    suite = onnx_node.run if settings.suite == onnx_node.SUITE else run.run
    document = suite(settings, progress=lambda line: None if quiet else print(line, file=sys.stderr))
    paths = write_conformance_report(SPEC.path(args.out), args.out)
    for name, row in counts(document["results"]).items():
        print(f"{name}: " + ", ".join(f"{row[v]} {v}" for v in run.VERDICTS))
    for path in [SPEC.path(args.out), *paths]:
        print(f"report: {path}")
    bad = [r for r in document["results"] if SPEC.failed(r)]
    return 1 if bad else 0


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "conformance", help="conformance suite: single-layer and small-graph models, or the ONNX backend node "
                            "tests, against every generator",
        description="--suite keras (default) builds the conformance cases (one small Keras 3 model per layer type "
                    "and option, seeded weights, cached in WORK/conformance), runs them through `assay semantic` "
                    "once per generator (host, references keras and onnxruntime); each failing or erring case gets "
                    "its model copied into OUT/repro/ and the command that reproduces it. --suite onnx-node "
                    "prepares the ONNX backend node tests of the installed onnx package (cached in "
                    "WORK/onnx-node) and runs each on its own inputs on the host against its expected outputs and "
                    "ONNX Runtime (--inputs and --seed do not apply). Both write OUT/conformance.json and "
                    "OUT/conformance.md, a matrix case x generator (variant) (onnx-node: also per op).")
    SPEC.add_options(parser)  # spec.py: declared once, run.Settings' defaults too
    parser.set_defaults(func=cmd_conformance)
