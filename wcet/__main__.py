"""``python -m wcet ELF FUNCTION [--flow-facts F.ff|F.ffx] [--timing trivial] [--json]``.

The WCET library used on its own, without the harness: prints ``WCET[FUNCTION]
= N cycles``. Exit status: 0 bounded, 1 loops left without a bound (each is
listed), 2 bad input (one line).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wcet import bound, timing
from wcet.errors import ConfigurationError, UnboundedLoopsError, WcetError


def _parameters(texts: list[str]) -> dict[str, int]:
    parameters = {}
    for text in texts:
        key, equals, value = text.partition("=")
        if not (equals and key and value.lstrip("-").isdigit()):
            raise ConfigurationError(f"--timing-option {text!r}: expected KEY=INTEGER")
        parameters[key] = int(value)
    return parameters


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wcet", description=__doc__.split("\n\n")[1])
    parser.add_argument("elf", type=Path, help="an ARM (ARM or Thumb-2) ELF with symbols")
    parser.add_argument("function", help="the function to bound")
    parser.add_argument("--flow-facts", type=Path, help="an OTAWA .ff or .ffx file (default: the toolchain's "
                                                        "library annotations only)")
    parser.add_argument("--timing", default="trivial", help=f"timing model: {', '.join(timing.names())} "
                                                            "(default trivial)")
    parser.add_argument("--timing-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of the timing model, e.g. n_wait_states=2 (repeatable)")
    parser.add_argument("--json", action="store_true", help=f"also print the result as JSON ({bound.SCHEMA})")
    args = parser.parse_args(argv)
    try:
        model = timing.get(args.timing, **_parameters(args.timing_option))
        result = bound.bound(args.elf, args.function, model, args.flow_facts)
    except UnboundedLoopsError as exc:
        print("\n".join(bound.unbounded_lines(args.elf, args.function, exc)), file=sys.stderr)
        return 1
    except WcetError as exc:
        print(f"wcet: error: {exc}", file=sys.stderr)
        return 2
    print(f"WCET[{args.function}] = {result.wcet_cycles} cycles")
    if args.json:
        print(json.dumps(bound.as_json(args.elf, model, result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
