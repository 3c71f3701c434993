"""``assay schedule``: a model's layers scheduled on N cores (ISH, DSH or exact CP-SAT), with a Gantt chart.

Exit status: 0 when the schedule passed the validity check, 1 when it did not
(it is written anyway, with its violations), 2 for bad input (an unknown
model, target or algorithm, a WCET that is missing or failed its check).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_common_options, add_opt_option, add_output_options


def cmd_schedule(args: argparse.Namespace) -> int:
    from harness.scheduling.layers import CopyCost
    from harness.stages.schedule import run
    from harness.stages.schedule.report import write_schedule_report

    settings = run.Settings(cores=args.cores, algorithm=args.algorithm, target=args.target, timing=args.timing,
                            variant=args.variant, time_limit=args.time_limit, workers=args.workers,
                            cost=None if args.comm_fixed is None and args.comm_per_float is None else
                            CopyCost(fixed=20 if args.comm_fixed is None else args.comm_fixed,
                                     per_float=8 if args.comm_per_float is None else args.comm_per_float),
                            wcet_json=args.wcet_json, n_inputs=args.inputs, seed=args.seed,
                            model_seed=args.model_seed, opt=args.opt, work_dir=args.work)
    run.check_settings(settings)
    record = run.schedule_model(args.model, settings, args.out)
    paths = write_schedule_report(args.out / run.FILE_NAME, args.out)
    optimal = {True: ", proved optimal", False: ", not proved optimal", None: ""}[record["optimal"]]
    print(f"{record['model']} on {record['cores']} cores ({record['algorithm']}): makespan {record['makespan']} "
          f"cycles, sequential {record['sequential']}, speedup {record['speedup']:.3f}{optimal}")
    for path in [args.out / run.FILE_NAME, *paths]:
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
    parser.add_argument("--model", required=True, help="a zoo name or a model file")
    parser.add_argument("--cores", type=int, required=True, help="number of identical cores")
    parser.add_argument("--algorithm", required=True, choices=["ish", "dsh", "cpsat"],
                        help="ish, dsh (Kruatrachue's heuristics) or cpsat (exact, warm-started with DSH)")
    parser.add_argument("--target", default="cortex-m4f", help="target profile for the WCETs (default cortex-m4f)")
    parser.add_argument("--timing", help="timing model of the WCETs (default: the target's own)")
    parser.add_argument("--variant", help="assay-v2 variant (keras or onnx; default: the model's first)")
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="seconds CP-SAT may search (default 10); the best schedule found is kept")
    parser.add_argument("--workers", type=int, default=1, help="CP-SAT search workers (default 1)")
    parser.add_argument("--wcet-json", type=Path,
                        help="take per-layer WCETs from this wcet.json instead of running `assay wcet`")
    parser.add_argument("--inputs", type=int, default=20,
                        help="inputs measured by `assay wcet` for its soundness check (default 20)")
    parser.add_argument("--comm-fixed", type=int,
                        help="use the provisional copy-cost model instead of the operators' WCETs: cycles per "
                             "Writing or Reading operator (default 20)")
    parser.add_argument("--comm-per-float", type=int,
                        help="use the provisional copy-cost model: cycles per float copied by one operator "
                             "(default 8)")
    add_opt_option(parser)
    add_output_options(parser, "reports/schedule", "schedule.json, gantt.png and schedule.html")
    add_common_options(parser)
    parser.set_defaults(func=cmd_schedule)
