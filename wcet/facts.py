"""Flow facts: what the WCET analysis may assume about control flow, in OTAWA's terms.

This is the data model shared by every producer (the generator's manifest and
the generated C, per-toolchain library annotations, a user's .ff/.ffx file) and
every consumer (the built-in IPET analyzer, the F4/FFX writers for OTAWA).
Loop bounds mean what OTAWA means (shared/otawa/README.md): ``max`` bounds the
traversals of the loop's back edges per entry of the loop, so the ILP gets
``back_edges <= max * entry_edges``; ``for (i = 0; i < 8; i++)`` at -O0 has
bound 8 and its header runs 9 times per entry.
"""

from __future__ import annotations

from collections import namedtuple


class LoopBound(namedtuple("LoopBound", [
    "function",  # str | None
    "offset",  # int
    "max",  # int
    "total",  # int | None = None: bound on all back-edge traversals per entry of the root, if known
    "context",  # tuple[int, ...] = ()
    "source",  # tuple[str, int] | None = None: (C file, line of the loop) when known
    "justification",  # str = "": why the bound holds: required for library annotations
    "origin",  # str = "": who said so: "manifest+source", "source" (the C alone), "annotation:<file>", "user:<file>"
], defaults=(None, (), None, "", ""))):
    """One loop's bound, optionally only in one call context.

    The loop is named by its header: ``function`` + ``offset`` (bytes from the
    function symbol's address, Thumb bit cleared), or, when ``function`` is
    None, ``offset`` is the header's absolute address (F4 ``loop 0x8000 N;``).
    ``context`` lists call-site addresses from the analysed root down to the
    loop's function (FFX nesting); empty means every context.
    """

    __slots__ = ()

    def label(self) -> str:
        """How error messages name the loop."""
        where = f"{self.function} + {self.offset:#x}" if self.function else f"{self.offset:#x}"
        return where + (f" ({self.source[0]}:{self.source[1]})" if self.source else "")


_DICTS = ("multicalls", "multibranches", "sequences", "executions", "forced")  # a new dict each by default


class FlowFacts(namedtuple("FlowFacts", [
    "loops",  # tuple[LoopBound, ...] = ()
    "multicalls",  # dict[int, tuple[int, ...]] = {}: call site -> possible targets
    "multibranches",  # dict[int, tuple[int, ...]] = {}: indirect jump -> possible targets
    # dict[int, tuple[int, ...]] = {}: call site -> the target of its 1st, 2nd, ... execution during one call of
    # the analysed function (V1's layer loop, virtually unrolled); only Assay's precise bound uses it (OTAWA has
    # no such fact)
    "sequences",
    # dict[int, tuple[FlowFacts, ...]] = {}: call site -> per execution (as ``sequences``), the facts that hold
    # during it in its callee and below: loop bounds of that execution (a V1 layer's own sizes) and narrowed
    # indirect-call targets (its activation); only the precise bound uses them (OTAWA, and the
    # context-insensitive bound, cannot)
    "executions",
    "noreturn",  # frozenset[str] = frozenset(): functions that never return
    "nocall",  # frozenset[str] = frozenset(): functions whose calls the analysis ignores
    "ignorecontrol",  # frozenset[int] = frozenset(): control instructions to treat as plain instructions
    "returns",  # frozenset[int] = frozenset(): control instructions to treat as returns (OTAWA's ``return``)
    "forced",  # dict[int, str] = {}: instruction -> "branch" | "call" (OTAWA's ``force``)
    "ignoreseq",  # frozenset[int] = frozenset(): conditional branches to treat as always taken (``ignoreseq``)
    "ignore_entry",  # frozenset[str] = frozenset(): symbols that start no routine (``ignore entry``)
    # frozenset[int] = frozenset(): instructions mkff must keep as they are (OTAWA's ``preserve``): no effect on
    # a bound, kept for the formats
    "preserve",
    "checksum",  # tuple[str, int] | None = None: (ELF file name, OTAWA checksum) as written by mkff
], defaults=((), None, None, None, None, frozenset(), frozenset(), frozenset(), frozenset(), None, frozenset(),
             frozenset(), frozenset(), None))):
    """All the facts for one analysis of one ELF (a dict field left out is a new empty dict)."""

    __slots__ = ()

    def __new__(cls, *args, **kwargs) -> "FlowFacts":
        facts = super().__new__(cls, *args, **kwargs)
        fresh = {name: {} for name in _DICTS if getattr(facts, name) is None}
        return facts._replace(**fresh) if fresh else facts

    def merged(self, other: "FlowFacts") -> "FlowFacts":
        """Both sets of facts; for the same loop and context, the tighter (smaller) bound is kept."""
        best: dict[tuple, LoopBound] = {}
        for loop in (*self.loops, *other.loops):
            key = (loop.function, loop.offset, loop.context)
            if key not in best or loop.max < best[key].max:
                best[key] = loop
        return FlowFacts(loops=tuple(best.values()), multicalls={**self.multicalls, **other.multicalls},
                         multibranches={**self.multibranches, **other.multibranches},
                         sequences={**self.sequences, **other.sequences},
                         executions={**self.executions, **other.executions},
                         noreturn=self.noreturn | other.noreturn, nocall=self.nocall | other.nocall,
                         ignorecontrol=self.ignorecontrol | other.ignorecontrol,
                         returns=self.returns | other.returns, preserve=self.preserve | other.preserve,
                         forced={**self.forced, **other.forced}, ignoreseq=self.ignoreseq | other.ignoreseq,
                         ignore_entry=self.ignore_entry | other.ignore_entry,
                         checksum=self.checksum or other.checksum)
