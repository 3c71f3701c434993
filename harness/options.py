"""Command-line options shared below the CLI: the optimisation level.

``harness.cli`` holds the options of a campaign (models, generators, targets,
work and output folders); the optimisation level is also an option of the
timing options (``harness.measurement.options``), which the CLI's commands use
but which may not import the CLI, so it lives here, importing nothing of Assay.
"""

from __future__ import annotations

import argparse


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
