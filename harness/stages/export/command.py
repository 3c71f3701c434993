"""``assay export --model M --format nnef --out DIR [--items partition.json]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import add_common_options


def cmd_export(args: argparse.Namespace) -> int:
    from harness.core.plan import Settings, load_model
    from harness.stages.export.run import export

    model = load_model(args.model, Settings(model_seed=args.model_seed, work_dir=args.work))
    record = export(model, args.out, args.items)
    line = f"{model.name}: NNEF in {args.out} ({len(record['layers'])} layers, {len(record['variables'])} variables"
    if "items" in record:
        line += f"; {len(record['items']['files'])} items, {record['items']['sends']} send_var"
    print(line + ")")
    return 0


def add_command(subparsers) -> None:
    parser = subparsers.add_parser("export", help="write a model as NNEF (every padding, border and activation "
                                                  "explicit), optionally split into item descriptions")
    parser.add_argument("--model", required=True, help="zoo name, model file or NNEF folder")
    parser.add_argument("--format", choices=("nnef",), default="nnef", help="output format (nnef)")
    parser.add_argument("--out", type=Path, required=True, help="the NNEF folder to write")
    parser.add_argument("--items", type=Path, help="JSON partition {item: [layer, ...]} or a schedule.json of "
                                                   "`assay schedule` (duplications and routing as in the parallel "
                                                   "code): also write one graphitem description per item in "
                                                   "OUT/items/")
    add_common_options(parser)
    parser.set_defaults(func=cmd_export)
