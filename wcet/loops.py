"""Loops of a routine's CFG: dominators, back edges, natural loops, nesting.

A *back edge* goes from a block to a block that dominates it (every path from
the routine's entry to the source passes through the target, the *header*).
The loop of a header is the header plus every block that reaches one of its
back edges without passing through the header. gcc at -O0 places a ``for``
loop's test after the body and jumps to it first, so the header is the test
block and its line is the ``for`` line (OTAWA names the loop the same way).

A cycle entered other than through a dominating header (*irreducible*, e.g.
a ``goto`` into a loop body) has no header a bound could be attached to; it is
an ``AnalysisError`` naming the edge's addresses. Such a cycle is found as a
retreating edge of a depth-first search whose target does not dominate its
source (in a reducible graph every retreating edge is a back edge).
"""

from __future__ import annotations

from collections import namedtuple

from wcet.armcode import ArmCode
from wcet.cfg import ENTRY, EXIT, Cfg, Edge
from wcet.errors import AnalysisError


class Loop(namedtuple("Loop", "function header offset back_edges depth parent source_line blocks routine")):
    """One natural loop of a routine.

    - ``function``: the function symbol whose range holds the header (what a
      ``wcet.facts.LoopBound`` names), or the routine's name if none does;
    - ``header``: the address of the header block's first instruction;
      ``offset`` = ``header`` - the function's start (``LoopBound.offset``);
    - ``back_edges``: for each block with an edge back to the header, the
      address of its last instruction (the branch that closes the loop);
    - ``depth``: 1 for an outermost loop of the routine, 2 inside it, ...;
    - ``parent``: the header of the innermost enclosing loop, None if outermost;
    - ``source_line``: (source file base name, line) of the header in the DWARF
      line table, None without line information (for a ``for`` loop at -O0: the
      line of the ``for``);
    - ``blocks``: start addresses of the loop's blocks (header included);
    - ``routine``: the name of the routine (CFG) the loop was found in.
    """

    __slots__ = ()

    def label(self) -> str:
        where = f"{self.function} + {self.offset:#x} ({self.header:#x})"
        return where + (f" at {self.source_line[0]}:{self.source_line[1]}" if self.source_line else "")


def dominators(cfg: Cfg) -> tuple[dict[int, int], list[int], list[tuple[int, int]]]:
    """(immediate dominator of each reachable block, blocks in reverse postorder, retreating edges)."""
    successors: dict[int, list[int]] = {start: [] for start in cfg.blocks}
    for edge in cfg.edges:
        if edge.source != ENTRY and edge.target != EXIT and edge.target not in successors[edge.source]:
            successors[edge.source].append(edge.target)
    postorder: list[int] = []
    retreating: list[tuple[int, int]] = []
    on_stack: set[int] = {cfg.entry}
    visited: set[int] = {cfg.entry}
    stack: list[tuple[int, int]] = [(cfg.entry, 0)]
    while stack:
        node, index = stack[-1]
        if index < len(successors[node]):
            stack[-1] = (node, index + 1)
            child = successors[node][index]
            if child in on_stack:
                retreating.append((node, child))
            elif child not in visited:
                visited.add(child)
                on_stack.add(child)
                stack.append((child, 0))
        else:
            stack.pop()
            on_stack.discard(node)
            postorder.append(node)
    order = {node: n for n, node in enumerate(postorder)}
    rpo = postorder[::-1]
    predecessors: dict[int, list[int]] = {node: [] for node in rpo}
    for node in rpo:
        for child in successors[node]:
            predecessors[child].append(node)
    idom: dict[int, int] = {cfg.entry: cfg.entry}
    changed = True
    while changed:  # Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm"
        changed = False
        for node in rpo[1:]:
            new = None
            for pred in predecessors[node]:
                if pred not in idom:
                    continue
                if new is None:
                    new = pred
                    continue
                a, b = pred, new
                while a != b:
                    while order[a] < order[b]:
                        a = idom[a]
                    while order[b] < order[a]:
                        b = idom[b]
                new = a
            if idom.get(node) != new:
                idom[node] = new
                changed = True
    return idom, rpo, retreating


def _dominates(idom: dict[int, int], a: int, b: int) -> bool:
    while True:
        if b == a:
            return True
        parent = idom[b]
        if parent == b:
            return False
        b = parent


def find_loops(cfg: Cfg, code: ArmCode | None = None) -> list[Loop]:
    """The loops of ``cfg``, outermost first (then by header address)."""
    idom, _, retreating = dominators(cfg)
    latches: dict[int, list[int]] = {}
    for source, target in retreating:
        if not _dominates(idom, target, source):
            last = cfg.blocks[source].last.address
            raise AnalysisError(f"irreducible loop in {cfg.name}: the edge {last:#x} -> {target:#x} enters a cycle "
                                f"that {target:#x} does not dominate", target)
        latches.setdefault(target, []).append(source)
    if not latches:
        return []  # no back edge (straight-line code, V3): no loop
    predecessors: dict[int, set[int]] = {start: set() for start in cfg.blocks}
    for edge in cfg.edges:
        if edge.source != ENTRY and edge.target != EXIT:
            predecessors[edge.target].add(edge.source)
    bodies: dict[int, frozenset[int]] = {}
    for header, sources in latches.items():
        body, todo = {header}, [s for s in sources if s != header]
        body.update(todo)
        while todo:
            node = todo.pop()
            for pred in predecessors[node]:
                if pred not in body and pred in idom:
                    body.add(pred)
                    todo.append(pred)
        bodies[header] = frozenset(body)
    parents: dict[int, int | None] = {}
    for header in bodies:
        enclosing = [h for h, body in bodies.items() if h != header and header in body]
        parents[header] = min(enclosing, key=lambda h: len(bodies[h])) if enclosing else None

    def depth(header: int) -> int:
        n = 1
        while parents[header] is not None:
            header, n = parents[header], n + 1
        return n

    loops = []
    for header, body in bodies.items():
        function, offset = cfg.name, header - cfg.entry
        line = None
        if code is not None:
            symbol = code.containing(header)
            if symbol is not None:
                function, offset = symbol.name, header - symbol.start
            line = code.line(header)
        back = tuple(sorted(cfg.blocks[s].last.address for s in latches[header]))
        loops.append(Loop(function=function, header=header, offset=offset, back_edges=back, depth=depth(header),
                          parent=parents[header], source_line=line, blocks=body, routine=cfg.name))
    loops.sort(key=lambda loop: (loop.depth, loop.header))
    return loops


def loop_edges(cfg: Cfg, loop: Loop) -> tuple[list[Edge], list[Edge]]:
    """(entry edges, back edges) of ``loop``: the edges into its header from outside and from inside it."""
    entries, back = [], []
    for edge in cfg.edges:
        if edge.target == loop.header:
            (back if edge.source in loop.blocks else entries).append(edge)
    return entries, back
