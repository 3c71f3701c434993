"""An ARM ELF as the WCET analysis sees it: functions, routine CFGs, loops, the call graph.

    program = load_program(Path("assay.elf"))
    program.functions["dense"]            # wcet.armcode.Function(name, start, end, thumb)
    program.cfg("dense")                   # wcet.cfg.Cfg of the code one call of dense runs
    program.loops("dense")                 # [wcet.loops.Loop(function, header, offset, back_edges,
                                           #                   depth, parent, source_line, blocks, routine)]
    program.call_graph("main")             # {routine entry: [called routine entries]}

``loops(function)`` lists the natural loops of the code one call of the
function runs (its own code and any shared code it jumps into; not its
callees'), outermost first, each with its header address, the offset that a
``wcet.facts.LoopBound`` uses, its nesting and the DWARF line of its header.
CFGs are built once per entry and set of flow facts (multicalls, noreturn,
nocall and ignorecontrol change them) and cached.
"""

from __future__ import annotations

import weakref
from pathlib import Path

from wcet import cfg as cfgs
from wcet.armcode import ArmCode, Function, load_code
from wcet.cfg import Cfg
from wcet.errors import AnalysisError
from wcet.facts import FlowFacts
from wcet.loops import Loop, find_loops


class Program:
    """The functions of one ARM ELF and, on demand, the CFGs and loops of the code they run."""

    def __init__(self, code: ArmCode):
        self.code = code
        self.path = code.path
        self._cfgs: dict[tuple, Cfg] = {}
        self._loops: dict[tuple, list[Loop]] = {}

    @property
    def functions(self) -> dict[str, Function]:
        """Every function symbol (aliases included) by name."""
        return self.code.functions

    def function(self, name: str) -> Function:
        """The function called ``name``; an ``AnalysisError`` if the ELF has no such symbol (or none at all)."""
        return self.code.function(name)

    def address(self, function: str | int) -> int:
        """A function's start address (a name, or an address given as is)."""
        return function if isinstance(function, int) else self.function(function).start

    def cfg(self, function: str | int, facts: FlowFacts | None = None) -> Cfg:
        """The CFG of the routine at ``function`` (name or entry address)."""
        entry = self.address(function)
        key = (entry, _facts_key(facts))
        if key not in self._cfgs:
            self._cfgs[key] = cfgs.build(self.code, entry, facts)
        return self._cfgs[key]

    def loops(self, function: str | int, facts: FlowFacts | None = None) -> list[Loop]:
        """The loops of the code one call of ``function`` runs, outermost first (see ``wcet.loops.Loop``)."""
        graph = self.cfg(function, facts)
        key = (graph.entry, _facts_key(facts))
        if key not in self._loops:
            self._loops[key] = find_loops(graph, self.code)
        return self._loops[key]

    def call_graph(self, function: str | int, facts: FlowFacts | None = None) -> dict[int, list[int]]:
        """Every routine reachable from ``function`` by calls and tail calls, with the routines it calls."""
        graph: dict[int, list[int]] = {}
        todo = [self.address(function)]
        while todo:
            entry = todo.pop()
            if entry in graph:
                continue
            callees = list(dict.fromkeys(c for edge in self.cfg(entry, facts).calls() for c in edge.callees))
            graph[entry] = callees
            todo.extend(callees)
        return graph

    def name(self, address: int) -> str:
        """The function symbol at ``address``, or the address in hex."""
        names = self.code.names_at(address)
        return names[0] if names else f"{address:#x}"

    def where(self, address: int) -> str:
        """``function + 0xoff (file:line)`` for messages."""
        symbol = self.code.containing(address)
        text = f"{symbol.name} + {address - symbol.start:#x}" if symbol else f"{address:#x}"
        line = self.code.line(address)
        return text + (f" ({line[0]}:{line[1]})" if line else "")


def load_program(elf: Path | str, mclass: bool | None = None) -> Program:
    """Read ``elf`` (symbols, mapping symbols, code; DWARF lines when present).

    ``mclass`` forces the M-profile (Thumb-only) decoding; by default it comes
    from the ELF's build attributes. The decoded code, and the CFGs and loops
    built from it, are shared with earlier loads of the same, unchanged file
    (``wcet.armcode.load_code``): the flow facts and the bound of one ELF build
    each routine's CFG once. A stripped ELF loads, but naming a function in it
    is an ``AnalysisError``.
    """
    path = Path(elf)
    if not path.is_file():
        raise AnalysisError(f"{path}: no such file")
    code = load_code(path, mclass)
    program = _PROGRAMS.get(code)
    if program is None:
        program = _PROGRAMS[code] = Program(code)
    return program


_PROGRAMS: "weakref.WeakKeyDictionary[ArmCode, Program]" = weakref.WeakKeyDictionary()  # while its code is kept


def _facts_key(facts: FlowFacts | None) -> tuple:
    if facts is None:
        return ()
    return (tuple(sorted((k, tuple(v)) for k, v in facts.multicalls.items())),
            tuple(sorted((k, tuple(v)) for k, v in facts.multibranches.items())), tuple(sorted(facts.noreturn)),
            tuple(sorted(facts.nocall)), tuple(sorted(facts.ignorecontrol)), tuple(sorted(facts.returns)),
            tuple(sorted(facts.forced.items())), tuple(sorted(facts.ignoreseq)), tuple(sorted(facts.ignore_entry)))
