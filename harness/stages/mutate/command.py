"""``assay mutate``: the oracle's power measured by seeded mutants of the generated C.

Exit status: 0 when every item meets the targets (no false alarm, >= 99 % of the
non-equivalent code mutants killed, every weight mutant above the tolerance
killed), 1 otherwise or on an item error, 2 for bad input.
"""

from __future__ import annotations

import argparse

from harness.cli import add_common_options, add_opt_option, add_output_options, csv_list, selected_models
from harness.core.inputsets import SETS
from harness.errors import ConfigError


def cmd_mutate(args: argparse.Namespace) -> int:
    unknown = [name for name in csv_list(args.input_sets) if name not in SETS]
    if unknown:
        raise ConfigError(f"unknown input set {', '.join(unknown)} (known: {', '.join(SETS)})")
    from harness.core.progress import finish, run_items
    from harness.stages.mutate import run as mutate
    from harness.stages.mutate.report import write_mutation_report

    settings = mutate.Settings(n_inputs=args.inputs, seed=args.seed, model_seed=args.model_seed, opt=args.opt,
                               work_dir=args.work, timeout=args.timeout, redo=args.redo, seeds=args.seeds,
                               reference=args.reference, atol=args.atol, rtol=args.rtol,
                               weights_per_array=args.weights_per_array, max_mutants=args.max_mutants,
                               sanitize=args.sanitize, input_sets=tuple(csv_list(args.input_sets)),
                               set_inputs=args.set_inputs, jobs=args.jobs)
    args.models = args.model
    campaign = mutate.plan(selected_models(args), csv_list(args.generators), settings,
                           csv_list(args.variants) if args.variants else None)
    store = mutate.open_store(args.out / "mutation.json")

    def run(item) -> tuple[bool, list[str]]:
        record = mutate.run_item(item, settings, store)
        passed = record["verdict"] == "pass"
        return passed, [] if passed else [f"{item.id}: {record['verdict']}: {record['cause']}"]

    failed = run_items(campaign.items, run, args.quiet)
    paths = write_mutation_report(store.path, args.out) if store.path.is_file() else []
    return finish(campaign, failed, f"records in {store.path}", paths)


def add_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "mutate", help="oracle adequacy: seeded mutants of the generated C, each judged by the oracle",
        description="For every (model, generator, variant): generates C, checks the unmutated code on --seeds input "
                    "seeds (a failure is a false alarm), then makes mutants (arithmetic and relational operators, "
                    "loop bounds +-1, index offsets, deleted statements, swapped activations, weights perturbed by "
                    "1e-3, 1e-5, 1e-7), builds and runs each on the host and judges it with the oracle against the "
                    "reference; survivors also run under ASan and UBSan. Reports killed, survived (with class and "
                    "diff), stillborn and judged-equivalent mutants. Writes OUT/mutation.json and OUT/mutation.md.")
    parser.add_argument("--model", "--models", dest="model", action="append", required=True,
                        help="zoo name or model file (comma-separated, repeatable)")
    parser.add_argument("--generators", "--generator", default="assay-v2",
                        help="comma-separated generators (default assay-v2)")
    parser.add_argument("--variants", help="comma-separated generator variants (default: all, e.g. keras,onnx)")
    parser.add_argument("--inputs", type=int, default=1000, help="test inputs (default 1000)")
    parser.add_argument("--seeds", type=int, default=10,
                        help="input seeds (SEED, SEED+1, ...) the unmutated code must pass on (default 10)")
    parser.add_argument("--reference", help="reference runtime (default keras, else onnxruntime)")
    parser.add_argument("--atol", type=float, help="absolute tolerance (default: the model's own)")
    parser.add_argument("--rtol", type=float, help="relative tolerance (default: the model's own)")
    parser.add_argument("--weights-per-array", type=int, default=2,
                        help="weights perturbed per array and relative amount (default 2)")
    parser.add_argument("--max-mutants", type=int, help="run a seeded sample of this many mutants (default: all)")
    parser.add_argument("--sanitize", type=int, default=20,
                        help="inputs each survivor and the clean code run under ASan and UBSan (default 20; 0: none)")
    parser.add_argument("--input-sets", default=",".join(SETS),
                        help="inputs the mutants are judged on (docs/mutation.md): uniform (--inputs), corners, "
                             "thresholds, coverage (--set-inputs each); default all four")
    parser.add_argument("--set-inputs", type=int, default=100,
                        help="inputs of each input set but the uniform one (default 100)")
    parser.add_argument("--jobs", type=int, default=2,
                        help="mutants built and run at a time (default 2; the results do not depend on it)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for one batch (default 600)")
    parser.add_argument("--redo", action="store_true", help="recompute items already in mutation.json")
    add_opt_option(parser)
    add_output_options(parser, "reports/mutate", "mutation.json and mutation.md")
    add_common_options(parser)
    parser.set_defaults(func=cmd_mutate, tier="default")
