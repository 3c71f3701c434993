"""The ``assay`` command line: the entry point and the options every stage shares.

Each stage adds its own command (``harness/stages/<name>/command.py``); this
module finds them, so adding a stage needs no edit here. Printing and progress
live at this edge, never in the stages' run logic.

Exit status: 0 when every item passed, 1 when any item failed or had an error,
2 for bad input (a missing or unsupported model, an unknown name) — with a
one-line message and no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

from harness.errors import USER_ERRORS

# Registries that add commands of their own; every stage in harness/stages adds its own too.
REGISTRY_COMMANDS = ("harness.models.command",)


def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """--seed, --model-seed and --work, shared by every command that loads models or generates code."""
    parser.add_argument("--seed", type=int, default=0, help="seed for the test inputs (default 0)")
    parser.add_argument("--model-seed", type=int, default=0,
                        help="seed for the weights of zoo models (default 0; fixed, so C generated earlier can be "
                             "checked with other --seed inputs)")
    parser.add_argument("--work", type=Path, default=Path("generated"),
                        help="where zoo models, generated C, builds and reference outputs go (default generated/)")


def add_selection_options(parser: argparse.ArgumentParser, default_targets: str) -> None:
    """--models, --tier, --generators, --targets: what a campaign command runs on."""
    parser.add_argument("--models", action="append",
                        help="comma-separated zoo names or model files (default: the --tier); repeatable, and a "
                             "value that names an existing file is taken whole, commas included")
    parser.add_argument("--tier", default="default", choices=["default", "full", "trained"],
                        help="zoo tier used when --models is not given (default: default)")
    parser.add_argument("--generators", default="assay-v2",
                        help="comma-separated generators; dir:PATH takes already generated C with an assay.json "
                             "(default assay-v2)")
    parser.add_argument("--targets", default=default_targets,
                        help=f"comma-separated target profiles (toolchains/*.toml; default {default_targets})")


def selected_models(args: argparse.Namespace) -> list[str]:
    """The models named by --models, else the zoo tier given by --tier."""
    from harness.models import zoo

    if not args.models:
        return zoo.names(args.tier)
    return [name for value in args.models for name in ([value] if Path(value).exists() else csv_list(value))]


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


def command_modules(command: str | None = None) -> list[ModuleType]:
    """The modules that add ``assay`` subcommands: the registries' and every stage's; only the stage's own
    when ``command`` names a stage (running one command imports no other: ``assay wcet --elf`` is a
    WCET tool that runs in every build and starts in a fraction of a second)."""
    from harness import stages

    if command is not None:
        own = stages.command_modules([command])
        if own:
            return own
    return [*(importlib.import_module(name) for name in REGISTRY_COMMANDS), *stages.command_modules()]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``assay`` parser with every command, or with ``command`` alone when a stage of that name adds it."""
    parser = argparse.ArgumentParser(
        prog="assay",
        description="Assay: verify neural-network C code generators (semantic preservation against Keras "
                    "and ONNX Runtime, the infinity-norm error of ACETONE Definition 15).")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for module in command_modules(command):
        module.add_command(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((word for word in argv if not word.startswith("-")), None)  # the top level has only --help
    args = build_parser(command).parse_args(argv)
    try:
        return args.func(args)
    except USER_ERRORS as exc:
        print(f"assay: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("assay: interrupted; finished items are kept in results.json", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
