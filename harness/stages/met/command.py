"""``assay met``: measured execution (paper Tables 2 and 3) under QEMU, per input and per layer."""

from __future__ import annotations

import argparse
import sys

from harness.cli import add_common_options, add_output_options, add_selection_options, csv_list, selected_models
from harness.errors import ConfigError
from harness.contract import common_values
from harness.measurement.options import add_timing_options, parse_timing_options
from harness.stages.met.spec import SPEC

DEFAULT_TARGETS = SPEC.default_targets


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "met", help="measured execution: exact instruction counts under QEMU, cycles by a timing model",
        description="For every (model, generator, variant, target) item: generates C, cross-compiles it, runs "
                    "it under QEMU on seeded inputs with a TCG plugin that counts every instruction executed "
                    "inside the inference function (per input and per layer; callees such as soft-float "
                    "helpers count for the layer that called them), and prices the counts with timing models "
                    "(wcet/timing.py). Records go to OUT/met.json as they are computed; a re-run skips "
                    "finished items unless --redo. Writes OUT/table2.md.")
    add_selection_options(parser, DEFAULT_TARGETS)
    add_timing_options(parser, SPEC.option("--inputs"))
    add_output_options(parser, "reports/met", "met.json and table2.md")
    SPEC.add_options(parser, only=lambda option: option.flag != "--inputs")  # --redo, --shard-size
    add_common_options(parser)
    parser.set_defaults(func=cmd_met)


def cmd_met(args: argparse.Namespace) -> int:
    from harness.core.progress import finish, run_items
    from harness.measurement.cycles import Settings, plan
    from harness.stages.met.report import write_table2
    from harness.core.shards import ShardStore, split
    from harness.stages.met.run import NOT_SUPPORTED, open_store, run_item

    if args.inputs < 1:
        raise ConfigError("--inputs must be at least 1")
    def parsed(dest: str):
        return getattr(args, dest)

    settings = Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt, timeout=args.timeout,
                        timing_options=parse_timing_options(args.timing_option))
    campaign = plan(selected_models(args), csv_list(args.generators), csv_list(args.targets),
                    csv_list(args.timing) if args.timing else None, settings)
    for note in campaign.skipped:
        print(note, file=sys.stderr)
    if args.shard_size is not None:
        split(args.inputs, args.shard_size)  # a bad size fails here, before anything runs
    store = open_store(SPEC.path(args.out))
    shards = ShardStore(args.out / "shards")

    def run(item) -> tuple[bool, list[str]]:
        records = run_item(item, settings, store, args.shard_size, shards)
        bad = [r for r in records if not SPEC.passed(r)]
        if all(r["verdict"] == NOT_SUPPORTED for r in bad):  # the generator's own refusal: not a failure
            return True, [f"{item.id} {settings.opt}: not supported: {bad[0]['cause']}"] if bad else []
        timings = "" if len(bad) == len(records) else f" ({', '.join(r['timing'] for r in bad)} timing)"
        return False, [f"{item.id} {settings.opt}{timings}: error: {'; '.join(dict.fromkeys(r['cause'] for r in bad))}"]

    failed = run_items(campaign.items, run, args.quiet)
    paths = [write_table2(store.path, args.out)] if store.path.is_file() else []
    measured = sum(SPEC.passed(r) for r in store.records())
    return finish(campaign, failed, f"{measured} records in {store.path}", paths)
