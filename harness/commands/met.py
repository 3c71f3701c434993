"""``assay met``: measured execution (paper Tables 2 and 3) under QEMU, per input and per layer."""

from __future__ import annotations

import argparse
import sys

from harness.cli import (add_common_options, add_opt_option, add_output_options, add_selection_options,
                         csv_list, selected_models)
from harness.errors import ConfigError

DEFAULT_TARGETS = "arm7tdmi,cortex-m4f"


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
    add_timing_options(parser, default_inputs=100)
    add_output_options(parser, "reports/met", "met.json and table2.md")
    parser.add_argument("--redo", action="store_true", help="recompute items already in met.json")
    add_common_options(parser)
    parser.set_defaults(func=cmd_met)


def add_timing_options(parser: argparse.ArgumentParser, default_inputs: int) -> None:
    """--timing, --timing-option, --opt, --inputs and --timeout: how measured cycles are obtained and priced."""
    parser.add_argument("--timing",
                        help="comma-separated timing models: trivial, arm7tdmi, cortex-m4 (default: trivial and "
                             "each target's own model); a model that does not describe a target's CPU is skipped "
                             "for it")
    parser.add_argument("--timing-option", action="append", default=[], metavar="MODEL.KEY=VALUE",
                        help="set a timing model parameter, e.g. arm7tdmi.n_wait_states=2, "
                             "cortex-m4.flash_wait_states=5, cortex-m4.refill=1, trivial.cycles_per_instruction=5 "
                             "(repeatable)")
    add_opt_option(parser)
    parser.add_argument("--inputs", type=int, default=default_inputs,
                        help=f"seeded inputs measured per model under QEMU (default {default_inputs})")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds allowed for one batch under QEMU (default 600)")


def parse_timing_options(texts: list[str]) -> dict[str, dict[str, int]]:
    """["arm7tdmi.n_wait_states=2", ...] -> {"arm7tdmi": {"n_wait_states": 2}}."""
    options: dict[str, dict[str, int]] = {}
    for text in texts:
        name_key, equals, value = text.partition("=")
        name, dot, key = name_key.partition(".")
        if not (equals and dot and name and key):
            raise ConfigError(f"--timing-option {text!r}: expected MODEL.KEY=VALUE")
        try:
            options.setdefault(name, {})[key] = int(value)
        except ValueError:
            raise ConfigError(f"--timing-option {text!r}: VALUE must be an integer") from None
    return options


def cmd_met(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from harness.met import OK, Settings, open_store, plan, run_item, write_table2

    if args.inputs < 1:
        raise ConfigError("--inputs must be at least 1")
    models = selected_models(args)
    settings = Settings(n_inputs=args.inputs, seed=args.seed, opt=args.opt, work_dir=args.work,
                        timeout=args.timeout, redo=args.redo,
                        timing_options=parse_timing_options(args.timing_option))
    timing_names = csv_list(args.timing) if args.timing else None
    campaign = plan(models, csv_list(args.generators), csv_list(args.targets), timing_names, settings)
    for note in campaign.skipped:
        print(note, file=sys.stderr)
    store = open_store(args.out / "met.json")
    failed = 0
    with tqdm(campaign.items, unit="item", file=sys.stderr, disable=args.quiet) as progress:
        for item in progress:
            progress.set_description(item.id)
            records = run_item(item, settings, store)
            bad = [r for r in records if r["verdict"] != OK]
            if bad:
                failed += 1
                causes = dict.fromkeys(r["cause"] for r in bad)
                timings = "" if len(bad) == len(records) else f" ({', '.join(r['timing'] for r in bad)} timing)"
                tqdm.write(f"{item.id} {settings.opt}{timings}: error: {'; '.join(causes)}", file=sys.stderr)
    path = write_table2(store.path, args.out) if store.path.is_file() else None
    ok = sum(r["verdict"] == OK for r in store.records()) if store.path.is_file() else 0
    print(f"{len(campaign.items)} items, {failed} in error; {ok} records in {store.path}")
    if path:
        print(f"report: {path}")
    if campaign.bad_input:
        return 2
    return 1 if failed else 0
