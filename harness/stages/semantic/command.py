"""``assay semantic`` (the campaign) and ``assay report`` (Table 1 rebuilt from a results.json)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import (add_common_options, add_opt_option, add_output_options, add_selection_options, csv_list,
                         selected_models)
from harness.errors import AssayError

DEFAULT_REFERENCES = "keras,onnxruntime"


def cmd_semantic(args: argparse.Namespace) -> int:
    from harness.core.progress import finish, run_items
    from harness.core.results import ResultStore
    from harness.stages.semantic.report import write_semantic_report
    from harness.stages.semantic.run import Settings, plan, run_item

    settings = Settings(n_inputs=args.inputs, seed=args.seed, opt=args.opt, work_dir=args.work,
                        timeout=args.timeout, redo=args.redo)
    campaign = plan(selected_models(args), csv_list(args.generators), csv_list(args.references),
                    csv_list(args.targets), settings)
    store = ResultStore(args.out / "results.json")

    def run(item) -> list[str]:
        return [f"{item.id} vs {record['reference']}: {record['verdict']}: {record['cause']}"
                for record in run_item(item, settings, store) if record["verdict"] != "pass"]

    failed = run_items(campaign.items, run, args.quiet)
    records = store.records()
    paths = write_semantic_report(store.path, args.out) if store.path.is_file() else []
    passed = sum(r["verdict"] == "pass" for r in records)
    return finish(campaign, failed, f"{passed} passing records in {store.path}", paths)


def cmd_report(args: argparse.Namespace) -> int:
    from harness.core.results import ResultStore
    from harness.stages.semantic.report import write_semantic_report

    if not args.results.is_file():
        raise AssayError(f"{args.results}: no such results file")
    for path in write_semantic_report(args.results, args.out or args.results.parent):
        print(f"report: {path}")
    if args.check:
        records = ResultStore(args.results).records()
        bad = [r for r in records if r["verdict"] != "pass"]
        print(f"{len(records) - len(bad)} of {len(records)} records pass")
        return 1 if bad or not records else 0
    return 0


def add_command(subparsers) -> None:
    sem = subparsers.add_parser(
        "semantic", help="semantic-preservation campaign: generate, compile, run, compare with references",
        description="Runs every (model, generator, variant, target) item: generates C, compiles it "
                    "(gcc -O0 -std=c99 on the host), runs it in a worker process on seeded inputs and compares "
                    "with each reference. Results are appended to OUT/results.json as they are computed; a re-run "
                    "skips finished items unless --redo. Writes OUT/table1.md and OUT/index.html.")
    add_selection_options(sem, "host")
    sem.add_argument("--references", default=DEFAULT_REFERENCES, help=f"default {DEFAULT_REFERENCES}")
    add_opt_option(sem)
    sem.add_argument("--inputs", type=int, default=1000, help="number of test inputs per model (default 1000)")
    sem.add_argument("--timeout", type=float, default=600.0,
                     help="seconds allowed for one batch run before it counts as a hang (default 600)")
    add_output_options(sem, "reports/semantic", "results.json, table1.md, index.html and bitcompare.md")
    sem.add_argument("--redo", action="store_true", help="recompute items already in results.json")
    add_common_options(sem)
    sem.set_defaults(func=cmd_semantic)

    rep = subparsers.add_parser("report", help="rewrite table1.md and index.html from a results.json")
    rep.add_argument("--results", type=Path, default=Path("reports/semantic/results.json"))
    rep.add_argument("--out", type=Path, help="default: the results file's directory")
    rep.add_argument("--check", action="store_true", help="exit 1 unless every record passes")
    rep.set_defaults(func=cmd_report)
