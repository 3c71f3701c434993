"""Implicit path enumeration (IPET): the longest path through a CFG as an integer linear program.

One integer variable per CFG edge, its execution count in one run of the
routine. Constraints (Li and Malik's IPET, as OTAWA builds it):

- the entry edge runs once: ``x_entry = 1``;
- flow conservation at every block: the sum of its in-edges equals the sum
  of its out-edges (the block's own count);
- per loop, ``sum(back edges) <= max * sum(entry edges)`` (the bound counts
  back-edge traversals per entry of the loop, ``wcet.facts.LoopBound``), and
  ``sum(back edges) <= total`` when a total is known.

The objective, maximised, is ``sum(cost_e * x_e)`` with integer costs. The
same constraints serve several objectives (the whole WCET, then each region's
share), solved one after another on one HiGHS model.

Numerics: HiGHS works in floating point, so nothing it prints is taken on
trust. A lower bound: its solution rounded to integers, checked against every
constraint in exact integer arithmetic, its objective ``P`` computed with
Python integers (a path that exists within the bounds). An upper bound: the
LP relaxation's dual values give a certificate checked in exact rational
arithmetic (weak duality: with row multipliers ``y``, ``y >= 0`` on the
``<=`` rows and reduced costs ``c - A'y <= 0`` on every free column,
``c.x <= sum(y_i * u_i) + (c - A'y)_entry`` for every feasible ``x``). The
loop rows' multipliers are HiGHS's, read as exact fractions (integers first,
then small denominators: its duals carry rounding noise); the blocks'
multipliers are then computed exactly, as shortest distances to the exit
(the best potentials for those loop multipliers). Its value ``U`` bounds the
ILP's optimum. ``U < P + 1``
proves the optimum (an integer) is ``P`` (``certified``): usually the LP
relaxation alone settles it. Otherwise the ILP is solved (branch and bound)
and the same test is made with its solution, then HiGHS's own proof of
optimality is accepted (its dual bound below ``P + 1`` within a relative
1e-9: ``exact`` but not ``certified``; ``floor(U)``, the certified bound, is
kept in ``upper``). Failing both, the answer is the smaller of ``floor(U)``
and HiGHS's dual bound plus a relative margin of 1e-9, an upper bound
flagged ``exact=False``.

Size: straight-line code (a fully unrolled V3 network: hundreds of thousands
of blocks, one per call of a soft-float routine) would give an ILP as large as
the code. A block with exactly one in-edge and one out-edge forces the two
counts to be equal, so ``Solver`` first merges such chains into one variable
(union-find, linear time) and solves the reduced problem; costs are summed per
merged variable and counts are mapped back, so callers see the full problem.
The certificate's shortest distances are computed in reverse depth-first
postorder of the reduced graph, so an acyclic part settles in one sweep (a
sweep per loop nesting level otherwise) instead of one per block.
"""

from __future__ import annotations

import math
import os
import sys
from collections import namedtuple

from wcet.errors import AnalysisError

TYPE_CHECKING = False  # typing.TYPE_CHECKING's value, without importing typing (wcet/__init__.py)
if TYPE_CHECKING:
    from fractions import Fraction


class Problem:
    """An IPET problem over ``n`` edge variables."""

    __slots__ = ("n", "entry", "blocks", "loops", "totals", "name")

    def __init__(self, n: int, entry: int, blocks: list[tuple[list[int], list[int]]] | None = None,
                 loops: list[tuple[list[int], list[int], int]] | None = None,
                 totals: list[tuple[list[int], int]] | None = None, name: str = ""):
        self.n = n
        self.entry = entry  # the variable fixed to 1
        self.blocks = [] if blocks is None else blocks  # (in-edges, out-edges)
        self.loops = [] if loops is None else loops  # (back, entries, max)
        self.totals = [] if totals is None else totals  # (back edges, total)
        self.name = name

    def __repr__(self) -> str:
        return (f"Problem(n={self.n}, entry={self.entry}, blocks={self.blocks}, loops={self.loops}, "
                f"totals={self.totals}, name={self.name!r})")

    @property
    def rows(self) -> int:
        return len(self.blocks) + len(self.loops) + len(self.totals)


