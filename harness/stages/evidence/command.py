"""``assay evidence`` (build the package), ``assay evidence verify DIR|DIR.zip [--digest HEX]`` (recheck it) and
``assay evidence tor-matrix --junit FILE --out DIR [--accept-unverified]`` (the TOR matrix of a run of Assay's own
tests)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import csv_list, selected_models
from harness.stages.evidence.spec import SPEC


def cmd_evidence(args: argparse.Namespace) -> int:
    if args.evidence_command == "verify":
        return cmd_verify(args)
    if args.evidence_command == "tor-matrix":
        return cmd_tor_matrix(args)
    if args.evidence_command == "qualify":
        return cmd_qualify(args)
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
                            targets=csv_list(args.targets), out=args.out, command_line=("assay", *sys.argv[1:]),
                            **SPEC.settings_values(lambda dest: getattr(args, dest)))
    built = run.build(settings, progress=lambda line: print(line, file=sys.stderr))
    for part, verdict in sorted(built.verdicts.items()):
        print(f"{part}: {verdict}")
    for note in built.notes:
        print(f"note: {note}")
    print(f"evidence package: {built.root} and {built.archive}; verdict {built.verdict}")
    if built.signature is not None:
        print(f"signature: {built.signature} (Ed25519 over {built.root.name}/evidence.json; 'assay evidence verify "
              f"{built.root} --public-key PUB.pem' checks it)")
    print(f"package digest: {built.digest} (SHA-256 of {built.root.name}/evidence.json, also in "
          f"{built.root.name}.sha256): record it in your configuration management; 'assay evidence verify "
          f"{built.root} --digest {built.digest}' checks the package against it")
    return 0 if built.verdict == "pass" else 1


def cmd_verify(args: argparse.Namespace) -> int:
    from harness.stages.evidence.integrity import verify

    result = verify(args.package, args.digest, args.public_key)
    for line in result.lines():
        print(line)
    print(result.digest)
    if result.beside_only:
        print("warning: the digest file travels with the package, so it proves nothing against a consistent "
              "rewrite: give --digest HEX from your configuration management (and --public-key)")
    print(result.signature)
    print(result.built_by)
    print(f"{args.package}: {'intact' if result.intact else 'NOT intact'} ({result.checked} files checked); "
          f"the package's verdict: {result.verdict}")
    return 0 if result.intact else 1


def cmd_tor_matrix(args: argparse.Namespace) -> int:
    from harness.stages.evidence import tor

    result = tor.write(args.junit, args.out, {"command": None, "junit_given": str(args.junit)})
    for row in result["rows"]:
        print(f"{row['id']}: {row['status']}")
    accepted = args.accept_unverified and result["verdict"] == "unverified"
    print(f"{result['requirements']} requirements: " + ", ".join(f"{k} {v}" for k, v in result["counts"].items())
          + f"; {tor.verdict_line(result).replace('**', '')}"
          + ("; accepted as given (--accept-unverified)" if accepted else "") + f"; matrix in {args.out}")
    return 0 if (result["results_verdict"] if accepted else result["verdict"]) == "pass" else 1


def cmd_qualify(args: argparse.Namespace) -> int:
    from harness.core import qualification
    from harness.stages.evidence.qualify import QualificationFailed, qualify

    try:
        record = qualify(lock=args.lock, tested=args.tested, timeout=args.timeout,
                         progress=lambda line: print(line, file=sys.stderr))
    except QualificationFailed as failed:
        print(f"assay: {failed}", file=sys.stderr)
        return 1
    print(f"this configuration is {qualification.summary(record)}")
    print(f"record, JUnit XML and TOR matrix: {record['folder']}; 'assay doctor' now accepts this configuration, and "
          f"an evidence package built on it carries this run")
    return 0


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "evidence", help="DO-178C evidence package: configuration index, trace matrix, coverage, results, hashes",
        description="Runs (or reuses, content-keyed) the semantic, memory, met and wcet stages for the models on "
                    "the targets, archives the generated code and the target images, measures structural "
                    "coverage of the generated code by the test inputs (gcc --coverage, gcovr), writes the trace "
                    "matrix and the Software Configuration Index (with the report of 'assay doctor': a package built "
                    "on an untested configuration does not pass), and lists every file with its SHA-256 in "
                    "evidence.json. Writes the folder OUT, the archive OUT.zip and the package digest OUT.sha256 "
                    "(printed at the end: record it). 'assay evidence verify OUT|OUT.zip' rechecks every hash, the "
                    "verdicts and the digest.")
    SPEC.add_options(parser)  # spec.py: declared once, run.Settings' defaults too
    sub = parser.add_subparsers(dest="evidence_command", metavar="verify|tor-matrix|qualify")
    verify = sub.add_parser("verify", help="recheck a package: every file against evidence.json, nothing else in it, "
                                           "the verdicts against its results, the package digest (docs/evidence.md)")
    verify.add_argument("package", type=Path, help="the package folder or its .zip")
    verify.add_argument("--digest", metavar="HEX", help="the package digest recorded when it was built (the SHA-256 "
                        "of evidence.json); DIR.sha256 beside the package is checked too when it is there")
    verify.add_argument("--public-key", type=Path, metavar="PUB.pem", help="the signer's Ed25519 public key (PEM): "
                        "DIR.sig beside the package must verify with it over evidence.json")
    matrix = sub.add_parser("tor-matrix", help="the TOR -> tests -> result matrix of a JUnit XML file of Assay's "
                                               "own tests (docs/tor.md)")
    matrix.add_argument("--junit", type=Path, required=True, help="pytest --junitxml output of Assay's tests (its "
                        "test cases must be tests of Assay's suite with their markers)")
    matrix.add_argument("--out", type=Path, required=True, help="folder for tor-matrix.json and tor-matrix.md")
    matrix.add_argument("--accept-unverified", action="store_true",
                        help="the matrix of a given file is unverified (this command did not run the tests) and exits "
                             "1; with this flag it exits 0 when every requirement passed in the file")
    qualifying = sub.add_parser(
        "qualify", help="run Assay's tool-qualification tests on this machine and record the configuration they "
                        "passed on: 'assay doctor' and evidence packages then accept it (docs/configuration.md)",
        description="Runs the tool-qualification tests (the tests of docs/tor.md's requirements, as the evidence "
                    "package runs them) with the compilers, C libraries, QEMU and Python packages installed now. "
                    "When every test passes, it records the configuration (distribution, interpreter, the version of "
                    "every results package of toolchains/tested.toml, the lock's and Assay's sources' SHA-256) with "
                    "the run's JUnit XML and TOR matrix in $XDG_CACHE_HOME/assay/qualified/ (or "
                    "$ASSAY_QUALIFIED_DIR). 'assay doctor' then accepts results packages that moved past "
                    "tested.toml on exactly that configuration, naming the run, and an evidence package built on it "
                    "carries the run. Another version of any of them, another lock or other sources need a new "
                    "run. Exit 0 when recorded, 1 when a test failed (nothing recorded), 2 for bad input.")
    qualifying.add_argument("--timeout", type=float, default=None,
                            help="seconds the tests may take (default: no limit)")
    from harness.core import configuration

    qualifying.add_argument("--lock", type=Path, default=configuration.LOCK,
                            help="the Python lock the record names (default: requirements.lock of this source tree)")
    qualifying.add_argument("--tested", type=Path, default=configuration.TESTED_FILE,
                            help="the tested configuration whose results packages the record names (default: "
                                 "toolchains/tested.toml)")
    parser.set_defaults(func=cmd_evidence)
