"""``assay schedule``: a model's layers scheduled on N cores (ISH, DSH or exact CP-SAT), with a Gantt chart.

Exit status: 0 when the schedule passed the validity check, 1 when it did not
(it is written anyway, with its violations), 2 for bad input (an unknown
model, target or algorithm, a WCET that is missing or failed its check).
"""

from __future__ import annotations

import argparse
import sys

from harness.cli import add_common_options, add_output_options
from harness.contract import common_values
from harness.stages.schedule.spec import SPEC
from harness.options import add_opt_option


def cmd_schedule(args: argparse.Namespace) -> int:
    from harness.scheduling.layers import CopyCost
    from harness.stages.schedule import run
    from harness.stages.schedule.report import write_schedule_report

    def parsed(dest: str):
        return getattr(args, dest)

    copy_cost = {name: value for name, value in (("fixed", args.comm_fixed), ("per_float", args.comm_per_float))
                 if value is not None}
    settings = run.Settings(**SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt,
                            cost=CopyCost(**copy_cost) if copy_cost else None)
    run.check_settings(settings)
    record = run.schedule_model(args.model, settings, args.out)
    paths = write_schedule_report(SPEC.path(args.out), args.out)
    optimal = {True: ", proved optimal", False: ", not proved optimal", None: ""}[record["optimal"]]
    print(f"{record['model']} on {record['cores']} cores ({record['algorithm']}): makespan {record['makespan']} "
          f"cycles, sequential {record['sequential']}, speedup {record['speedup']:.3f}{optimal}")
    for path in [SPEC.path(args.out), *paths]:
        print(f"report: {path}")
    if not record["valid"]:
        for line in record["violations"]:
            print(f"assay: invalid schedule: {line}", file=sys.stderr)
        return 1
    return 0


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "schedule", help="schedule a model's layers on N cores (multi-core paper: ISH, DSH, exact CP-SAT)",
        description="Builds the model's DAG (layers and which feed which from the assay-v2 manifest, per-layer "
                    "WCETs from `assay wcet` on the target and timing model, edge costs from the WCETs of the "
                    "generated Writing and Reading operators), schedules it on --cores identical cores and checks the schedule (§2.3). "
                    "Writes OUT/schedule.json, OUT/gantt.png and OUT/schedule.html.")
    SPEC.add_options(parser)  # spec.py: declared once, run.Settings' defaults too
    add_opt_option(parser)
    add_output_options(parser, "reports/schedule", "schedule.json, gantt.png and schedule.html")
    add_common_options(parser)
    parser.set_defaults(func=cmd_schedule)
