"""``assay peers setup [NAME...]`` builds peer environments; ``assay peers list`` shows their state."""

from __future__ import annotations

import argparse
import sys

from harness.errors import ConfigError


def cmd_peers(args: argparse.Namespace) -> int:
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


def add_command(subparsers) -> None:
    cmd = subparsers.add_parser("peers", help="build or list the isolated environments of external generators")
    cmd.add_argument("action", choices=("setup", "list"), help="setup: build (if needed); list: show state")
    cmd.add_argument("names", nargs="*", help="peer names (default: all)")
    cmd.add_argument("--force", action="store_true", help="rebuild even when the environment is current")
    cmd.set_defaults(func=cmd_peers)
