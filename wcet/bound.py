"""Bounding one function of any ELF: the library on its own, with no generator and no manifest.

Flow facts are the toolchain's library annotations plus, optionally, an OTAWA
F4 (``.ff``) or FFX (``.ffx``) file. Both ``python -m wcet`` and ``assay wcet
--elf`` go through here, so the two print and write the same things.
"""

from __future__ import annotations

from pathlib import Path

from wcet import annotations, ffformat
from wcet.analyzer import WcetResult, analyze
from wcet.errors import ConfigurationError, UnboundedLoopsError
from wcet.facts import FlowFacts
from wcet.timing import TimingModel

SCHEMA = "assay-wcet-elf/1"  # the JSON printed by --json (docs/schemas.md)


def facts_for_elf(elf: Path, flow_facts: Path | None = None, function: str | None = None) -> FlowFacts:
    """Library annotations for ``elf``, merged with a user's ``.ff``/``.ffx`` file if given.

    The file's locations are resolved in ``elf`` (``wcet.fflocate``: labels,
    source lines, call contexts from ``function``, the analysed function).
    """
    facts = annotations.library_facts(elf)
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
    return analyze(elf, function, facts_for_elf(elf, flow_facts, function), model)


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
