"""Where a flow-fact file's locations are in one ELF: labels, source lines, call contexts.

OTAWA's flow-fact files name code in ways only the binary can resolve
(``statinf-otawa/otawa``, ``src/prog/flowfact_FlowFactLoader.cpp``:
``addressOf``, ``scanAddress``, ``findCall``; ``src/prog/util_fft_parser.yy``:
``full_address``, ``path``):

- a label (any function symbol), plus or minus an offset;
- a source line (FFX ``source``/``line``, F4 ``"file":line``): the DWARF line
  table gives the code of that line. OTAWA attaches a loop bound to the first
  address of the line and, for each loop header without a bound of its own,
  looks one up at the first address of the header's line
  (``ipet_FlowFactLoader.cpp``, ``lookLineAt``): the bound goes to the loops
  whose header is on that line. Assay takes the loop whose header is on the
  line, and refuses a line that has no code, has no loop header or heads
  several loops (a loop duplicated by the compiler, two loops on one line),
  where OTAWA would bound them all with one figure. A call in a context is
  the one call instruction on its line (``findCall``: none or several is an
  error), as are a ``multicall``'s call, a ``multibranch``'s indirect jump and
  the instruction of ``ignorecontrol``/``return``; any other address given by
  line is the line's first address, as in OTAWA;
- a call context (F4 ``in A / @S / ...``, FFX ``<function>``/``<call>``
  nesting): a list of steps, each a function (entry address) or a call site,
  outermost first. OTAWA's ``ContextualProperty`` applies a fact to every
  occurrence whose chain of calls from the task entry (``FUNCTION`` root,
  ``CALL`` site, ``FUNCTION`` callee, ...) holds the steps in that order,
  gaps allowed. Assay's analyzer takes contexts as exact call-site chains from
  the analysed function (``LoopBound.context``), so ``contexts`` lists every
  such chain that matches the steps.

``ElfLocations(elf, root)`` does this for one ELF and analysed function.
"""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path

from wcet.armcode import flow, line_table
from wcet.errors import AnalysisError, WcetError
from wcet.facts import FlowFacts
from wcet.program import load_program

FUNCTION, CALL = "function", "call"  # the two kinds of context step


class Step(namedtuple("Step", [
    "kind",  # FUNCTION or CALL
    "address",
])):
    """One step of a call context: a function's entry address, or a call site's address."""

    __slots__ = ()


class LocationError(WcetError):
    """A location that does not resolve in this ELF; the message says which and why."""


# what an instruction located by its source line must be, per use: (description, accepted flow kinds)
INSTRUCTIONS = {
    "call": ("call", {"call", "indirect-call"}),
    "multicall": ("indirect call", {"indirect-call"}),  # ARMv4T's mov lr, pc; bx rN: give the address
    "multibranch": ("indirect jump", {"indirect-jump", "jump-table"}),
    "control": ("control instruction", {"call", "branch", "return", "indirect-call", "indirect-jump",
                                         "jump-table"}),
}