class Solution(namedtuple("Solution", [
    "value",  # int: the maximum (exact), or an upper bound of it when ``exact`` is False
    "counts",  # tuple[int, ...]: the edge counts of a worst-case path
    "exact",  # bool
    "certified",  # bool = False: ``value`` is proved optimal in exact arithmetic (not only by HiGHS's tolerances)
    "upper",  # int | None = None: the exact certified upper bound (floor), when one was formed
], defaults=(False, None))):
    __slots__ = ()


def reduce(problem: Problem) -> tuple[Problem, list[int]]:
    """``problem`` with every chain of edges through one-in, one-out blocks merged into one variable, and
    the reduced variable of each original one."""
    parent = list(range(problem.n))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    kept = []
    for into, out in problem.blocks:
        if len(into) == 1 and len(out) == 1 and find(into[0]) != find(out[0]):
            parent[find(out[0])] = find(into[0])
        else:
            kept.append((into, out))
    roots = sorted({find(v) for v in range(problem.n)})
    number = {root: n for n, root in enumerate(roots)}
    mapping = [number[find(v)] for v in range(problem.n)]

    def mapped(variables: list[int]) -> list[int]:
        return [mapping[v] for v in variables]

    reduced = Problem(n=len(roots), entry=mapping[problem.entry], name=problem.name,
                      blocks=[(mapped(into), mapped(out)) for into, out in kept],
                      loops=[(mapped(back), mapped(entries), bound) for back, entries, bound in problem.loops],
                      totals=[(mapped(back), total) for back, total in problem.totals])
    return reduced, mapping


def _quiet_highs():
    """A HiGHS instance that writes nothing to standard output.

    highspy 1.16 prints its licence banner while ``Highs()`` is constructed,
    before any option can be set, and the banner would corrupt ``--json``
    output. The C-level stdout is pointed at /dev/null for the construction
    only (the analysis is single-threaded, so nothing else is lost).
    """
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            highs = highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    highs.setOptionValue("output_flag", False)
    return highs


