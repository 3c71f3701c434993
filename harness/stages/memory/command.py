"""``assay memory``: the memory-layout analysis (paper Table 5), printing at the edge.

Exit status as ``assay semantic``: 0 when every item passed, 1 when any item
failed, had no stack bound or had an error, 2 for bad input.
"""

from __future__ import annotations

import argparse

from harness.cli import add_common_options, add_output_options, add_selection_options, csv_list, selected_models
from harness.contract import common_values
from harness.options import add_opt_option
from harness.stages.memory.spec import SPEC

DEFAULT_TARGETS = SPEC.default_targets


def cmd_memory(args: argparse.Namespace) -> int:
    from harness.core.plan import expand
    from harness.core.progress import finish, run_items
    from harness.stages.memory import run as memory
    from harness.stages.memory.report import write_memory_report

    def parsed(dest: str):
        return getattr(args, dest)

    settings = memory.Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt)
    campaign = expand(selected_models(args), csv_list(args.generators), csv_list(args.targets),
                      settings.campaign(), lambda _model, _profile: ())
    store = memory.open_store(SPEC.path(args.out))
    session = memory.Session()

    def run(item) -> tuple[bool, list[str]]:
        record = memory.run_item(item, settings, store, session)
        passed = not SPEC.failed(record)
        return passed, [] if passed else [f"{item.id} {settings.opt}: {record['verdict']}: {record['cause']}"]

    failed = run_items(campaign.items, run, args.quiet)
    paths = write_memory_report(store.path, args.out) if store.path.is_file() else []
    return finish(campaign, failed, f"records in {store.path}", paths)


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "memory", help="memory layout (paper Table 5): section sizes, static and measured stack",
        description="For every (model, generator, variant, target) item: generates C, builds it for the target "
                    "with -fstack-usage -fcallgraph-info=su, reports .text/.rodata/.data/.bss of the inference "
                    "alone (the manifest's symbols) and of the whole image, bounds the entry's worst-case stack "
                    "(gcc's data and a disassembly of the libraries), and on QEMU targets measures the stack by "
                    "painting. Writes OUT/memory.json and OUT/table5.md.")
    add_selection_options(parser, DEFAULT_TARGETS)
    add_opt_option(parser)
    SPEC.add_options(parser)  # --inputs, --paint, --timeout (spec.py: declared once)
    add_output_options(parser, "reports/memory", "memory.json and table5.md")
    add_common_options(parser)
    parser.set_defaults(func=cmd_memory)