class ElfLocations:
    """Resolves flow-fact locations in ``elf``; call contexts need ``root``, the analysed function."""

    def __init__(self, elf: Path, root: str | None = None):
        self.program = load_program(elf)
        self.code = self.program.code
        self.root = root
        self._lines: list[tuple[int, int, str, int]] | None = None

    @property
    def symbols(self) -> dict[str, int]:
        """Function symbol name -> start address (Thumb bit clear)."""
        return {name: function.start for name, function in self.code.functions.items()}

    def function_of(self, address: int) -> tuple[str, int] | None:
        """(function symbol, offset) of the code at ``address``, or None outside every function."""
        function = self.code.containing(address)
        return (function.name, address - function.start) if function else None

    # -- source lines

    def line_ranges(self, file: str, line: int) -> list[tuple[int, int]]:
        """The address ranges of ``file:line`` (file matched by its base name); an error if it has no code."""
        if self._lines is None:
            self._lines = line_table(self.code.path)
            if not self._lines:
                raise LocationError(f"{self.code.path}: no DWARF line table (build with -g) to find {file}:{line}")
        base = Path(file).name
        ranges = [(start, end) for start, end, name, number in self._lines if name == base and number == line]
        if not ranges:
            raise LocationError(f"{file}:{line} has no code in {self.code.path.name}")
        return ranges

    def line_start(self, file: str, line: int) -> int:
        """The first address of ``file:line`` (OTAWA's ``addressOf(file, line)``)."""
        return min(start for start, _ in self.line_ranges(file, line))

    def loop_on_line(self, file: str, line: int, facts: FlowFacts) -> tuple[str, int]:
        """(function, offset) of the one loop whose header is on ``file:line``."""
        base = Path(file).name
        functions = {function.name: function for start, _ in self.line_ranges(file, line)
                     if (function := self.code.containing(start)) is not None}
        headers: dict[int, tuple[str, int]] = {}
        for name in sorted(functions):
            for loop in self.program.loops(name, facts):
                if loop.source_line == (base, line):
                    headers.setdefault(loop.header, (loop.function, loop.offset))
        if not headers:
            raise LocationError(f"{file}:{line} heads no loop (its code is in "
                                f"{', '.join(sorted(functions)) or 'no function'})")
        if len(headers) > 1:
            raise LocationError(f"{file}:{line} heads {len(headers)} loops ("
                                + ", ".join(f"{f} + {o:#x}" for f, o in sorted(headers.values()))
                                + "): give each by label and offset")
        return next(iter(headers.values()))

    def instruction_on_line(self, file: str, line: int, use: str) -> int:
        """The address of the one instruction of kind ``use`` (``INSTRUCTIONS``) on ``file:line``."""
        what, kinds = INSTRUCTIONS[use]
        found = []
        for start, end in self.line_ranges(file, line):
            try:
                for insn in self.code.instructions(start):
                    if insn.address >= end:
                        break
                    if flow(insn).kind in kinds:
                        found.append(insn.address)
            except AnalysisError:  # the line's code runs into data (a jump table after its jump)
                pass
        if len(found) != 1:
            where = "" if not found else " (" + ", ".join(f"{a:#x}" for a in found) + ")"
            raise LocationError(f"{file}:{line} holds {len(found) or 'no'} {what}{'s' if len(found) != 1 else ''}"
                                f"{where}; give its address")
        return found[0]

    # -- call contexts

    def contexts(self, steps: tuple[Step, ...], function: str | int, facts: FlowFacts) -> list[tuple[int, ...]]:
        """Every chain of call sites from the root to ``function`` (a name or the entry of the routine
        holding the fact) whose steps hold ``steps`` in order, gaps allowed; [()] when every chain does."""
        if self.root is None:
            raise LocationError("a call context needs the analysed function to resolve")
        root = self.program.address(self.root)
        target = self.program.address(function)
        if all(step.kind == FUNCTION and step.address in (root, target) for step in steps):
            return [()]  # the root and the function itself are on every chain
        graph = {entry: [(edge.site, callee) for edge in self.program.cfg(entry, facts).calls()
                         for callee in edge.callees]
                 for entry in self.program.call_graph(root, facts)}
        reaching = {target}  # routines from which the function can be reached
        changed = True
        while changed:
            changed = False
            for entry, calls in graph.items():
                if entry not in reaching and any(callee in reaching for _, callee in calls):
                    reaching.add(entry)
                    changed = True
        chains: list[tuple[int, ...]] = []

        def walk(entry: int, sites: tuple[int, ...], matched: int, on_chain: frozenset[int]) -> None:
            matched += matched < len(steps) and steps[matched] == Step(FUNCTION, entry)
            if entry == target and matched == len(steps):
                chains.append(sites)
            for site, callee in graph.get(entry, ()):
                if callee in reaching and callee not in on_chain:  # recursion: the analysis refuses it anyway
                    step = matched < len(steps) and steps[matched] == Step(CALL, site)
                    walk(callee, (*sites, site), matched + step, on_chain | {callee})

        if root in reaching:
            walk(root, (), 0, frozenset({root}))
        return sorted(set(chains))