class Solver:
    """``problem`` (reduced, see ``reduce``) ready for several objectives: ``maximise(costs)`` for each.

    ``method``: ``"auto"`` solves structurally (``_Structure``, exact integer
    arithmetic, no HiGHS) when the problem is the IPET of a reducible CFG with
    one bound per natural loop and no totals, and by the ILP otherwise;
    ``"ilp"`` always uses HiGHS (tests compare the two). HiGHS (and NumPy) are
    imported only when an ILP is solved.
    """

    def __init__(self, problem: Problem, time_limit: float = 300.0, method: str = "auto"):
        if method not in ("auto", "ilp"):
            raise ValueError(f"method {method!r}: expected 'auto' or 'ilp'")
        self.full = problem
        problem, self.mapping = reduce(problem)
        self.problem = problem
        self.time_limit = time_limit
        self.structure = _Structure.of(problem) if method == "auto" else None
        self.highs = None  # the HiGHS model, built on the first ILP solve

    @property
    def structural(self) -> bool:
        """Whether objectives are solved structurally (exactly, without an ILP)."""
        return self.structure is not None

    def _highs_model(self):
        """The HiGHS model of the reduced problem (built once)."""
        if self.highs is None:
            self.highs = _quiet_highs()
            self.highs.setOptionValue("mip_rel_gap", 0.0)
            self.highs.setOptionValue("mip_abs_gap", 0.5)
            self.highs.setOptionValue("threads", 1)
            self.highs.setOptionValue("random_seed", 0)
            self.highs.setOptionValue("time_limit", float(self.time_limit))
            self.rows = _rows(self.problem)
            self.ends = _ends(self.problem)
            self.order = _sweep_order(self.problem, self.ends)
            self.highs.passModel(_model(self.problem, self.rows))
        return self.highs

    def maximise(self, costs: list[int]) -> Solution:
        """The maximum of ``costs`` (one per variable of the full problem) over the problem's paths."""
        if len(costs) != self.full.n:
            raise ValueError("one cost per edge variable")
        reduced = [0] * self.problem.n
        for v, cost in enumerate(costs):
            reduced[self.mapping[v]] += cost
        solution = self.structure.maximise(reduced) if self.structure is not None else self._maximise(reduced)
        if not solution.counts:
            return solution
        counts = tuple(solution.counts[self.mapping[v]] for v in range(self.full.n))
        return Solution(solution.value, counts, solution.exact, solution.certified, solution.upper)

    def _maximise(self, costs: list[int]) -> Solution:
        import highspy
        import numpy as np

        problem = self.problem
        self._highs_model()
        columns = np.arange(problem.n, dtype=np.int32)
        self.highs.changeColsCost(problem.n, columns, np.asarray(costs, dtype=np.float64))
        # 1. the LP relaxation: a certified upper bound, and often an integral optimum
        self.highs.changeColsIntegrality(problem.n, columns, np.full(problem.n, highspy.HighsVarType.kContinuous))
        self._run()
        solution = self.highs.getSolution()
        upper = self._certificate(costs, list(solution.row_dual)) if solution.dual_valid else None
        ceiling = math.floor(upper) if upper is not None else None
        best = self._path(costs, solution.col_value)
        if best is not None and ceiling is not None and ceiling <= best[0]:
            return Solution(best[0], best[1], True, True, ceiling)
        # 2. the ILP by branch and bound
        self.highs.changeColsIntegrality(problem.n, columns, np.full(problem.n, highspy.HighsVarType.kInteger))
        status = self._run()
        found = self._path(costs, self.highs.getSolution().col_value)
        if found is not None and (best is None or found[0] > best[0]):
            best = found
        if best is not None and ceiling is not None and ceiling <= best[0]:
            return Solution(best[0], best[1], True, True, ceiling)
        info = self.highs.getInfo()
        dual = info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else info.objective_function_value
        if best is not None and status == highspy.HighsModelStatus.kOptimal \
                and dual < best[0] + 1 + 1e-9 * abs(dual):
            return Solution(best[0], best[1], True, False, ceiling)  # HiGHS's word: optimal within its tolerances
        bounds = [ceiling] if ceiling is not None else []
        if math.isfinite(dual):
            bounds.append(math.floor(dual * (1 + 1e-9) + 1e-6))
        if not bounds:
            raise AnalysisError(f"{problem.name}: HiGHS found no bound ({self.highs.modelStatusToString(status)})")
        return Solution(min(bounds), best[1] if best else (), False, ceiling is not None and min(bounds) == ceiling,
                        ceiling)

    def _run(self) -> "highspy.HighsModelStatus":
        import highspy

        self.highs.run()
        status = self.highs.getModelStatus()
        name = self.highs.modelStatusToString(status)
        if status in (highspy.HighsModelStatus.kUnbounded, highspy.HighsModelStatus.kUnboundedOrInfeasible):
            raise AnalysisError(f"{self.problem.name}: the ILP is unbounded (a cycle without a loop bound)")
        if status == highspy.HighsModelStatus.kInfeasible:
            raise AnalysisError(f"{self.problem.name}: the ILP is infeasible (no path from the entry to a return "
                                f"within the loop bounds)")
        if status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
            raise AnalysisError(f"{self.problem.name}: HiGHS stopped with status '{name}'")
        return status

    def _path(self, costs: list[int], values) -> tuple[int, tuple[int, ...]] | None:
        """(exact objective, counts) of HiGHS's solution rounded to integers, if that satisfies every
        constraint exactly."""
        counts = tuple(round(v) for v in values)
        if len(counts) != self.problem.n or not _feasible(self.problem, counts):
            return None
        return sum(c * x for c, x in zip(costs, counts)), counts

    def _certificate(self, costs: list[int], duals: list[float]) -> Fraction | None:
        """The smallest weak-duality upper bound of the row multipliers ``duals`` read as exact fractions
        (integers first, then denominators up to 2**10 and 2**20: HiGHS's duals carry rounding noise),
        or None if no reading forms a valid certificate."""
        if len(duals) != len(self.rows):
            return None
        bounds = [b for b in (self._bound(costs, duals, limit) for limit in (1, 1 << 10, 1 << 20)) if b is not None]
        return min(bounds) if bounds else None

    def _bound(self, costs: list[int], duals: list[float], limit: int) -> Fraction | None:
        """The dual bound with the loop rows' multipliers read from ``duals`` (nearest fractions with
        denominators up to ``limit``, negatives raised to 0) and the blocks' multipliers (potentials)
        computed exactly: for fixed loop multipliers the best potentials are shortest distances to the
        exit with edge weights ``loop terms - cost``; a negative cycle means no certificate."""
        from fractions import Fraction  # here: only an irreducible CFG's problem goes to HiGHS

        problem = self.problem
        first = len(problem.blocks)
        adjust = [Fraction(0)] * problem.n  # the loop and total rows' part of (A'y)_j
        extra = Fraction(0)
        for row, (back, entries, bound) in enumerate(problem.loops):
            multiplier = max(Fraction(0), Fraction(duals[first + row]).limit_denominator(limit))
            if multiplier:
                for v in back:
                    adjust[v] += multiplier
                for v in entries:
                    adjust[v] -= bound * multiplier
        for row, (back, total) in enumerate(problem.totals):
            multiplier = max(Fraction(0), Fraction(duals[first + len(problem.loops) + row]).limit_denominator(limit))
            if multiplier:
                for v in back:
                    adjust[v] += multiplier
                extra += multiplier * total
        source, target = self.ends
        weight = [adjust[j] - costs[j] for j in range(problem.n)]
        distance: list[Fraction | None] = [None] * len(problem.blocks)  # None: no path to the exit yet
        for _ in range(len(problem.blocks) + 1):
            changed = False
            for j in self.order:
                u = source[j]
                if u is None:
                    continue
                v = target[j]
                if v is None:
                    candidate = weight[j]
                elif distance[v] is None:
                    continue
                else:
                    candidate = weight[j] + distance[v]
                if distance[u] is None or candidate < distance[u]:
                    distance[u] = candidate
                    changed = True
            if not changed:
                break
        else:
            return None  # a negative cycle: these loop multipliers certify nothing
        entry_block = target[problem.entry]
        if entry_block is None or distance[entry_block] is None:
            return None
        return costs[problem.entry] - adjust[problem.entry] - distance[entry_block] + extra


