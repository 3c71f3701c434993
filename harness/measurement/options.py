"""The options of every command that measures or bounds cycles: timing models and their parameters,
optimisation level, inputs measured, the emulator's time limit."""

from __future__ import annotations

import argparse

from harness.contract import Option
from harness.errors import ConfigError
from harness.options import add_opt_option


def add_timing_options(parser: argparse.ArgumentParser, inputs: Option) -> None:
    """--timing, --timing-option, --opt, --inputs and --timeout: how measured cycles are obtained and priced.

    ``inputs`` is the stage's --inputs, declared in its contract (``harness/stages/<stage>/spec.py``): its
    default differs between stages and is its ``Settings``' too."""
    parser.add_argument("--timing",
                        help="comma-separated timing models: trivial, arm7tdmi, cortex-m4 (default: trivial and "
                             "each target's own model); a model that does not describe a target's CPU is skipped "
                             "for it")
    parser.add_argument("--timing-option", action="append", default=[], metavar="MODEL.KEY=VALUE",
                        help="set a timing model parameter, e.g. arm7tdmi.n_wait_states=2, "
                             "cortex-m4.flash_wait_states=5, cortex-m4.refill=1, trivial.cycles_per_instruction=5 "
                             "(repeatable)")
    add_opt_option(parser)
    inputs.add_to(parser)
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds allowed for one batch under QEMU (default 600)")


def parse_timing_options(texts: list[str]) -> dict[str, dict[str, int]]:
    """["arm7tdmi.n_wait_states=2", ...] -> {"arm7tdmi": {"n_wait_states": 2}}."""
    options: dict[str, dict[str, int]] = {}
    for text in texts:
        name_key, equals, value = text.partition("=")
        name, dot, key = name_key.partition(".")
        if not (equals and dot and name and key):
            raise ConfigError(f"--timing-option {text!r}: expected MODEL.KEY=VALUE")
        try:
            options.setdefault(name, {})[key] = int(value)
        except ValueError:
            raise ConfigError(f"--timing-option {text!r}: VALUE must be an integer") from None
    return options
