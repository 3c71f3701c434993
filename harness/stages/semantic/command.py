"""``assay semantic`` (the campaign) and ``assay report`` (Table 1 rebuilt from a results.json)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_common_options, add_output_options, add_selection_options, csv_list, selected_models
from harness.contract import NOT_SUPPORTED, common_values
from harness.core.report import superseded_count
from harness.core.results import ResultStore
from harness.errors import AssayError
from harness.options import add_opt_option
from harness.targets import HOST
from harness.stages.semantic.spec import SPEC


def cmd_semantic(args: argparse.Namespace) -> int:
    from harness.core.progress import finish, run_items
    from harness.core.shards import ShardStore
    from harness.stages.semantic import distributed, sharded
    from harness.stages.semantic.report import warm_up, write_semantic_report
    from harness.stages.semantic.run import Settings, plan, run_item

    def parsed(dest: str):
        return getattr(args, dest)

    settings = Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt,
                        parallel=parallel_options(args))
    selection = distributed.Selection(selected_models(args), csv_list(args.generators), csv_list(args.references),
                                      csv_list(args.targets))
    check_inputs(args, settings, selection.models)
    campaign = plan(selection.models, selection.generators, selection.references, selection.targets, settings)
    for note in campaign.skipped:
        print(note, file=sys.stderr)
    unchecked = list(dict.fromkeys(item.model for item in campaign.items if not item.checks))
    campaign.items = [item for item in campaign.items if item.checks]
    for model in unchecked:  # nothing to compare its C with: never "0 failed", which would read as a pass
        print(f"{model}: error: none of the selected references ({', '.join(selection.references)}) can run it "
              f"(a refusal above says why, e.g. the exporter's); nothing was compared", file=sys.stderr)
    if args.shard_size is not None:
        sharded.check_settings(settings, args.shard_size)
    if not settings.sanitize and any(item.target == HOST for item in campaign.items):
        print("memory checks off (--sanitize 0): no host item runs under AddressSanitizer and UBSan or the arena "
              "check; the records and table1.md say so", file=sys.stderr)
    store = ResultStore.of(SPEC, SPEC.path(args.out), settings.keep_history)
    earlier = len(store.superseded())  # the entries this run adds follow them
    records: list[dict] = []

    def lines_of(item, done: list[dict]) -> tuple[bool, list[str]]:
        records.extend(done)
        lines = [f"{item.id}: warning: {warning}" for warning in dict.fromkeys(w for r in done for w in r["warnings"])]
        by_cause: dict[tuple[str, str], list[str]] = {}
        for record in done:
            if not SPEC.passed(record):
                by_cause.setdefault((record["verdict"], record["cause"]), []).append(record["reference"])
            elif record.get("review"):  # passed by the derived rule, above the fixed tolerance (second opinion)
                by_cause.setdefault(("pass, review", record["review"]), []).append(record["reference"])
        return not any(SPEC.failed(r) for r in done), lines + [f"{item.id} vs {', '.join(refs)}: {verdict}: {cause}"
                                                               for (verdict, cause), refs in by_cause.items()]

    if args.workers or args.tx:
        if settings.parallel is not None:
            raise AssayError("--workers and --tx do not apply to parallel code (--cores N)")
        warm_up()
        status = distributed.run(distributed.pytest_command(selection, settings, args.out, args.workers, args.tx,
                                                            args.shard_size, args.quiet))
        if status not in (0, 1):  # 1: some test failed, which the records say; anything else: no campaign ran
            raise AssayError(f"the pytest-xdist session ended with exit status {status} (its messages are above)")
        failed = 0
        for item in campaign.items:
            done = stored_records(store, item, settings)
            passed, lines = lines_of(item, done)
            if len(done) < len(item.checks):
                passed, lines = False, [*lines, f"{item.id}: no record: its tests did not finish (see above)"]
            failed += not passed
            for line in dict.fromkeys(lines):
                print(line, file=sys.stderr)
    else:
        def run(item) -> tuple[bool, list[str]]:
            if args.shard_size is None:
                return lines_of(item, run_item(item, settings, store))
            shards = ShardStore(args.out / "shards")
            return lines_of(item, sharded.run_item_sharded(item, settings, args.shard_size, shards, store))

        failed = run_items(campaign.items, run, args.quiet)
    superseded = store.superseded()[earlier:]
    paths = write_semantic_report(records, args.out, superseded) if records else []
    passed = sum(SPEC.passed(r) for r in records)
    review = sum(bool(SPEC.passed(r) and r.get("review")) for r in records)
    status = finish(campaign, failed, f"{passed} passing records{f' ({review} to review)' if review else ''} in "
                                      f"{store.path}{superseded_note(superseded)}", paths)
    if (status == 0 and records and all(r["verdict"] == NOT_SUPPORTED for r in records)) or not campaign.items:
        return 2  # no selected generator supports any selected model, or no reference: the lines above say why
    return max(status, 1) if unchecked else status


def check_inputs(args: argparse.Namespace, settings, models: list[str]) -> None:
    """Refuse, in one line (exit 2), an input count below 1 (0 only beside --inputs-from) and a --inputs-from file
    that does not fit a selected model (``harness.core.inputs.user_inputs``: missing, shape, dtype, NaN, domain,
    labels), or that is combined with a way of running the uniform draw alone (shards, parallel code, workers)."""
    from harness.core import budget
    from harness.core.inputs import user_inputs
    from harness.core.plan import load_model
    from harness.errors import ModelError

    if settings.n_inputs < (0 if settings.inputs_from else 1):
        raise AssayError(f"--inputs must be at least 1 (0 only with --inputs-from: the file's inputs alone; got "
                         f"{settings.n_inputs})")
    if settings.inputs_from is None:
        return
    if args.shard_size is not None or args.workers or args.tx or args.cores > 1:
        raise AssayError("--inputs-from runs in this process, unsharded, on sequential code: not with --shard-size, "
                         "--workers, --tx or --cores")
    for name in models:
        try:
            model = load_model(name, settings)
        except ModelError:  # the plan records it as the model's error
            continue
        budget.check(model, settings.n_inputs + len(user_inputs(settings.inputs_from, model).x), source=name)


def superseded_note(entries: list[dict]) -> str:
    """How many records of earlier contents of replaced model files ``entries`` stand for, for a summary line."""
    count = superseded_count(entries)
    return f"; {count} records of earlier contents of a replaced model file superseded, not judged" if count else ""


def stored_records(store, item, settings) -> list[dict]:
    """The records of ``item`` that a pytest session wrote into ``store`` (fewer than its checks: unfinished)."""
    from harness.stages.semantic.run import base_record

    found = (store.get(store.key(base_record(item, None, reference, settings))) for reference in item.checks)
    return [record for record in found if record is not None]


def parallel_options(args: argparse.Namespace):
    """--cores/--schedule/--delays as the parallel campaign's options (None: sequential code)."""
    from harness.stages.semantic.parallel import ParallelOptions

    if args.cores < 1 or args.delays < 0:
        raise AssayError(f"--cores must be at least 1 and --delays not negative (got {args.cores}, {args.delays})")
    if args.interference < 0:
        raise AssayError(f"--interference must not be negative (got {args.interference:g})")
    if args.cores == 1:
        if args.schedule or args.delays:
            raise AssayError("--schedule and --delays need --cores N with N > 1")
        return None
    return ParallelOptions(cores=args.cores, schedule=args.schedule or "dsh", delays=args.delays,
                           interference=args.interference)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.stages.semantic.report import write_semantic_report

    if not args.results.is_file():
        raise AssayError(f"{args.results}: no such results file")
    store = ResultStore.of(SPEC, args.results)
    records, superseded = store.records(), store.superseded()
    for path in write_semantic_report(records, args.out or args.results.parent, superseded):
        print(f"report: {path}")
    if args.check:  # the current records only: a replaced file's earlier verdicts are about bytes that are gone
        bad = [r for r in records if not SPEC.passed(r)]
        print(f"{len(records) - len(bad)} of {len(records)} records pass{superseded_note(superseded)}")
        return 1 if bad or not records else 0
    return 0