class _Structure:
    """The exact optimum of an IPET problem of a reducible CFG, by dynamic programming (no ILP).

    Applies when (checked by ``of``, else None): only the entry variable
    comes from no block, every variable leaves one block and enters at most
    one; each loop row's back and entry variables together are exactly the
    in-edges of one block, its *header* (one row per header); the header's
    *body* (it, and every block reaching a back edge's source without passing
    through it) is entered only through the header, by its entry edges; the
    graph without the back edges is acyclic; and the headers nest (no header
    in another's body while that one is in its body). No ``totals``.

    Why the optimum is exact: a feasible integer flow decomposes into one
    path from the entry to an exit and simple cycles. The path takes no back
    edge (it would pass the header twice) and neither takes any cycle more
    than one (a cycle through back edges of headers h and g lies in both
    bodies, so each header is in the other's body: refused above); a cycle
    of loop L stays in L's body, and any entry edge on it is that of a loop
    nested in L. Loop L's rows allow ``bound * entries(L)`` cycles, so the
    flow is worth at most the best path of the acyclic graph in which every
    traversal of an entry edge of a loop L also earns ``bound(L) * max(0,
    C(L))``, C(L) being the best cycle of L earned the same way, inner loops
    first. The construction that takes that path and, at each entry of L,
    ``bound(L)`` best cycles of L (if C(L) > 0) is a feasible flow worth
    exactly that: the two are equal, in integers. ``tests/wcet/test_ipet.py``
    checks it against HiGHS on random structured programs and real routines.
    """

    def __init__(self, problem: Problem, source: list[int | None], target: list[int | None], topo: list[int],
                 loops: list[tuple[int, int, frozenset[int], frozenset[int], frozenset[int]]]):
        self.problem, self.source, self.target, self.topo = problem, source, target, topo
        self.loops = loops  # (header, bound, back, entries, body), inner loops first
        self.leaving: list[list[int]] = [[] for _ in problem.blocks]
        for v, block in enumerate(source):
            if block is not None:
                self.leaving[block].append(v)
        self.back = frozenset(v for _, _, back, _, _ in loops for v in back)
        self.entered = {v: n for n, (_, _, _, entries, _) in enumerate(loops) for v in entries}

    @classmethod
    def of(cls, problem: Problem) -> "_Structure | None":
        """The structure of ``problem``, or None if the conditions of the class docstring do not hold."""
        if problem.totals:
            return None
        n_blocks = len(problem.blocks)
        source: list[int | None] = [None] * problem.n
        target: list[int | None] = [None] * problem.n
        for block, (into, out) in enumerate(problem.blocks):
            for v in out:
                if source[v] is not None:
                    return None
                source[v] = block
            for v in into:
                if target[v] is not None:
                    return None
                target[v] = block
        if any(source[v] is None for v in range(problem.n) if v != problem.entry) \
                or source[problem.entry] is not None:
            return None
        predecessors: list[list[int]] = [[] for _ in range(n_blocks)]
        for v in range(problem.n):
            if target[v] is not None and source[v] is not None:
                predecessors[target[v]].append(source[v])
        rows: dict[int, tuple[int, frozenset[int], frozenset[int], frozenset[int]]] = {}
        for back, entries, bound in problem.loops:
            back_set, entry_set = frozenset(back), frozenset(entries)
            headers = {target[v] for v in back_set | entry_set}
            if not back_set or len(headers) != 1 or None in headers or back_set & entry_set or bound < 0:
                return None
            (header,) = headers
            if header in rows or back_set | entry_set != frozenset(problem.blocks[header][0]):
                return None
            body, todo = {header}, [source[v] for v in back_set]
            while todo:
                block = todo.pop()
                if block not in body:
                    body.add(block)
                    todo.extend(predecessors[block])
            for v in back_set:
                if source[v] not in body:
                    return None
            for v in entry_set:
                if source[v] in body:
                    return None
            for block in body - {header}:
                if any(source[v] is None or source[v] not in body for v in problem.blocks[block][0]):
                    return None
            rows[header] = (bound, back_set, entry_set, frozenset(body))
        back_all = {v for _, back, _, _ in rows.values() for v in back}
        topo = _topological(n_blocks, [(source[v], target[v]) for v in range(problem.n)
                                       if v not in back_all and source[v] is not None and target[v] is not None])
        if topo is None:
            return None
        inside = {h: [g for g in rows if g != h and g in rows[h][3]] for h in rows}  # headers nested in h
        order = _topological(0, [(g, h) for h, nested in inside.items() for g in nested], nodes=list(rows))
        if order is None:
            return None
        loops = [(h, rows[h][0], rows[h][1], rows[h][2], rows[h][3]) for h in order]  # inner loops first
        return cls(problem, source, target, topo, loops)

    def maximise(self, costs: list[int]) -> Solution:
        """The exact optimum of ``costs`` (one per reduced variable), with the counts of an optimal flow."""
        problem, target = self.problem, self.target
        earn = [0] * len(self.loops)  # bound * max(0, best cycle), per loop
        cycles: list[list[int]] = []  # the best cycle of each loop, as variables from its header
        for n, (header, bound, back, _, body) in enumerate(self.loops):
            best: dict[int, tuple[int, int]] = {}  # block -> (value to close the cycle, variable taken)
            for block in reversed(self.topo):
                if block not in body:
                    continue
                choice = None
                for v in self.leaving[block]:
                    if v in back:
                        value = costs[v]
                    elif v in self.back or target[v] is None or target[v] not in body or target[v] not in best:
                        continue
                    else:
                        value = costs[v] + self._earned(v, earn) + best[target[v]][0]
                    if choice is None or value > choice[0]:
                        choice = (value, v)
                if choice is not None:
                    best[block] = choice
            cycle = self._walk(header, best, back)
            cycles.append(cycle)
            earn[n] = bound * max(0, best[header][0])
        top: dict[int, tuple[int, int]] = {}
        for block in reversed(self.topo):
            choice = None
            for v in self.leaving[block]:
                if v in self.back:
                    continue
                if target[v] is None:
                    value = costs[v]
                elif target[v] in top:
                    value = costs[v] + self._earned(v, earn) + top[target[v]][0]
                else:
                    continue
                if choice is None or value > choice[0]:
                    choice = (value, v)
            if choice is not None:
                top[block] = choice
        entry = problem.entry
        first = target[entry]
        if first is not None and first not in top:
            raise AnalysisError(f"{problem.name}: the ILP is infeasible (no path from the entry to a return "
                                f"within the loop bounds)")
        value = costs[entry] + self._earned(entry, earn) + (top[first][0] if first is not None else 0)
        path = [entry] + (self._walk(first, top, frozenset()) if first is not None else [])
        counts = [0] * problem.n
        taken = [0] * len(self.loops)  # entries of each loop on the chosen flow

        def add(variables: list[int], times: int) -> None:
            for v in variables:
                counts[v] += times
                if v in self.entered:
                    taken[self.entered[v]] += times

        add(path, 1)
        for n in reversed(range(len(self.loops))):  # outer loops first: their cycles enter the inner ones
            if earn[n] > 0:
                add(cycles[n], self.loops[n][1] * taken[n])
        return Solution(value, tuple(counts), True, True, value)

    def _earned(self, v: int, earn: list[int]) -> int:
        """What taking ``v`` earns besides its cost: the best cycles of the loop it enters, if any."""
        n = self.entered.get(v)
        return earn[n] if n is not None else 0

    def _walk(self, block: int, choices: dict[int, tuple[int, int]], stop: frozenset[int]) -> list[int]:
        """The variables chosen from ``block`` on, up to a variable in ``stop`` or an exit."""
        variables = []
        while True:
            v = choices[block][1]
            variables.append(v)
            if v in stop or self.target[v] is None:
                return variables
            block = self.target[v]


