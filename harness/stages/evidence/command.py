"""``assay evidence`` (build the package), ``assay evidence verify DIR|DIR.zip`` (recheck it) and
``assay evidence tor-matrix --junit FILE --out DIR`` (the TOR matrix of a run of Assay's own tests)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import csv_list, selected_models


def cmd_evidence(args: argparse.Namespace) -> int:
    if args.evidence_command == "verify":
        return cmd_verify(args)
    if args.evidence_command == "tor-matrix":
        return cmd_tor_matrix(args)
    from harness.stages.evidence import run

    if not args.models:
        raise_missing = "assay evidence needs --models (the network(s) the package is for)"
        print(f"assay: error: {raise_missing}", file=sys.stderr)
        return 2
    from harness.core.inputsets import SETS

    unknown = [name for name in csv_list(args.input_sets) if name not in SETS]
    if unknown or not csv_list(args.input_sets):
        print(f"assay: error: unknown input set {', '.join(unknown) or '(none given)'} (known: {', '.join(SETS)})",
              file=sys.stderr)
        return 2
    settings = run.Settings(models=selected_models(args), generators=csv_list(args.generators),
                            targets=csv_list(args.targets), out=args.out, work_dir=args.work, n_inputs=args.inputs,
                            seed=args.seed, model_seed=args.model_seed, wcet_inputs=args.wcet_inputs,
                            timeout=args.timeout, mutants=args.mutants, tor_tests=args.tor_tests,
                            tor_junit=args.tor_junit, input_sets=csv_list(args.input_sets),
                            set_inputs=args.set_inputs, jobs=args.jobs, shard_size=args.shard_size)
    built = run.build(settings, progress=lambda line: print(line, file=sys.stderr))
    for part, verdict in sorted(built.verdicts.items()):
        print(f"{part}: {verdict}")
    for note in built.notes:
        print(f"note: {note}")
    print(f"evidence package: {built.root} and {built.archive}; verdict {built.verdict}")
    return 0 if built.verdict == "pass" else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from harness.stages.evidence.package import verify

    result = verify(args.package)
    for line in result.lines():
        print(line)
    print(f"{args.package}: {'intact' if result.intact else 'NOT intact'} ({result.checked} files checked)")
    return 0 if result.intact else 1


def cmd_tor_matrix(args: argparse.Namespace) -> int:
    from harness.stages.evidence import tor

    result = tor.write(args.junit, args.out, {"command": None, "junit_given": str(args.junit)})
    for row in result["rows"]:
        print(f"{row['id']}: {row['status']}")
    print(f"{result['requirements']} requirements: " + ", ".join(f"{k} {v}" for k, v in result["counts"].items())
          + f"; verdict {result['verdict']}; matrix in {args.out}")
    return 0 if result["verdict"] == "pass" else 1


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "evidence", help="DO-178C evidence package: configuration index, trace matrix, coverage, results, hashes",
        description="Runs (or reuses, content-keyed) the semantic, memory, met and wcet stages for the models on "
                    "the targets, archives the generated code and the target images, measures structural "
                    "coverage of the generated code by the test inputs (gcc --coverage, gcovr), writes the trace "
                    "matrix and the Software Configuration Index (with the report of 'assay doctor': a package built "
                    "on an untested configuration does not pass), and lists every file with its SHA-256 in "
                    "evidence.json. Writes the folder OUT and the archive OUT.zip. 'assay evidence verify "
                    "OUT|OUT.zip' rechecks every hash.")
    parser.add_argument("--models", action="append", help="zoo names or model files (comma-separated, repeatable)")
    parser.add_argument("--generators", default="assay-v2", help="comma-separated generators (default assay-v2)")
    parser.add_argument("--targets", default="host,cortex-m4f",
                        help="comma-separated targets (default host,cortex-m4f); the host always runs")
    parser.add_argument("--inputs", type=int, default=1000, help="test inputs (default 1000)")
    parser.add_argument("--wcet-inputs", type=int, default=20,
                        help="inputs measured under QEMU for cycles and the WCET check (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the test inputs (default 0)")
    parser.add_argument("--model-seed", type=int, default=0, help="seed for zoo weights (default 0)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for one batch (default 600)")
    parser.add_argument("--shard-size", type=int, metavar="K",
                        help="run the semantic and measured-cycles stages in shards of K inputs (resumable; same "
                             "records, docs/sharding.md)")
    parser.add_argument("--mutants", type=int,
                        help="mutation analysis (assay mutate) on a seeded sample of this many mutants per code "
                             "(default: all of them; 0: not run)")
    parser.add_argument("--input-sets", default="uniform,corners,thresholds,coverage",
                        help="test input sets (docs/evidence.md): uniform (the --inputs every stage runs), corners "
                             "(domain corners and edges), thresholds (points on activation boundaries), coverage "
                             "(coverage-directed); default all four")
    parser.add_argument("--set-inputs", type=int, default=200,
                        help="inputs of each input set but the uniform one (default 200)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="stages, Assay's own test run and mutants run at a time (default 2)")
    parser.add_argument("--out", type=Path, default=Path("reports/evidence"),
                        help="the package folder; OUT.zip is written beside it (default reports/evidence)")
    parser.add_argument("--work", type=Path, default=Path("generated"),
                        help="where stage runs, builds and caches go (default generated/)")
    parser.add_argument("--tor-tests", default=None, metavar="PYTEST_ARGS",
                        help="which of Assay's own tests to run for the tool qualification data (pytest arguments; "
                             "default: every test tagged with a requirement but the slow ones, on 2 workers); "
                             "'none' to leave it out")
    parser.add_argument("--tor-junit", type=Path, default=None, metavar="FILE",
                        help="use this JUnit XML of Assay's test suite (e.g. CI's pytest --junitxml) instead of "
                             "running the tests")
    sub = parser.add_subparsers(dest="evidence_command", metavar="verify|tor-matrix")
    verify = sub.add_parser("verify", help="recheck every file of a package against its evidence.json")
    verify.add_argument("package", type=Path, help="the package folder or its .zip")
    matrix = sub.add_parser("tor-matrix", help="the TOR -> tests -> result matrix of a JUnit XML file of Assay's "
                                               "own tests (docs/tor.md)")
    matrix.add_argument("--junit", type=Path, required=True, help="pytest --junitxml output of Assay's tests")
    matrix.add_argument("--out", type=Path, required=True, help="folder for tor-matrix.json and tor-matrix.md")
    parser.set_defaults(func=cmd_evidence)
