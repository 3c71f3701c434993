"""``assay peers setup [NAME...]`` builds peer environments; ``assay peers list`` shows their state;
``assay peers report FINDING... --out DIR`` writes an upstream-ready reproducer per finding (``report.py``);
``assay peers verify --models ... --out DIR`` puts emx-onnx-cgen's own verifier beside Assay's (``verify.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.contract import SEED, WORK
from harness.errors import ConfigError


def cmd_peers(args: argparse.Namespace) -> int:
    if args.action == "report":
        return _report(args)
    if args.action == "verify":
        return _verify(args)
    from harness.generators import peers

    known = peers.names()
    chosen = args.names or known
    unknown = [name for name in chosen if name not in known]
    if unknown:
        raise ConfigError(f"unknown peer(s) {', '.join(unknown)}; known peers: {', '.join(known)}")
    failed = 0
    for name in chosen:
        env = peers.PeerEnv(name)
        if args.action == "list":
            stamp = env.stamp()
            state = (f"built {stamp['created_at']} in {stamp['setup_s']} s, Python {stamp['python']}" if stamp
                     else "not built (assay peers setup " + name + ")")
            print(f"{name}: {env.directory}: {state}")
            continue
        try:
            stamp = env.setup(log=lambda line: print(line, file=sys.stderr)) if args.force else env.ensure(
                log=lambda line: print(line, file=sys.stderr))
        except peers.PeerEnvError as exc:
            print(f"assay: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: ready in {env.directory} (set-up {stamp['setup_s']} s, {len(stamp['pins'])} pinned packages)")
    return 1 if failed else 0


def _report(args: argparse.Namespace) -> int:
    """One folder per finding under ``--out``; exit 1 when a folder could not be written or its script did not
    run to a verdict (a reproduced defect is the expected outcome, exit 0)."""
    from harness.stages.peers import report

    known = report.findings()
    unknown = [name for name in args.names if name not in known]
    if not args.names or unknown:
        raise ConfigError(f"peers report: name findings to reproduce ({', '.join(unknown) or 'none given'} unknown); "
                          f"known: {', '.join(known)}")
    if args.out is None:
        raise ConfigError("peers report: --out DIR is required")
    failed = 0
    for name in args.names:
        folder = Path(args.out) / name
        outcome = report.write_folder(known[name], folder, Path(args.work),
                                      log=lambda line: print(line, file=sys.stderr))
        print(outcome["stdout"], end="")
        if outcome["exit"] not in (0, 1):
            print(f"assay: error: {name}: reproduce.py exited {outcome['exit']} in the peer's environment "
                  f"(see {outcome['log']})", file=sys.stderr)
            failed += 1
            continue
        print(f"{name}: {folder} ({outcome['last']})")
    return 1 if failed else 0


def _verify(args: argparse.Namespace) -> int:
    """The verdicts side by side in ``--out``; exit 1 when the two disagree on some model and variant."""
    from harness.stages.peers import verify

    if not args.models or args.out is None:
        raise ConfigError("peers verify: --models and --out DIR are required")
    rows = verify.compare([m for m in args.models.split(",") if m], args.inputs, args.seed, Path(args.work),
                          Path(args.out), log=lambda line: print(line, file=sys.stderr))
    text = verify.markdown(rows, args.inputs, args.seed)
    print(text, end="")
    return 0 if "**no**" not in text else 1


def add_command(subparsers) -> None:
    cmd = subparsers.add_parser("peers", help="build or list the isolated environments of external generators; "
                                              "write reproducers of their findings")
    cmd.add_argument("action", choices=("setup", "list", "report", "verify"),
                     help="setup: build (if needed); list: show state; report: a reproducer folder per finding; "
                          "verify: emx-onnx-cgen's own verifier beside Assay's oracle on --models")
    cmd.add_argument("names", nargs="*", help="peer names (default: all); for report, finding names (e.g. A3)")
    cmd.add_argument("--force", action="store_true", help="rebuild even when the environment is current")
    cmd.add_argument("--out", help="report: the folders go to OUT/<finding>/; verify: verify.json and verify.md")
    cmd.add_argument("--models", help="verify: comma-separated zoo names or model files")
    cmd.add_argument("--inputs", type=int, default=3, help="verify: the first N inputs of Assay's set (default 3)")
    cmd.add_argument("--seed", type=int, default=SEED.default, help=f"verify: input seed (default {SEED.default})")
    cmd.add_argument("--work", default=WORK.default,
                     help=f"report, verify: where zoo models, generated C and builds go (default {WORK.default})")
    cmd.set_defaults(func=cmd_peers)
