"""Bounding one function of any ELF: the library on its own, with no generator and no manifest.

Flow facts are the toolchain's library annotations plus, optionally, an OTAWA
F4 (``.ff``) or FFX (``.ffx``) file. Both ``python -m wcet`` and ``assay wcet
--elf`` go through here, so the two print and write the same things.

``run_batch`` bounds many (ELF, function, flow facts) triples in one process
(``--batch FILE``, ``-`` for standard input): the interpreter's start-up and
the imports are paid once, and a line is answered as soon as it is read, so a
caller can keep one process and feed it triples through a pipe (a server
mode without a socket).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from wcet import annotations, ffformat
from wcet.analyzer import WcetResult, analyze
from wcet.errors import ConfigurationError, UnboundedLoopsError
from wcet.facts import FlowFacts
from wcet.timing import TimingModel

TYPE_CHECKING = False  # typing.TYPE_CHECKING's value, without importing typing (wcet/__init__.py: start-up memory)
if TYPE_CHECKING:
    from typing import TextIO

SCHEMA = "assay-wcet-elf/1"  # the JSON printed by --json (docs/schemas.md)


def facts_for_elf(elf: Path, flow_facts: Path | None = None, function: str | None = None,
                  library: bool = True) -> FlowFacts:
    """Library annotations for ``elf`` (unless ``library`` is off), merged with a user's ``.ff``/``.ffx`` file if
    given.

    The file's locations are resolved in ``elf`` (``wcet.fflocate``: labels,
    source lines, call contexts from ``function``, the analysed function).
    """
    facts = annotations.library_facts(elf) if library else FlowFacts()
    if flow_facts is None:
        return facts
    from wcet.fflocate import ElfLocations

    try:
        text = flow_facts.read_text()
    except OSError as exc:
        raise ConfigurationError(f"{flow_facts}: cannot read the flow facts ({exc.strerror or exc})") from None
    parse = ffformat.parse_ffx if flow_facts.suffix == ".ffx" else ffformat.parse_f4
    return parse(text, source=str(flow_facts), locations=ElfLocations(elf, function)).merged(facts)


def bound(elf: Path, function: str, model: TimingModel, flow_facts: Path | None = None) -> WcetResult:
    """The WCET of ``function`` in ``elf``; ``UnboundedLoopsError`` lists every loop left without a bound."""
    if not elf.is_file():
        raise ConfigurationError(f"{elf}: no such ELF file")
    given = facts_for_elf(elf, flow_facts, function, library=False)
    try:
        return analyze(elf, function, given, model)
    except UnboundedLoopsError:
        # the library annotations (TOML) are read only when a loop needs a bound the given facts lack: most
        # generated code on a core with an FPU reaches no library loop, and the per-ELF memory goal counts the
        # TOML reader (issue 45). A loop the given facts bound keeps their bound, as they are the user's claim.
        library = annotations.library_facts(elf)
        if not library.loops:
            raise
        return analyze(elf, function, given.merged(library), model)


def unbounded_lines(elf: Path, function: str, error: UnboundedLoopsError) -> list[str]:
    """What to print for loops without a bound: a heading, then one line per loop."""
    lines = [f"{elf}: {len(error.loops)} loop(s) without a bound in {function} and its callees:"]
    for loop in error.loops:
        where = f" ({loop.source_line[0]}:{loop.source_line[1]})" if loop.source_line else ""
        lines.append(f"  loop \"{loop.function}\" + {loop.offset:#x} at {loop.header:#x}{where}")
    return lines


def as_json(elf: Path, model: TimingModel, result: WcetResult) -> dict:
    """The result as plain JSON data with a schema name (loops as objects, never Python reprs)."""
    return {"schema": SCHEMA, "elf": str(elf), "timing": model.name, "timing_params": model.params(),
            **result.as_dict()}


def batch_lines(text_lines: Iterable[str], source: str = "batch") -> Iterator[tuple[int, list[str] | str]]:
    """(line number, [ELF, FUNCTION] or [ELF, FUNCTION, FLOW_FACTS]) for each triple of a batch file, or (line
    number, the problem) for a line that is none; blank lines and ``#`` comments are skipped. Fields are split
    as a shell would (quotes for paths with spaces)."""
    import shlex

    for number, line in enumerate(text_lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            fields = shlex.split(line, comments=True)
        except ValueError as exc:
            yield number, f"{source}:{number}: {exc}"
            continue
        if len(fields) not in (2, 3):
            yield number, f"{source}:{number}: expected 'ELF FUNCTION [FLOW_FACTS]', found {len(fields)} field(s)"
            continue
        yield number, fields


def run_batch(path: Path | str, model: TimingModel, out: TextIO, json_lines: bool = False) -> int:
    """Bound every triple of the batch file ``path`` (``-``: standard input) in this process; one line per
    triple, as it is done: ``ELF: WCET[FUNCTION] = N cycles``, or ``ELF: error: ...``, or the loops left
    unbounded; with ``json_lines`` one JSON object per line instead (``assay-wcet-elf/1``, or ``{"elf", "function",
    "error"}``). Returns the exit status: 2 when some line or the file is bad, else 1 when some triple was not
    bounded, else 0."""
    import contextlib
    import json
    import sys

    from wcet.errors import WcetError

    if str(path) == "-":
        stream, source = sys.stdin, "<stdin>"
    else:
        try:
            stream, source = open(path), str(path)
        except OSError as exc:
            raise ConfigurationError(f"{path}: cannot read the batch file ({exc.strerror or exc})") from None
    status = 0
    with stream if stream is not sys.stdin else contextlib.nullcontext():
        for _, fields in batch_lines(stream, source):
            if isinstance(fields, str):
                print(json.dumps({"error": fields}) if json_lines else f"error: {fields}", file=out, flush=True)
                status = 2
                continue
            elf, function = Path(fields[0]), fields[1]
            facts = Path(fields[2]) if len(fields) == 3 else None
            try:
                result = bound(elf, function, model, facts)
            except UnboundedLoopsError as exc:
                lines = unbounded_lines(elf, function, exc)
                print(json.dumps({"elf": str(elf), "function": function, "error": " ".join(lines)}) if json_lines
                      else "\n".join(lines), file=out, flush=True)
                status = max(status, 1)
                continue
            except WcetError as exc:
                print(json.dumps({"elf": str(elf), "function": function, "error": str(exc)}) if json_lines
                      else f"{elf}: error: {exc}", file=out, flush=True)
                status = max(status, 1)
                continue
            print(json.dumps(as_json(elf, model, result)) if json_lines
                  else f"{elf}: WCET[{function}] = {result.wcet_cycles} cycles", file=out, flush=True)
    return status
