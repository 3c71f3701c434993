"""``assay wcet``: static WCET bounds (paper Table 4), per layer, checked against measured cycles.

Two modes: a campaign over models and targets (generated code, automatic flow
facts, the soundness check), or ``--elf FILE --function NAME`` for any ELF
(``--batch FILE``: many ELF/function/facts triples in one process).
``--engine both`` cross-checks the built-in bound against OTAWA
(``wcet.crosscheck``); in campaign mode OTAWA's decoder errors it finds become
upstream-ready reproducers in OUT/otawa-reproducers/.
Exit status: 0 all pass (or unbounded: loops of code without manifest loop
bounds that the C does not bound, a finding listed in the report), 1 a bound
failed the check or an item had an error (or, with --elf, loops are left
unbounded, or the two engines disagree with no declared OTAWA error to explain
it), 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import add_common_options, add_output_options, add_selection_options, csv_list, selected_models
from harness.errors import AssayError
from harness.contract import common_values
from harness.measurement.options import add_timing_options, parse_timing_options
from harness.stages.wcet.spec import SPEC

DEFAULT_TARGETS = SPEC.default_targets


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "wcet", help="static WCET (paper Table 4): automatic flow facts, built-in IPET analyzer or OTAWA",
        description="Campaign mode: for every (model, generator, variant, target) item, generates and "
                    "cross-builds the code, produces its flow facts automatically (manifest bounds checked "
                    "against the C source, mapped to the binary's loops, plus library annotations; written as "
                    "OTAWA .ff and .ffx), computes the WCET of the inference function and of each layer, and "
                    "checks it against the largest cycle count measured under QEMU with the same timing model. "
                    "Writes OUT/wcet.json, OUT/table4.md and OUT/layers.md (and, with --engine both, OUT/otawa.md and "
                    "OTAWA's decoder errors as reproducers in OUT/otawa-reproducers/). ELF mode (--elf, --function): "
                    "analyses any ELF and prints 'WCET[NAME] = N cycles'; --batch FILE analyses many in one process.")
    add_selection_options(parser, DEFAULT_TARGETS)
    add_timing_options(parser, SPEC.option("--inputs"))
    SPEC.add_options(parser, only=lambda option: option.flag != "--inputs")  # --engine, --otawa-script, --redo
    add_output_options(parser, "reports/wcet", "wcet.json, table4.md and layers.md")
    elf = parser.add_argument_group("ELF mode")
    elf.add_argument("--elf", type=Path, help="analyse this ELF instead of generated models")
    elf.add_argument("--function", help="with --elf: the function to bound")
    elf.add_argument("--flow-facts", type=Path, help="with --elf: an OTAWA .ff or .ffx file (default: library "
                                                      "annotations only; unbounded loops are listed)")
    elf.add_argument("--json", action="store_true", help="with --elf: print the result as JSON too")
    elf.add_argument("--batch", type=Path, metavar="FILE",
                     help="ELF mode for many: FILE ('-': standard input) holds one 'ELF FUNCTION [FLOW_FACTS]' per "
                          "line; one process bounds them all (start-up paid once) and prints one line per triple as it "
                          "goes (python -m wcet --batch is the same without the harness)")
    add_common_options(parser)
    parser.set_defaults(func=cmd_wcet)


def cmd_wcet(args: argparse.Namespace) -> int:
    if args.batch:
        return _batch_mode(args)
    if args.elf or args.function:
        return _elf_mode(args)
    return _campaign(args)


def _campaign(args: argparse.Namespace) -> int:
    from harness.core.progress import finish, run_items
    from harness.measurement.cycles import plan
    from harness.stages.wcet import run as wcetrun
    from harness.stages.wcet.report import write_wcet_report

    def parsed(dest: str):
        return getattr(args, dest)

    settings = wcetrun.Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt,
                                timeout=args.timeout, timing_options=parse_timing_options(args.timing_option))
    unknown = set(settings.engines) - set(wcetrun.ENGINES)
    if unknown or not settings.engines:
        raise AssayError(f"unknown engine(s) {', '.join(sorted(unknown)) or '(none)'}; "
                         f"choose from {', '.join(wcetrun.ENGINES)}")
    campaign = plan(selected_models(args), csv_list(args.generators), csv_list(args.targets),
                    csv_list(args.timing) if args.timing else None, settings)
    for line in campaign.skipped:
        print(f"assay: note: {line}", file=sys.stderr)
    store = wcetrun.open_store(SPEC.path(args.out))

    def run(item) -> tuple[bool, list[str]]:
        records = [r for r in wcetrun.run_item(item, settings, store) if not SPEC.passed(r)]
        lines = [f"{item.id} {r['timing']} {r['engine']}: {r['verdict']}: {r['cause']}" for r in records]
        # the spec's neutral verdicts: unbounded loops in another tool's code (a finding about that tool,
        # reported), a bound on an analysis-only target (nothing to check it against, and says so)
        return not any(SPEC.failed(r) for r in records), lines

    failed = run_items(campaign.items, run, args.quiet)
    paths = write_wcet_report(store.path, args.out) if store.path.is_file() else []
    if "both" in settings.engines and store.path.is_file():
        from harness.stages.wcet import reproducers

        paths += reproducers.write(store.path, Path(args.out) / "otawa-reproducers", wcetrun.otawa_home)
    return finish(campaign, failed, f"records in {store.path}", paths)


def _elf_model(args: argparse.Namespace):
    from wcet import timing

    names = csv_list(args.timing) if args.timing else ["trivial"]
    if len(names) != 1:
        raise AssayError("ELF mode takes one --timing model")
    return timing.get(names[0], **parse_timing_options(args.timing_option).get(names[0], {}))


def _elf_mode(args: argparse.Namespace) -> int:
    from wcet import bound
    from wcet.errors import UnboundedLoopsError

    if not (args.elf and args.function):
        raise AssayError("ELF mode needs both --elf FILE and --function NAME")
    model = _elf_model(args)
    engines = csv_list(args.engine)
    if engines != ["builtin"]:
        return _elf_otawa(args, model, engines)
    try:
        result = bound.bound(args.elf, args.function, model, args.flow_facts)
    except UnboundedLoopsError as exc:
        lines = bound.unbounded_lines(args.elf, args.function, exc)
        print("\n".join([f"assay: {lines[0]}", *lines[1:]]), file=sys.stderr)
        return 1
    print(f"WCET[{args.function}] = {result.wcet_cycles} cycles")
    if args.json:
        print(json.dumps(bound.as_json(args.elf, model, result), indent=1))
    return 0


def _elf_otawa(args: argparse.Namespace, model, engines: list[str]) -> int:
    """ELF mode with ``--engine otawa`` (OTAWA's figure) or ``--engine both`` (the cross-check,
    ``wcet.crosscheck``): exit 1 when the two disagree and no declared OTAWA error explains it."""
    from harness.stages.wcet import run as wcetrun
    from wcet import crosscheck, otawa

    if len(engines) != 1 or engines[0] not in ("otawa", "both"):
        raise AssayError(f"ELF mode takes one --engine: builtin, otawa or both (not {args.engine})")
    if args.flow_facts is None:
        raise AssayError("--engine otawa and both need --flow-facts F.ff|F.ffx (OTAWA has no library annotations)")
    if model.name != wcetrun.OTAWA_TIMING or args.otawa_script != wcetrun.OTAWA_TIMING:
        raise AssayError(f"no OTAWA script is the same model as timing '{model.name}'; compare with --timing trivial")
    home = wcetrun.otawa_home()
    if engines == ["otawa"]:
        outcome = otawa.run_owcet(args.elf, args.function, args.flow_facts, args.otawa_script,
                                  timeout=args.otawa_timeout, home=home)
        if outcome.error:
            raise AssayError(f"OTAWA: {outcome.error}")
        print(f"WCET[{args.function}] = {outcome.wcet_cycles} cycles")
        return 0
    check = crosscheck.cross_check(args.elf, args.function, args.flow_facts, model, args.otawa_script, home,
                                   args.otawa_timeout)
    print(f"WCET[{args.function}] = {check.assay_cycles} cycles")
    print(check.describe())
    for agreement in check.functions:
        theirs = agreement.otawa_cycles if agreement.otawa_error is None else agreement.otawa_error
        print(f"  {agreement.function}: Assay {agreement.assay_cycles}, OTAWA {theirs}"
              f"{'' if agreement.agree else ' (differ)'}")
    if check.divergence is not None:
        print("\n".join(f"  | {line}" for line in check.divergence.excerpt))
    if args.json:
        print(json.dumps(check.as_dict(), indent=1))
    return 1 if check.status == crosscheck.UNEXPLAINED else 0


def _batch_mode(args: argparse.Namespace) -> int:
    """``--batch FILE``: ``wcet.bound.run_batch`` (one line per triple; exit 2 for a bad line or file, 1 when some
    triple is left unbounded or refused, else 0)."""
    from wcet import bound

    if args.elf or args.function or args.flow_facts:
        raise AssayError("--batch takes its ELFs, functions and flow facts from the file, not from --elf, --function "
                         "or --flow-facts")
    return bound.run_batch(args.batch, _elf_model(args), sys.stdout, args.json)
