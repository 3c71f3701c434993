"""``assay mutate``: the oracle's power measured by seeded mutants of the generated C.

Exit status: 0 when every item meets the targets (no false alarm, >= 99 % of the
non-equivalent code mutants killed, every weight mutant above the tolerance
killed), 1 otherwise or on an item error, 2 for bad input.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli import add_common_options, add_output_options, csv_list, selected_models
from harness.contract import DEFAULT_GENERATORS, common_values
from harness.core.inputsets import SETS
from harness.core.plan import Item
from harness.errors import ConfigError
from harness.options import add_opt_option
from harness.stages.mutate.spec import SPEC

if TYPE_CHECKING:  # the stage's code is imported where an item runs (the command's --help stays light)
    from harness.stages.mutate.run import Settings


def cmd_mutate(args: argparse.Namespace) -> int:
    unknown = [name for name in csv_list(args.input_sets) if name not in SETS]
    if unknown:
        raise ConfigError(f"unknown input set {', '.join(unknown)} (known: {', '.join(SETS)})")
    from harness.core.progress import finish, run_items
    from harness.stages.mutate import run as mutate
    from harness.stages.mutate.report import write_mutation_report

    def parsed(dest: str):
        return getattr(args, dest)

    settings = mutate.Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt)
    args.models = args.model
    campaign = mutate.plan(selected_models(args), csv_list(args.generators), settings,
                           csv_list(args.variants) if args.variants else None)
    store = mutate.open_store(SPEC.path(args.out))
    failed = run_items(campaign.items, functools.partial(judge_item, settings=settings, path=store.path), args.quiet,
                       settings.workers)
    paths = write_mutation_report(store.path, args.out) if store.path.is_file() else []
    return finish(campaign, failed, f"records in {store.path}", paths)


def judge_item(item: Item, settings: Settings, path: Path) -> tuple[bool, list[str]]:
    """One item's analysis, its record stored in ``path``: whether it passed and its cause line (a module's
    function, so that ``--workers`` can run it in a process of its own)."""
    from harness.stages.mutate import run as mutate

    record = mutate.run_item(item, settings, mutate.open_store(path))
    passed = SPEC.passed(record)
    return passed, [] if passed else [f"{item.id}: {record['verdict']}: {record['cause']}"]


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "mutate", help="oracle adequacy: seeded mutants of the generated C, each judged by the oracle",
        description="For every (model, generator, variant): generates C, checks the unmutated code on --seeds input "
                    "seeds (a failure is a false alarm), then makes mutants (arithmetic and relational operators, "
                    "loop bounds +-1, index offsets, deleted statements, swapped activations, weights perturbed by "
                    "1e-3, 1e-5, 1e-7), builds and runs each on the host and judges it with the oracle against the "
                    "reference; survivors also run under ASan and UBSan. Reports killed, survived (with class and "
                    "diff), stillborn and judged-equivalent mutants. Writes OUT/mutation.json and OUT/mutation.md.")
    parser.add_argument("--model", "--models", dest="model", action="append", required=True,
                        help="zoo name or model file (comma-separated, repeatable)")
    parser.add_argument("--generators", "--generator", default=DEFAULT_GENERATORS,
                        help=f"comma-separated generators (default {DEFAULT_GENERATORS})")
    SPEC.add_options(parser)  # spec.py: declared once, run.Settings' defaults too
    add_opt_option(parser)
    add_output_options(parser, "reports/mutate", "mutation.json and mutation.md")
    add_common_options(parser)
    parser.set_defaults(func=cmd_mutate, tier="default")
