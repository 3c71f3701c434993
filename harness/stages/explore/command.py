"""``assay explore``: design-space exploration by sensitivity analysis and global weighted pruning (OpTC),
with the semantic verdict and the WCET of every configuration; printing at the edge.

Exit status: 0 when every configuration passed the semantic oracle and was fully measured, 1 when some
did not (they are reported and kept off the fronts), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from harness.cli import add_common_options, add_opt_option, add_output_options


def cmd_explore(args: argparse.Namespace) -> int:
    from harness.stages.explore import run
    from harness.stages.explore.report import write_explore_report

    settings = run.Settings(
        model=args.model, steps=args.steps, target=args.target, timing=args.timing,
        retrain_epochs=args.retrain_epochs, slack=args.slack, seed=args.seed, model_seed=args.model_seed,
        inputs=args.inputs, semantic_inputs=args.semantic_inputs, generator=args.generator, variant=args.variant,
        opt=args.opt, ram_limit=run.parse_size(args.ram_limit) if args.ram_limit else None,
        rom_limit=run.parse_size(args.rom_limit) if args.rom_limit else None, work_dir=args.work,
        timeout=args.timeout, jobs=args.jobs)
    say = (lambda _line: None) if args.quiet else (lambda line: print(line, file=sys.stderr))
    document = run.explore(settings, args.out, say)
    for path in write_explore_report(args.out / "explore.json", args.out):
        print(f"report: {path}")
    configurations = document["configurations"]
    for configuration in configurations:
        for cause in configuration["causes"]:
            print(f"{settings.model} j={configuration['j']}: {cause}", file=sys.stderr)
    best = [c["j"] for c in configurations if c["pareto"]]
    print(f"{len(configurations)} configurations in {document['seconds']['total_s']:.0f} s "
          f"({document['seconds']['per_configuration_s']:.1f} s each); non-dominated: "
          f"{', '.join(f'j={j}' for j in best) or 'none'}; {args.out / 'explore.json'}")
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
    parser.add_argument("--model", required=True,
                        help="a trained zoo model: digits-cnn, digits-mlp or tabular-ae (assay zoo list)")
    parser.add_argument("--steps", type=int, default=10, help="J: configurations j = 0..J (default 10)")
    parser.add_argument("--target", default="cortex-m4f", help="QEMU target profile (default cortex-m4f)")
    parser.add_argument("--timing", help="timing model for measured cycles and WCET (default: the target's own)")
    parser.add_argument("--retrain-epochs", type=int, default=0,
                        help="E: retrain each pruned configuration for E epochs, seeded by --seed (default 0)")
    parser.add_argument("--slack", type=float, default=0.01,
                        help="sensitivity threshold T = the unpruned model's error + SLACK (default 0.01; the "
                             "paper's T is the unpruned error itself, --slack 0)")
    parser.add_argument("--ram-limit", help="RAM budget, e.g. 96k (the paper's CPU2/CPU3 scratchpad)")
    parser.add_argument("--rom-limit", help="ROM budget, e.g. 1M")
    parser.add_argument("--inputs", type=int, default=20,
                        help="seeded inputs run under QEMU per configuration for met, wcet and the measured "
                             "stack (default 20)")
    parser.add_argument("--semantic-inputs", type=int, default=100,
                        help="seeded inputs of the semantic oracle per configuration (default 100)")
    parser.add_argument("--generator", default="assay-v2", help="generator (default assay-v2)")
    parser.add_argument("--variant", default="keras",
                        help="the generator variant whose figures are explored (default keras)")
    add_opt_option(parser)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for one run (default 600)")
    parser.add_argument("--jobs", type=int, default=2, help="stages run at once (default 2)")
    add_output_options(parser, "reports/explore", "explore.json, pareto.md, index.html and the stages' results")
    add_common_options(parser)  # --seed also seeds the retraining
    parser.set_defaults(func=cmd_explore)