def add_command(subparsers) -> None:
    sem = subparsers.add_parser(
        "semantic", help="semantic-preservation campaign: generate, compile, run, compare with references",
        description="Runs every (model, generator, variant, target) item: generates C, compiles it "
                    "(gcc -O0 -std=c99 on the host), runs it in a worker process on seeded inputs and compares "
                    "with each reference. Results are appended to OUT/results.json as they are computed; a re-run "
                    "skips finished items unless --redo. Writes OUT/table1.md and OUT/index.html.")
    add_selection_options(sem, SPEC.default_targets)
    add_opt_option(sem)
    SPEC.add_options(sem)  # --references, --atol, --inputs, ... (spec.py: declared once, for the pytest campaign too)
    add_output_options(sem, "reports/semantic", "results.json, table1.md, index.html and bitcompare.md")
    add_common_options(sem)
    sem.set_defaults(func=cmd_semantic)

    rep = subparsers.add_parser("report", help="rewrite table1.md and index.html from a results.json")
    rep.add_argument("--results", type=Path, default=Path("reports/semantic/results.json"))
    rep.add_argument("--out", type=Path, help="default: the results file's directory")
    rep.add_argument("--check", action="store_true", help="exit 1 unless every current record passes (the "
                     "superseded records of a replaced model file's earlier contents are counted, not judged)")
    rep.set_defaults(func=cmd_report)
