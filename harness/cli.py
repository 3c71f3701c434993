"""The ``assay`` command line: the entry point and the options every stage shares.

Each stage adds its own command (``harness/stages/<name>/command.py``); this
module finds them in the entry-point group ``assay.commands`` (``harness.registry``;
Assay's own in its ``pyproject.toml``), so adding a stage, in Assay or in a package
of its own, needs no edit here. Printing and progress
live at this edge, never in the stages' run logic.

Exit status: 0 when every item passed, 1 when any item failed or had an error,
2 for bad input (a missing or unsupported model, an unknown name) — with a
one-line message and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from harness.errors import USER_ERRORS

def csv_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def add_common_options(parser: argparse.ArgumentParser) -> None:
    """--seed, --model-seed and --work, shared by every command that loads models or generates code (declared
    once in ``harness.contract``: the pytest campaign offers them too)."""
    from harness.contract import COMMON

    for option in COMMON:
        option.add_to(parser)


def add_selection_options(parser: argparse.ArgumentParser, default_targets: str | None = None,
                          per_model: bool = False) -> None:
    """--models, --tier, --generators, --targets: what a campaign command runs on.

    A stage that runs per model (``harness.core.plan.expand_models``, its spec's ``per``) takes only --models and
    --tier: ``per_model`` leaves out --generators and --targets.
    """
    from harness.contract import DEFAULT_GENERATORS

    parser.add_argument("--models", action="append",
                        help="comma-separated zoo names or model files (default: the --tier); repeatable, and a "
                             "value that names an existing file is taken whole, commas included")
    from harness.models.tiers import TIERS

    parser.add_argument("--tier", default="default", choices=TIERS,
                        help="zoo tier used when --models is not given (default: default)")
    if per_model:
        return
    if default_targets is None:
        raise ValueError("a per-item stage's --targets needs a default (its spec's default_targets)")
    parser.add_argument("--generators", default=DEFAULT_GENERATORS,
                        help="comma-separated generators; dir:PATH takes already generated C with an assay.json "
                             f"(default {DEFAULT_GENERATORS})")
    parser.add_argument("--targets", default=default_targets,
                        help=f"comma-separated target profiles (toolchains/*.toml, or an installed package's; default "
                             f"{default_targets})")


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


def command_modules(command: str | None = None) -> list[ModuleType]:
    """The modules that add ``assay`` subcommands (``add_command(subparsers)``), each once: only the one
    registered for ``command`` when it names one (running one command imports no other: ``assay wcet --elf``
    is a WCET tool that runs in every build and starts in a fraction of a second), else all of them."""
    from harness import registry

    if command in registry.names("commands"):
        return [registry.load("commands", command)]
    modules = [registry.load("commands", name) for name in registry.names("commands")]
    return [module for k, module in enumerate(modules) if module not in modules[:k]]


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