def _topological(count: int, edges: list[tuple[int, int]], nodes: list[int] | None = None) -> list[int] | None:
    """The nodes (``range(count)``, or ``nodes``) in an order where every edge goes forwards; None if the
    edges form a cycle."""
    nodes = list(range(count)) if nodes is None else nodes
    successors: dict[int, list[int]] = {node: [] for node in nodes}
    indegree = dict.fromkeys(nodes, 0)
    for a, b in edges:
        successors[a].append(b)
        indegree[b] += 1
    ready = [node for node in nodes if indegree[node] == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for following in successors[node]:
            indegree[following] -= 1
            if indegree[following] == 0:
                ready.append(following)
    return order if len(order) == len(nodes) else None


def maximise(problem: Problem, costs: list[int]) -> Solution:
    return Solver(problem).maximise(costs)


def _ends(problem: Problem) -> tuple[list[int | None], list[int | None]]:
    """(source block, target block) index of every edge variable; None for the entry's source and an exit's
    target."""
    source: list[int | None] = [None] * problem.n
    target: list[int | None] = [None] * problem.n
    for block, (into, out) in enumerate(problem.blocks):
        for v in into:
            target[v] = block
        for v in out:
            source[v] = block
    return source, target


def _sweep_order(problem: Problem, ends: tuple[list[int | None], list[int | None]]) -> list[int]:
    """Every variable, those leaving a block ordered by a depth-first postorder of their source blocks from
    the entry (successors before predecessors, so distances to the exit propagate in one sweep where the
    graph has no cycle)."""
    source, target = ends
    leaving: list[list[int]] = [[] for _ in problem.blocks]
    for j in range(problem.n):
        if source[j] is not None:
            leaving[source[j]].append(j)
    order: list[int] = []
    seen = [False] * len(problem.blocks)
    start = target[problem.entry]
    stack = [(start, 0)] if start is not None else []
    if start is not None:
        seen[start] = True
    while stack:
        block, index = stack[-1]
        if index < len(leaving[block]):
            stack[-1] = (block, index + 1)
            following = target[leaving[block][index]]
            if following is not None and not seen[following]:
                seen[following] = True
                stack.append((following, 0))
        else:
            stack.pop()
            order.extend(leaving[block])
    order += [j for block in range(len(problem.blocks)) if not seen[block] for j in leaving[block]]
    return order


def _rows(problem: Problem) -> list[tuple[dict[int, int], float, float]]:
    """Every constraint as ({variable: coefficient}, lower, upper)."""
    rows = []
    for into, out in problem.blocks:
        row: dict[int, int] = {}
        for v in into:
            row[v] = row.get(v, 0) + 1
        for v in out:
            row[v] = row.get(v, 0) - 1
        rows.append(({v: c for v, c in row.items() if c}, 0.0, 0.0))
    for back, entries, bound in problem.loops:
        row = {}
        for v in back:
            row[v] = row.get(v, 0) + 1
        for v in entries:
            row[v] = row.get(v, 0) - bound
        rows.append(({v: c for v, c in row.items() if c}, -math.inf, 0.0))
    for back, total in problem.totals:
        row = {}
        for v in back:
            row[v] = row.get(v, 0) + 1
        rows.append((row, -math.inf, float(total)))
    return rows


def _model(problem: Problem, rows) -> "highspy.HighsLp":
    import highspy
    import numpy as np

    columns: list[list[tuple[int, int]]] = [[] for _ in range(problem.n)]
    for r, (row, _, _) in enumerate(rows):
        for v, c in row.items():
            columns[v].append((r, c))
    lp = highspy.HighsLp()
    lp.num_col_ = problem.n
    lp.num_row_ = len(rows)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.col_cost_ = np.zeros(problem.n)
    lower = np.zeros(problem.n)
    upper = np.full(problem.n, highspy.kHighsInf)
    lower[problem.entry] = upper[problem.entry] = 1.0
    lp.col_lower_, lp.col_upper_ = lower, upper
    lp.row_lower_ = np.array([low for _, low, _ in rows], dtype=np.float64)
    lp.row_upper_ = np.array([high for _, _, high in rows], dtype=np.float64)
    starts, index, value = [0], [], []
    for column in columns:
        for r, c in column:
            index.append(r)
            value.append(float(c))
        starts.append(len(index))
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * problem.n
    return lp


def _feasible(problem: Problem, counts: tuple[int, ...]) -> bool:
    """Whether integer ``counts`` satisfy every constraint exactly."""
    if counts[problem.entry] != 1 or any(x < 0 for x in counts):
        return False
    for into, out in problem.blocks:
        if sum(counts[v] for v in into) != sum(counts[v] for v in out):
            return False
    for back, entries, bound in problem.loops:
        if sum(counts[v] for v in back) > bound * sum(counts[v] for v in entries):
            return False
    for back, total in problem.totals:
        if sum(counts[v] for v in back) > total:
            return False
    return True
