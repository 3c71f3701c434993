"""``assay zoo list``: the zoo's models, tiers, input domains and tolerances."""

from __future__ import annotations

import argparse


def cmd_zoo_list(args: argparse.Namespace) -> int:
    from harness.models import zoo

    entries = [e for e in zoo.entries() if args.tier in (None, e.tier)]
    width = max([15, *(len(e.name) for e in entries)])  # mobilenet-vww-int8 is longer than the paper's names
    print(f"{'name':<{width}} {'tier':<8} {'inputs from':<14} {'tolerance':<10} description")
    for e in entries:
        low, high = e.input_domain
        print(f"{e.name:<{width}} {e.tier:<8} {f'[{low:g}, {high:g}]':<14} {e.tolerance:<10g} {e.description}")
    return 0


def add_command(subparsers) -> None:
    zoo_parser = subparsers.add_parser("zoo", help="the model zoo (paper benchmarks)")
    zoo_sub = zoo_parser.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    listing = zoo_sub.add_parser("list", help="list the zoo's models, tiers, input domains and tolerances")
    from harness.models.tiers import TIERS

    listing.add_argument("--tier", choices=TIERS, help="only this tier")
    listing.set_defaults(func=cmd_zoo_list)
