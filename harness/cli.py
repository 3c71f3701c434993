"""The ``assay`` command line: printing and progress live here, at the edge.

Exit status: 0 when every item passed, 1 when any item failed or had an error,
2 for bad input (a missing or unsupported model, an unknown name) — with a
one-line message and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import AssayError

DEFAULT_REFERENCES = "keras,onnxruntime"


def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_zoo_list(args: argparse.Namespace) -> int:
    from harness import zoo

    entries = [e for e in zoo.entries() if args.tier in (None, e.tier)]
    print(f"{'name':<14} {'tier':<8} {'inputs from':<14} {'tolerance':<10} description")
    for e in entries:
        low, high = e.input_domain
        print(f"{e.name:<14} {e.tier:<8} {f'[{low:g}, {high:g}]':<14} {e.tolerance:<10g} {e.description}")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    from harness import generators
    from harness.campaign import Settings, load_model

    model = load_model(args.model, Settings(seed=args.seed, work_dir=args.work))
    generator = generators.get(args.generator)
    variant = args.variant or generator.variants(model)[0]
    if variant not in generator.variants(model):
        raise AssayError(f"{args.generator} has no variant '{variant}' for {model.name}; "
                         f"choose from {', '.join(generator.variants(model))}")
    code = generator.generate(model, variant, args.out)
    print(f"{model.name}: {generator.name} ({variant}) -> {code.directory} "
          f"[{', '.join(p.name for p in code.sources)}; entry {code.entry}]")
    return 0


def cmd_semantic(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from harness.campaign import Settings, plan, run_item
    from harness.report import write_semantic_report
    from harness.results import ResultStore

    models = selected_models(args)
    settings = Settings(n_inputs=args.inputs, seed=args.seed, opt=args.opt, work_dir=args.work,
                        timeout=args.timeout, redo=args.redo)
    campaign = plan(models, csv_list(args.generators), csv_list(args.references), csv_list(args.targets), settings)
    store = ResultStore(args.out / "results.json")
    failed = 0
    with tqdm(campaign.items, unit="item", file=sys.stderr, disable=args.quiet) as progress:
        for item in progress:
            progress.set_description(item.id)
            for record in run_item(item, settings, store):
                if record["verdict"] != "pass":
                    failed += 1
                    tqdm.write(f"{item.id} vs {record['reference']}: {record['verdict']}: {record['cause']}",
                               file=sys.stderr)
    paths = write_semantic_report(store.path, args.out) if store.path.is_file() else []
    passed = sum(r["verdict"] == "pass" for r in store.records()) if store.path.is_file() else 0
    print(f"{len(campaign.items)} items, {failed} failed or in error; {passed} passing records in {store.path}")
    for path in paths:
        print(f"report: {path}")
    if campaign.bad_input:
        return 2
    return 1 if failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from harness.report import write_semantic_report

    if not args.results.is_file():
        raise AssayError(f"{args.results}: no such results file")
    for path in write_semantic_report(args.results, args.out or args.results.parent):
        print(f"report: {path}")
    if args.check:
        from harness.results import ResultStore

        records = ResultStore(args.results).records()
        bad = [r for r in records if r["verdict"] != "pass"]
        print(f"{len(records) - len(bad)} of {len(records)} records pass")
        return 1 if bad or not records else 0
    return 0


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """--seed and --work, shared by every command that loads models or generates code."""
    parser.add_argument("--seed", type=int, default=0, help="seed for zoo weights and test inputs (default 0)")
    parser.add_argument("--work", type=Path, default=Path("generated"),
                        help="where zoo models, generated C, builds and reference outputs go (default generated/)")


def add_selection_options(parser: argparse.ArgumentParser, default_targets: str) -> None:
    """--models, --tier, --generators, --targets: what a campaign command runs on."""
    parser.add_argument("--models", help="comma-separated zoo names or model files (default: the --tier)")
    parser.add_argument("--tier", default="default", choices=["default", "full"],
                        help="zoo tier used when --models is not given (default: default)")
    parser.add_argument("--generators", default="assay-v2",
                        help="comma-separated generators; dir:PATH takes already generated C with an assay.json "
                             "(default assay-v2)")
    parser.add_argument("--targets", default=default_targets,
                        help=f"comma-separated target profiles (toolchains/*.toml; default {default_targets})")


def selected_models(args: argparse.Namespace) -> list[str]:
    """The models named by --models, else the zoo tier given by --tier."""
    from harness import zoo

    return csv_list(args.models) if args.models else zoo.names(args.tier)


def add_output_options(parser: argparse.ArgumentParser, default_out: str, written: str) -> None:
    """--out and --quiet."""
    parser.add_argument("--out", type=Path, default=Path(default_out),
                        help=f"{written} go here (default {default_out})")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def opt_level(text: str) -> str:
    """'-O3', 'O3' and '3' all mean -O3 (argparse takes a bare '-O3' for an option, so 'O3' is accepted)."""
    level = text.lstrip("-").removeprefix("O")
    if level not in {"0", "1", "2", "3", "s", "g"}:
        raise argparse.ArgumentTypeError(f"'{text}' is not an optimisation level (O0, O1, O2, O3, Os, Og)")
    return f"-O{level}"


def add_opt_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--opt", type=opt_level, default="-O0",
                        help="optimisation level: O0 (default, the certification setting) .. O3; "
                             "write O3 or --opt=-O3")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="assay",
        description="Assay: verify neural-network C code generators (semantic preservation against Keras "
                    "and ONNX Runtime, the infinity-norm error of ACETONE Definition 15).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    zoo_parser = sub.add_parser("zoo", help="the model zoo (paper benchmarks)")
    zoo_sub = zoo_parser.add_subparsers(dest="zoo_command", required=True, metavar="ZOO_COMMAND")
    listing = zoo_sub.add_parser("list", help="list the zoo's models, tiers, input domains and tolerances")
    listing.add_argument("--tier", choices=["default", "full"], help="only this tier")
    listing.set_defaults(func=cmd_zoo_list)

    gen = sub.add_parser("generate", help="generate C for one model and write it with its manifest")
    gen.add_argument("--model", required=True, help="zoo name or model file (.keras, .h5, .onnx, .nnet, ACETONE .json)")
    gen.add_argument("--out", type=Path, required=True, help="output directory for the C and manifest.json")
    gen.add_argument("--generator", default="assay-v2", help="generator name (default assay-v2)")
    gen.add_argument("--variant", help="generator variant; for assay-v2 the source format read: keras or onnx "
                                       "(default: the first the model has)")
    add_common_options(gen)
    gen.set_defaults(func=cmd_generate)

    sem = sub.add_parser(
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

    rep = sub.add_parser("report", help="rewrite table1.md and index.html from a results.json")
    rep.add_argument("--results", type=Path, default=Path("reports/semantic/results.json"))
    rep.add_argument("--out", type=Path, help="default: the results file's directory")
    rep.add_argument("--check", action="store_true", help="exit 1 unless every record passes")
    rep.set_defaults(func=cmd_report)
    from harness import commands

    for module in commands.modules():
        module.add_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except AssayError as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("assay: interrupted; finished items are kept in results.json", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
