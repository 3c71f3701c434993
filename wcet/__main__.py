"""``python -m wcet ELF FUNCTION [--flow-facts F.ff|F.ffx] [--timing trivial] [--json]``, or ``--batch FILE``.

The WCET library used on its own, without the harness: prints ``WCET[FUNCTION]
= N cycles``. Exit status: 0 bounded, 1 loops left without a bound (each is
listed), 2 bad input (one line). ``--batch FILE`` (``-``: standard input)
bounds one ``ELF FUNCTION [FLOW_FACTS]`` triple per line in this one process
(``wcet.bound.run_batch``).

Start-up is kept light: nothing but ``argparse`` is imported before the
arguments are read, and the analysis modules only then.
"""

from __future__ import annotations

import argparse
import sys


def _parameters(texts: list[str]) -> dict[str, int]:
    from wcet.errors import ConfigurationError

    parameters = {}
    for text in texts:
        key, equals, value = text.partition("=")
        if not (equals and key and value.lstrip("-").isdigit()):
            raise ConfigurationError(f"--timing-option {text!r}: expected KEY=INTEGER")
        parameters[key] = int(value)
    return parameters


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help formatter at the terminal's width, found as ``shutil.get_terminal_size`` finds it but
    without importing ``shutil``, which argparse does for every argument added (and with it zlib, bz2 and lzma:
    0.5 MB of the 22 MB a bound takes)."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return argparse.HelpFormatter(prog, width=columns - 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wcet", description=__doc__.split("\n\n")[1],
                                     formatter_class=_formatter)
    parser.add_argument("elf", nargs="?", help="an ARM (ARM or Thumb-2) ELF with symbols")
    parser.add_argument("function", nargs="?", help="the function to bound")
    parser.add_argument("--flow-facts", help="an OTAWA .ff or .ffx file (default: the toolchain's library "
                                             "annotations only)")
    parser.add_argument("--timing", default="trivial", help="timing model: trivial, arm7tdmi, cortex-m4 or one an "
                                                            "installed package registers (default trivial)")
    parser.add_argument("--timing-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of the timing model, e.g. n_wait_states=2 (repeatable)")
    parser.add_argument("--json", action="store_true", help="also print the result as JSON (assay-wcet-elf/1); "
                                                            "with --batch, one JSON object per line instead")
    parser.add_argument("--batch", metavar="FILE", help="bound every 'ELF FUNCTION [FLOW_FACTS]' line of FILE "
                                                        "('-': standard input) in this one process")
    args = parser.parse_args(argv)
    if args.batch is None and not (args.elf and args.function):
        parser.error("give ELF and FUNCTION, or --batch FILE")
    if args.batch is not None and (args.elf or args.flow_facts):
        parser.error("--batch takes its ELFs, functions and flow facts from the file")
    from pathlib import Path

    from wcet import bound, timing
    from wcet.errors import UnboundedLoopsError, WcetError

    try:
        model = timing.get(args.timing, **_parameters(args.timing_option))
        if args.batch is not None:
            return bound.run_batch(args.batch, model, sys.stdout, args.json)
        elf = Path(args.elf)
        result = bound.bound(elf, args.function, model, Path(args.flow_facts) if args.flow_facts else None)
    except UnboundedLoopsError as exc:
        print("\n".join(bound.unbounded_lines(Path(args.elf), args.function, exc)), file=sys.stderr)
        return 1
    except WcetError as exc:
        print(f"wcet: error: {exc}", file=sys.stderr)
        return 2
    print(f"WCET[{args.function}] = {result.wcet_cycles} cycles")
    if args.json:
        import json

        print(json.dumps(bound.as_json(elf, model, result), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
