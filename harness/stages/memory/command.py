"""``assay memory``: the memory-layout analysis (paper Table 5), printing at the edge.

Exit status as ``assay semantic``: 0 when every item passed, 1 when any item
failed, had no stack bound or had an error, 2 for bad input.
"""

from __future__ import annotations

import argparse

from harness.cli import (add_common_options, add_opt_option, add_output_options, add_selection_options, csv_list,
                         selected_models)

DEFAULT_TARGETS = "arm7tdmi,cortex-m4f,cortex-a15"


def cmd_memory(args: argparse.Namespace) -> int:
    from harness.core.plan import expand
    from harness.core.progress import finish, run_items
    from harness.stages.memory import run as memory
    from harness.stages.memory.report import write_memory_report

    settings = memory.Settings(opt=args.opt, work_dir=args.work, seed=args.seed, model_seed=args.model_seed,
                               n_inputs=args.inputs,
                               paint=args.paint, timeout=args.timeout)
    campaign = expand(selected_models(args), csv_list(args.generators), csv_list(args.targets),
                      settings.campaign(), lambda _model, _profile: ())
    store = memory.open_store(args.out / "memory.json")
    session = memory.Session()

    def run(item) -> tuple[bool, list[str]]:
        record = memory.run_item(item, settings, store, session)
        passed = record["status"] in (memory.PASS, memory.NOT_SUPPORTED, memory.NOT_MEASURED)
        return passed, [] if passed else [f"{item.id} {settings.opt}: {record['status']}: {record['cause']}"]

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
    parser.add_argument("--inputs", type=int, default=100,
                        help="test inputs run under QEMU for the measured stack (default 100)")
    parser.add_argument("--paint", type=int, default=16384,
                        help="bytes painted below main's stack pointer for the measurement (default 16384)")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds allowed for one measurement run (default 600)")
    add_output_options(parser, "reports/memory", "memory.json and table5.md")
    add_common_options(parser)
    parser.set_defaults(func=cmd_memory)
