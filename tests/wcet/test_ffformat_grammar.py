"""The flow-fact grammar corpus (tests/wcet/flowfacts/): every F4 and FFX statement form OTAWA reads.

cases.json gives, for each file, how it is read (the corpus' symbol table alone, or the recorded
tests/wcet/otawa-recordings/arm7tdmi/dense.elf with its analysed function main), the ``FlowFacts`` it must give, written
out by hand from OTAWA's semantics (statinf-otawa/otawa: util_fft_parser.yy, flowfact_FlowFactLoader.cpp;
docs/flowfacts.md), and the formats it round-trips through (``write_f4``/``write_ffx`` then read back); and
the statements Assay refuses, each with the message that names it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recordings import OTAWA
from wcet.facts import FlowFacts, LoopBound
from wcet.ffformat import FlowFactFormatError, content, parse_f4, parse_ffx, write_f4, write_ffx
from wcet.fflocate import ElfLocations

CORPUS = Path(__file__).resolve().parent / "flowfacts"
CASES = json.loads((CORPUS / "cases.json").read_text())
SYMBOLS = {name: int(address, 16) for name, address in CASES["symbols"].items()}


def _addresses(values) -> frozenset[int]:
    return frozenset(int(v, 16) for v in values)


def expected(case: dict) -> FlowFacts:
    """The case's FlowFacts, from cases.json."""
    loops = tuple(LoopBound(function, int(offset, 16), maximum, total, tuple(int(a, 16) for a in context))
                  for function, offset, maximum, total, context in case.get("loops", []))
    checksum = case.get("checksum")
    return FlowFacts(loops=loops,
                     multicalls={int(k, 16): tuple(int(t, 16) for t in v) for k, v in case.get("multicalls", {}).items()},
                     multibranches={int(k, 16): tuple(int(t, 16) for t in v)
                                    for k, v in case.get("multibranches", {}).items()},
                     noreturn=frozenset(case.get("noreturn", [])), nocall=frozenset(case.get("nocall", [])),
                     ignorecontrol=_addresses(case.get("ignorecontrol", [])),
                     returns=_addresses(case.get("returns", [])), preserve=_addresses(case.get("preserve", [])),
                     ignoreseq=_addresses(case.get("ignoreseq", [])), ignore_entry=frozenset(case.get("ignore_entry", [])),
                     forced={int(k, 16): v for k, v in case.get("forced", {}).items()},
                     checksum=(checksum[0], int(checksum[1], 16)) if checksum else None)


def reader(case: dict, form: str):
    """parse_f4 or parse_ffx (by ``form``) with the case's way of resolving locations."""
    parse = parse_ffx if form == "ffx" else parse_f4
    if "elf" in case:
        if not (OTAWA / case["elf"]).is_file():
            pytest.skip("tests/wcet/otawa-recordings not found")
        locations = ElfLocations(OTAWA / case["elf"], case["root"])
        return lambda text, source: parse(text, source=source, locations=locations)
    return lambda text, source: parse(text, source=source, symbols=SYMBOLS, root=case.get("root"))


@pytest.mark.parametrize("name", sorted(CASES["files"]))
def test_corpus_file_gives_its_flow_facts(name):
    case = CASES["files"][name]
    form = "ffx" if name.endswith(".ffx") else "f4"
    facts = reader(case, form)((CORPUS / name).read_text(), name)
    assert content(facts) == content(expected(case))


@pytest.mark.parametrize("name, form", [(n, f) for n in sorted(CASES["files"]) for f in CASES["files"][n]["round_trip"]])
def test_corpus_file_round_trips_through_the_writers(name, form):
    case = CASES["files"][name]
    facts = reader(case, "ffx" if name.endswith(".ffx") else "f4")((CORPUS / name).read_text(), name)
    targets = {int(site, 16): callee for site, callee in case.get("call_targets", {}).items()}
    if form == "f4":
        text = write_f4(facts, entry=case.get("root"))
    else:
        text = write_ffx(facts, entry=case.get("root"), call_targets=targets)
        facts = facts._replace(checksum=None)  # FFX has no checksum
    assert content(reader(case, form)(text, f"{name}.{form}")) == content(facts)


@pytest.mark.parametrize("form, text, message", CASES["refused"], ids=[c[1][:40] for c in CASES["refused"]])
def test_refused_statements_are_named_with_file_and_line(form, text, message):
    source = f"refused.{form}"
    with pytest.raises(FlowFactFormatError) as caught:
        if form == "f4":
            parse_f4("// line 1\n" + text + "\n", source=source, symbols=SYMBOLS)
        else:
            parse_ffx(f"<flowfacts>\n{text}\n</flowfacts>", source=source, symbols=SYMBOLS)
    assert any(message in problem for problem in caught.value.problems), caught.value.problems
    assert all(problem.startswith(f"{source}:2: ") for problem in caught.value.problems), caught.value.problems
