"""``assay explore``: design-space exploration by sensitivity analysis and global weighted pruning (OpTC),
with the semantic verdict and the WCET of every configuration; printing at the edge.

Exit status: 0 when every configuration passed the semantic oracle and was fully measured, 1 when some
did not (they are reported and kept off the fronts), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from harness.cli import add_common_options, add_output_options
from harness.contract import common_values
from harness.options import add_opt_option
from harness.stages.explore.spec import SPEC


def cmd_explore(args: argparse.Namespace) -> int:
    from harness.stages.explore import run
    from harness.stages.explore.report import write_explore_report

    def parsed(dest: str):
        return getattr(args, dest)

    settings = run.Settings(
        **SPEC.settings_values(parsed), **common_values(parsed), opt=args.opt,
        ram_limit=run.parse_size(args.ram_limit) if args.ram_limit else None,
        rom_limit=run.parse_size(args.rom_limit) if args.rom_limit else None)
    say = (lambda _line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    document = run.explore(settings, args.out, say)
    for path in write_explore_report(SPEC.path(args.out), args.out):
        print(f"report: {path}")
    configurations = document["configurations"]
    for configuration in configurations:
        for cause in configuration["causes"]:
            print(f"{settings.model} j={configuration['j']}: {cause}", file=sys.stderr)
    best = [c["j"] for c in configurations if c["pareto"]]
    print(f"{len(configurations)} configurations in {document['seconds']['total_s']:.0f} s "
          f"({document['seconds']['per_configuration_s']:.1f} s each); non-dominated: "
          f"{', '.join(f'j={j}' for j in best) or 'none'}; {SPEC.path(args.out)}")
    return 0 if all(not c["causes"] for c in configurations) else 1


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "explore", help="design-space exploration (OpTC): sensitivity analysis, global weighted pruning, Pareto "
                        "fronts of error, ROM, RAM and WCET",
        description="Prunes a trained model step by step (OpTC Algorithms 1 and 2: per-layer sensitivities, "
                    "then for j = 0..J the output neurons/filters with the lowest l1 norm removed at rate "
                    "p_init x j), optionally retrains each configuration, and runs assay semantic (host), "
                    "memory, met and wcet (target) on every configuration through the CLI. Writes "
                    "OUT/explore.json, OUT/pareto.md, OUT/index.html with Figure 3-5 style plots, and each "
                    "stage's own results under OUT/<stage>/.")
    SPEC.add_options(parser)  # spec.py: declared once, run.Settings' defaults too
    add_opt_option(parser)
    add_output_options(parser, "reports/explore", "explore.json, pareto.md, index.html and the stages' results")
    add_common_options(parser)  # --seed also seeds the retraining
    parser.set_defaults(func=cmd_explore)
