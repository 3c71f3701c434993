"""The built-in static WCET analyzer: an ELF, a function, flow facts and a timing model -> cycles.

    from wcet.analyzer import analyze
    result = analyze(Path("assay.elf"), "lenet5_inference", facts, "arm7tdmi",
                     regions={"conv1": [(0x8300, 0x8420)], ...})
    result.wcet_cycles, result.regions["conv1"]

Method (docs/wcet.md):

1. The routines reachable from the function by calls and tail calls are
   found, each with its CFG (``wcet.cfg``) and loops (``wcet.loops``). Every
   loop needs a bound from the flow facts (``LoopBound`` by function + header
   offset, or absolute header address; in every context, or in one call
   context); all unbounded loops are reported at once
   (``UnboundedLoopsError``), as are all unresolved indirect branches.
   Recursion is refused.
2. Each routine is priced with the timing model (``wcet.timing``), the same
   ``model.cycles(insn, executed)`` the measured cycles use: a block's
   ordinary instructions at their worst (``executed=None`` when conditional),
   its last instruction, when it is a branch, call or return, per out-edge
   (taken or not taken).
3. Routines are solved bottom-up, callees first: each one's WCET is an IPET
   ILP (``wcet.ipet``) whose call edges carry the callee's WCET. A callee is
   solved once for all its call sites (context-insensitive) unless the facts
   give a bound in a call context under it, in which case it is solved once
   per such context.
4. Indirect calls with a per-execution target sequence (``FlowFacts.sequences``,
   from the generator's manifest): besides the context-insensitive WCET, in
   which every execution of the call is charged its dearest target (all OTAWA
   can do with ``multicall``), a *precise* WCET of the analysed function:
   its ILP again, with those call edges charged no callee and capped at the
   sequence's length (``x_site <= len(sequence)``), plus the sum of the WCETs
   of the sequence's targets, one per execution (the loop around the call,
   virtually unrolled). Sound: an execution makes at most that many calls,
   the k-th to the k-th target. The smaller of the two figures is the precise
   one. Only call sites in the analysed function's own code count (a site in
   a callee runs once per call of that callee; its sequence is ignored, noted).
5. Regions: for each named set of address ranges, the same ILPs maximise the
   cycles of the instructions in the region plus, for every callee, its own
   share of the region and, when called from inside the region, the share of
   its code that is in no region (C library, libgcc). This is how the
   measurement attributes cycles (``assay_count.c``: an instruction in no
   region counts in the region of the last instruction executed that had
   one), so a layer's bound and its measured cycles count the same
   instructions, also when layers are functions of their own (V3) called
   from code outside every layer. The code in no region is priced as a
   region of its own for this (``UNOWNED``).
"""

from __future__ import annotations

import bisect
import time
from collections import namedtuple
from pathlib import Path

from wcet import ipet
from wcet import timing as timing_models
from wcet.armcode import Insn
from wcet.cfg import ENTRY, EXIT, Cfg
from wcet.errors import AnalysisError, UnboundedLoopsError
from wcet.facts import FlowFacts, LoopBound
from wcet.loops import Loop, loop_edges
from wcet.program import Program, load_program

Context = tuple[int, ...] | None  # call sites from the root; None: any context (a shared summary)
Key = tuple[int, Context]


class LoopReport(namedtuple("LoopReport", [
    "function",
    "header",
    "offset",
    "bound",
    "total",  # int | None
    "source_line",  # tuple[str, int] | None
    "context",  # tuple[int, ...] | None: the call context the bound was used in (None: every context)
    "routine",
])):
    """A loop of the analysed code and the bound the analysis used for it."""

    __slots__ = ()

    def as_dict(self) -> dict:
        return {"function": self.function, "header": f"{self.header:#x}", "offset": f"{self.offset:#x}",
                "bound": self.bound, "total": self.total,
                "source": f"{self.source_line[0]}:{self.source_line[1]}" if self.source_line else None,
                "context": None if self.context is None else [f"{a:#x}" for a in self.context],
                "routine": self.routine}


class WcetResult:
    """What ``analyze`` found. ``wcet_cycles`` bounds one call of ``function``; ``regions[name]`` bounds the
    cycles spent in that region's addresses (and in the callees called from them) during one call."""

    __slots__ = ("function", "wcet_cycles", "regions", "loops", "functions", "ilp", "seconds", "timing", "exact",
                 "certified", "notes", "counts", "wcet_cycles_precise", "executions")

    def __init__(self, function: str, wcet_cycles: int, regions: dict[str, int], loops: list[LoopReport],
                 functions: list[str], ilp: dict, seconds: float, timing: str, exact: bool = True,
                 certified: bool = True, notes: list[str] | None = None, counts: dict[int, int] | None = None,
                 wcet_cycles_precise: int | None = None, executions: list[dict] | None = None):
        self.function = function
        self.wcet_cycles = wcet_cycles
        self.regions = regions
        self.loops = loops
        self.functions = functions  # the routines analysed, by name
        self.ilp = ilp  # {"problems", "solves", "variables", "constraints"}: sizes summed over the routines' ILPs
        self.seconds = seconds
        self.timing = timing  # the model and its parameters
        self.exact = exact  # False: some ILP stopped short of proving its optimum; the figures are upper bounds
        self.certified = certified  # every optimum proved in exact arithmetic (else some only by HiGHS's tolerances)
        self.notes = [] if notes is None else notes
        self.counts = {} if counts is None else counts  # worst-case execution count of each root block
        # the bound using the per-execution targets of indirect calls (None: no such facts apply)
        self.wcet_cycles_precise = wcet_cycles_precise
        # per execution of a sequenced indirect call of the function (V1: per layer, in order): {"site", "index",
        # "target", "call_cycles" (from the site to the call instruction, taken), "wcet_cycles" (the target's
        # WCET in that execution), "insensitive_cycles" (what the context-insensitive bound charges it)}
        self.executions = [] if executions is None else executions

    def __repr__(self) -> str:
        return f"WcetResult({', '.join(f'{name}={getattr(self, name)!r}' for name in self.__slots__)})"

    def as_dict(self) -> dict:
        return {"function": self.function, "wcet_cycles": self.wcet_cycles,
                "wcet_cycles_precise": self.wcet_cycles_precise, "executions": self.executions,
                "regions": self.regions,
                "loops": [loop.as_dict() for loop in self.loops], "functions": self.functions, "ilp": self.ilp,
                "seconds": round(self.seconds, 3), "timing": self.timing, "exact": self.exact,
                "certified": self.certified, "notes": self.notes}


def analyze(elf: Path | str | Program, function: str, facts: FlowFacts | None = None,
            timing: timing_models.TimingModel | str = "trivial",
            regions: dict[str, list[tuple[int, int]]] | None = None, time_limit: float = 300.0) -> WcetResult:
    """The WCET of one call of ``function`` in ``elf`` (a path or a loaded ``Program``) under ``timing`` (a
    ``wcet.timing`` model or its name), with ``facts`` (loop bounds, indirect call targets, ...) and, per
    named address region (ranges ``[start, end)``), the WCET of the time spent in it. ``time_limit``:
    seconds per ILP. Raises ``AnalysisError`` (one line, with the address)."""
    started = time.perf_counter()
    program = elf if isinstance(elf, Program) else load_program(elf)
    model = timing_models.get(timing) if isinstance(timing, str) else timing
    analysis = _Analysis(program, function, facts or FlowFacts())
    analysis.explore()
    analysis.check()
    result = analysis.solve(model, regions or {}, time_limit)
    result.seconds = time.perf_counter() - started
    return result


def find_unbounded_loops(program: Program, function: str, facts: FlowFacts | None = None) -> list[Loop]:
    """Every loop reachable from ``function`` (its code and its callees', by calls and tail calls) that the
    facts give no bound for, in a call context or in all; each loop once. Unresolved indirect calls are
    skipped (their callees are unknown)."""
    analysis = _Analysis(program, function, facts or FlowFacts())
    analysis.explore()
    return [loop for loop, _ in analysis.unbounded()]


def reachable_loops(program: Program, function: str, facts: FlowFacts | None = None) -> list[Loop]:
    """Every loop of the code reachable from ``function`` (each loop once, outermost first per routine)."""
    analysis = _Analysis(program, function, facts or FlowFacts())
    analysis.explore()
    seen, result = set(), []
    for node in analysis.nodes.values():
        for loop in node.loops:
            if loop.header not in seen:
                seen.add(loop.header)
                result.append(loop)
    return result


class _Node:
    __slots__ = ("key", "cfg", "loops", "children", "bounds")

    def __init__(self, key: Key, cfg: Cfg, loops: list[Loop]):
        self.key, self.cfg, self.loops = key, cfg, loops
        self.children: dict[tuple[int, int], Key] = {}  # (edge index, callee) -> node
        self.bounds: dict[int, tuple[int, int | None]] = {}  # header -> (max, total)


class _Analysis:
    def __init__(self, program: Program, function: str, facts: FlowFacts):
        self.program, self.facts = program, facts
        self.root = program.address(function)
        self.function = function
        self.nodes: dict[Key, _Node] = {}
        self.order: list[Key] = []  # callees before callers
        self.notes: list[str] = []
        self.uncertified: list[str] = []
        self.executions: list[dict] = []
        self.by_header: dict[int, list[LoopBound]] = {}
        for bound in facts.loops:
            if bound.function is None:
                header = bound.offset
            elif bound.function in program.functions:
                header = program.functions[bound.function].start + bound.offset
            else:
                continue  # a bound for a function this ELF does not have (a library annotation for another build)
            self.by_header.setdefault(header, []).append(bound)
        self.prefixes = {bound.context[:n] for bound in facts.loops if bound.context
                         for n in range(len(bound.context) + 1)}

    # -- the routines, with their call contexts

    def explore(self) -> None:
        root: Key = (self.root, () if () in self.prefixes else None)
        stack: list[tuple[Key, list]] = []
        on_stack: dict[int, int] = {}  # routine entry -> call site that entered it (for the cycle message)
        self._enter(root, stack, on_stack, None)
        while stack:
            key, pending = stack[-1]
            if not pending:
                stack.pop()
                del on_stack[key[0]]
                self.order.append(key)
                continue
            index, callee, site = pending.pop()
            node = self.nodes[key]
            context = key[1]
            child_context = context + (site,) if context is not None and context + (site,) in self.prefixes \
                else None
            child: Key = (callee, child_context)
            node.children[(index, callee)] = child
            if callee in on_stack:
                chain = [self.program.name(k[0]) for k, _ in stack] + [self.program.name(callee)]
                start = chain.index(self.program.name(callee))
                raise AnalysisError(f"recursion: {' -> '.join(chain[start:])} (the call at {site:#x} closes the "
                                    f"cycle); the analysis needs a call graph without cycles", site)
            if child not in self.nodes:
                self._enter(child, stack, on_stack, site)

    def _enter(self, key: Key, stack: list, on_stack: dict, site: int | None) -> None:
        cfg = self.program.cfg(key[0], self.facts)
        node = _Node(key, cfg, self.program.loops(key[0], self.facts))
        self.nodes[key] = node
        pending = [(index, callee, edge.site) for index, edge in enumerate(cfg.edges) for callee in edge.callees]
        stack.append((key, pending[::-1]))
        on_stack[key[0]] = site
        for loop in node.loops:
            bound = self._bound(loop.header, key[1])
            if bound is not None:
                node.bounds[loop.header] = bound

    def _bound(self, header: int, context: Context) -> tuple[int, int | None] | None:
        """(max, total) of the facts that apply to the loop at ``header`` in ``context``; the tightest wins."""
        candidates = [b for b in self.by_header.get(header, ())
                      if not b.context or (context is not None and b.context == context)]
        if not candidates:
            return None
        totals = [b.total for b in candidates if b.total is not None]
        return min(b.max for b in candidates), (min(totals) if totals else None)

    def unbounded(self) -> list[tuple[Loop, Context]]:
        result, seen = [], set()
        for key in self.order or list(self.nodes):
            node = self.nodes[key]
            for loop in node.loops:
                if loop.header not in node.bounds and loop.header not in seen:
                    seen.add(loop.header)
                    result.append((loop, key[1]))
        return result

    def check(self) -> None:
        unresolved = []
        for key in self.order:
            cfg = self.nodes[key].cfg
            for address, what in cfg.unresolved:
                item = f"{what} at {address:#x} in {cfg.name}"
                if item not in unresolved:
                    unresolved.append(item)
        if unresolved:
            calls = any(item.startswith("indirect call") for item in unresolved)
            jumps = any(not item.startswith("indirect call") for item in unresolved)
            fact = "a multicall flow fact" if not jumps else "a multibranch flow fact" if not calls else \
                "multicall (calls) and multibranch (jumps) flow facts"
            raise AnalysisError(f"unresolved indirect branch{'es' if len(unresolved) > 1 else ''}: "
                                f"{'; '.join(unresolved)} (give the targets with {fact})")
        missing = self.unbounded()
        if missing:
            described = []
            for loop, context in missing:
                text = f"{loop.function} + {loop.offset:#x} (header {loop.header:#x}"
                text += f", {loop.source_line[0]}:{loop.source_line[1]})" if loop.source_line else ")"
                if context:
                    text += f" in context {' / '.join(f'{a:#x}' for a in context)}"
                described.append(text)
            raise UnboundedLoopsError(f"{len(missing)} loop{'s' if len(missing) > 1 else ''} without a bound "
                                      f"reachable from {self.function}: {'; '.join(described)}",
                                      [loop for loop, _ in missing])

    # -- pricing and solving

    def solve(self, model: timing_models.TimingModel, regions: dict[str, list[tuple[int, int]]],
              time_limit: float) -> WcetResult:
        lookup = {name: _Ranges(ranges) for name, ranges in regions.items()}
        holding = _Holding(lookup)
        names = [*regions, UNOWNED] if regions else []
        wcet: dict[Key, int] = {}
        shares: dict[Key, dict[str, int]] = {}
        sizes = {"problems": 0, "solves": 0, "variables": 0, "constraints": 0}
        prices: dict[int, tuple] = {}
        exact = True
        root_counts: dict[int, int] = {}
        for key in self.order:
            node = self.nodes[key]
            cfg = node.cfg
            if cfg.entry not in prices:
                prices[cfg.entry] = _price_cfg(cfg, model, lookup)
            base, base_regions, term, term_regions = prices[cfg.entry]
            total_costs = []
            region_costs = {name: [0] * len(cfg.edges) for name in names}  # filled where not 0
            outside: dict[tuple[Key, ...], dict[str, int]] = {}  # callees' largest non-zero shares
            for index, edge in enumerate(cfg.edges):
                cost = 0
                if edge.target != EXIT:
                    cost += base[edge.target]
                    for name, share in base_regions[edge.target].items():
                        region_costs[name][index] += share
                if edge.site is not None and edge.source != ENTRY:
                    executed = True if edge.executed is None else edge.executed
                    cycles = term[(edge.source, executed)]
                    cost += cycles
                    for name in term_regions[(edge.source, executed)]:
                        region_costs[name][index] += cycles
                if edge.callees:
                    children = tuple(node.children[(index, callee)] for callee in edge.callees)
                    called = max(wcet[child] for child in children)
                    cost += called
                    if children not in outside:
                        outside[children] = {name: share for name in names
                                             if (share := max(shares[child][name] for child in children))}
                    for name, share in outside[children].items():  # the callee's own share of each region
                        if name != UNOWNED:
                            region_costs[name][index] += share
                    unowned = outside[children].get(UNOWNED, 0)
                    for name in holding.at(edge.site) if unowned else ():  # its code in no region: the site's
                        region_costs[name][index] += unowned
                total_costs.append(cost)
            problem = self._problem(node)
            solver = ipet.Solver(problem, time_limit)
            sizes["problems"] += 1
            sizes["variables"] += solver.problem.n  # after merging straight-line chains (ipet.reduce)
            sizes["constraints"] += solver.problem.rows
            solution = solver.maximise(total_costs)
            sizes["solves"] += 1
            exact = exact and solution.exact
            self._uncertified(cfg.name, "WCET", solution)
            wcet[key] = solution.value
            if key[0] == self.root and key == self.order[-1]:
                root_counts = _block_counts(cfg, solution.counts)
            shares[key] = {}
            for name in names:
                if any(region_costs[name]):
                    region = solver.maximise(region_costs[name])
                    sizes["solves"] += 1
                    exact = exact and region.exact
                    self._uncertified(cfg.name, f"region {name}", region)
                    shares[key][name] = region.value
                else:
                    shares[key][name] = 0
        root = self.order[-1]
        precise = self._precise(model, wcet, prices, time_limit, sizes)
        notes = list(self.notes)
        for key in self.order:
            cfg = self.nodes[key].cfg
            if cfg.shared:
                notes.append(f"{cfg.name}: follows code outside its symbol at "
                             f"{', '.join(f'{a:#x}' for a in sorted(cfg.shared))} (shared code, analysed inline)")
            if cfg.noreturn_calls:
                notes.append(f"{cfg.name}: paths end at the noreturn calls at "
                             f"{', '.join(f'{site:#x}' for site, _ in cfg.noreturn_calls)}")
            if cfg.ignored_calls:
                notes.append(f"{cfg.name}: calls ignored (nocall) at "
                             f"{', '.join(f'{a:#x}' for a in sorted(set(cfg.ignored_calls)))}")
        notes += self.uncertified
        if not exact:
            notes.append("an ILP stopped before proving its optimum: the figures are upper bounds")
        loops = []
        for key in self.order:
            node = self.nodes[key]
            for loop in node.loops:
                bound, total = node.bounds[loop.header]
                loops.append(LoopReport(loop.function, loop.header, loop.offset, bound, total, loop.source_line,
                                        key[1], node.cfg.name))
        functions = list(dict.fromkeys(self.nodes[key].cfg.name for key in reversed(self.order)))
        regions_of_root = {name: share for name, share in shares[root].items() if name != UNOWNED}
        return WcetResult(function=self.function, wcet_cycles=wcet[root], regions=regions_of_root, loops=loops,
                          functions=functions, ilp=sizes, seconds=0.0, timing=model.describe(), exact=exact,
                          certified=not self.uncertified, notes=notes, counts=root_counts,
                          wcet_cycles_precise=precise, executions=self.executions)

    def _precise(self, model: timing_models.TimingModel, wcet: dict[Key, int], prices: dict[int, tuple],
                 time_limit: float, sizes: dict) -> int | None:
        """The root's WCET with each sequenced call site charged its targets' WCETs one execution at a time
        (module docstring, step 4); None if no sequence applies."""
        if not self.facts.sequences:
            return None
        key = self.order[-1]
        node = self.nodes[key]
        cfg = node.cfg
        own = {edge.site for edge in cfg.edges if edge.callees}
        narrowed = {site for overlays in self.facts.executions.values() for overlay in overlays
                    for site in overlay.multicalls}  # used through the executions' facts
        for site in sorted(set(self.facts.sequences) - own - narrowed):
            if any(site in {e.site for e in self.nodes[k].cfg.edges if e.callees} for k in self.order):
                self.notes.append(f"the target sequence of the call at {site:#x} is not used: the call is not in "
                                  f"{self.function}'s own code")
        sites = {site: targets for site, targets in self.facts.sequences.items() if site in own}
        if not sites:
            return None
        base, _, term, _ = prices[cfg.entry]
        costs, fixed = [], 0
        by_site: dict[int, list[int]] = {site: [] for site in sites}
        for index, edge in enumerate(cfg.edges):
            cost = base[edge.target] if edge.target != EXIT else 0
            if edge.site is not None and edge.source != ENTRY:
                cost += term[(edge.source, True if edge.executed is None else edge.executed)]
            if edge.callees and edge.site in sites:
                by_site[edge.site].append(index)
            elif edge.callees:
                cost += max(wcet[node.children[(index, callee)]] for callee in edge.callees)
            costs.append(cost)
        problem = self._problem(node)
        cache: dict[tuple, int] = {}
        for site, sequence in sites.items():
            edges = by_site[site]
            children = {callee: node.children[(index, callee)] for index in edges
                        for callee in cfg.edges[index].callees}
            missing = sorted({t for t in sequence if t not in children})
            if missing:
                raise AnalysisError(f"the target sequence of the call at {site:#x} names "
                                    f"{', '.join(self.program.name(t) for t in missing)}, which the call's "
                                    f"multicall targets do not include", site)
            problem.totals.append((edges, len(sequence)))
            overlays = self.facts.executions.get(site)
            if overlays is not None and len(overlays) != len(sequence):
                raise AnalysisError(f"the call at {site:#x} has {len(sequence)} executions in its sequence but "
                                    f"facts for {len(overlays)}", site)
            dearest = max(wcet[children[target]] for target in children)
            call_cycles = self._call_cycles(cfg, edges[0], site, model)
            for k, target in enumerate(sequence):
                cost = wcet[children[target]] if overlays is None else \
                    self._execution(target, overlays[k], model, time_limit, sizes, cache)
                fixed += cost
                self.executions.append({"site": f"{site:#x}", "index": k, "target": self.program.name(target),
                                        "call_cycles": call_cycles, "wcet_cycles": cost,
                                        "insensitive_cycles": dearest})
        solution = ipet.Solver(problem, time_limit).maximise(costs)
        sizes["solves"] += 1
        self._uncertified(cfg.name, "precise WCET", solution)
        if not solution.exact:
            self.notes.append("the precise bound's ILP stopped before proving its optimum: it is an upper bound")
        return min(wcet[key], solution.value + fixed)

    def _execution(self, target: int, overlay: FlowFacts, model: timing_models.TimingModel, time_limit: float,
                   sizes: dict, cache: dict[tuple, int]) -> int:
        """The WCET of ``target`` with the facts of one execution added (the tighter bound wins)."""
        key = (target, frozenset(overlay.loops), frozenset(overlay.multicalls.items()))
        if key not in cache:
            facts = self.facts._replace(sequences={}, executions={}).merged(overlay)
            analysis = _Analysis(self.program, self.program.name(target), facts)
            analysis.explore()
            analysis.check()
            result = analysis.solve(model, {}, time_limit)
            for name in sizes:
                sizes[name] += result.ilp[name]
            self.uncertified += [note for note in analysis.uncertified if note not in self.uncertified]
            if not result.exact:
                self.notes.append(f"an execution of {result.function}: its ILP stopped before proving its "
                                  "optimum; the precise figure is an upper bound")
            cache[key] = result.wcet_cycles
        return cache[key]

    def _call_cycles(self, cfg: Cfg, edge_index: int, site: int, model: timing_models.TimingModel) -> int:
        """Cycles of the call's own instructions: from ``site`` (the call, or ARMv4T's ``mov lr, pc`` before
        it) to the call instruction, taken."""
        block = cfg.blocks[cfg.edges[edge_index].source]
        cycles = 0
        for insn in block.instructions:
            if insn.address < site:
                continue
            last = insn.address == block.last.address
            cycles += _cycles(model, insn, True if last or not timing_models.is_conditional(insn) else None)
        return cycles

    def _uncertified(self, routine: str, what: str, solution: ipet.Solution) -> None:
        if solution.exact and not solution.certified:
            bound = f"; the exact LP certificate bounds it by {solution.upper}" if solution.upper is not None else ""
            self.uncertified.append(f"{routine}: {what} optimum {solution.value} proved by HiGHS within its "
                                    f"tolerances{bound}")

    def _problem(self, node: _Node) -> ipet.Problem:
        cfg = node.cfg
        index = {edge: n for n, edge in enumerate(cfg.edges)} if node.loops else {}
        into: dict[int, list[int]] = {start: [] for start in cfg.blocks}
        out: dict[int, list[int]] = {start: [] for start in cfg.blocks}
        entry = 0
        for n, edge in enumerate(cfg.edges):
            if edge.source == ENTRY:
                entry = n
            else:
                out[edge.source].append(n)
            if edge.target != EXIT:
                into[edge.target].append(n)
        problem = ipet.Problem(n=len(cfg.edges), entry=entry, name=f"{cfg.name}",
                               blocks=[(into[start], out[start]) for start in cfg.blocks])
        for loop in node.loops:
            entries, back = loop_edges(cfg, loop)
            bound, total = node.bounds[loop.header]
            problem.loops.append(([index[e] for e in back], [index[e] for e in entries], bound))
            if total is not None:
                problem.totals.append(([index[e] for e in back], total))
        return problem


class _Ranges:
    """A region's address ranges, for membership tests."""

    def __init__(self, ranges: list[tuple[int, int]]):
        merged: list[list[int]] = []
        for start, end in sorted(ranges):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self.starts = [start for start, _ in merged]
        self.ends = [end for _, end in merged]

    def contains(self, address: int | None) -> bool:
        if address is None:
            return False
        index = bisect.bisect_right(self.starts, address) - 1
        return index >= 0 and address < self.ends[index]


UNOWNED = "\0unowned"  # the code in no named region, priced as one more region (point 5); never reported


class _Holding:
    """The regions holding an address, found with one search whatever the number of regions (a layer per
    region: pricing a V3 image asks for each of its hundreds of thousands of instructions); with regions,
    an address in none of them is in ``UNOWNED``."""

    def __init__(self, regions: dict[str, _Ranges]):
        self.points = sorted({point for ranges in regions.values() for point in (*ranges.starts, *ranges.ends)})
        nowhere = (UNOWNED,) if regions else ()
        self.names = [tuple(name for name, ranges in regions.items() if ranges.contains(point)) or nowhere
                      for point in self.points]
        self.before = nowhere  # below the first point

    def at(self, address: int) -> tuple[str, ...]:
        index = bisect.bisect_right(self.points, address) - 1
        return self.names[index] if index >= 0 else self.before

    def same(self, first: int, last: int) -> bool:
        """Whether every address from ``first`` to ``last`` is in the same regions."""
        index = bisect.bisect_right(self.points, first)
        return index == len(self.points) or last < self.points[index]


def _cycles(model: timing_models.TimingModel, insn: Insn, executed: bool | None,
            memo: dict[tuple[object, bool | None], int] | None = None) -> int:
    """``model.cycles``; with ``memo``, once per instruction shape (the cost depends on nothing else) and
    condition outcome."""
    key = (insn.shape, executed)
    if memo is not None and key in memo:
        return memo[key]
    try:
        cycles = model.cycles(insn, executed)
    except timing_models.TimingError as exc:
        raise AnalysisError(str(exc), insn.address) from None
    if memo is not None:
        memo[key] = cycles
    return cycles


def _price_cfg(cfg: Cfg, model: timing_models.TimingModel, regions: dict[str, _Ranges]):
    """Per block: the cycles of its ordinary instructions (all of them when the block does not end with a
    control instruction), total and per region; per (block, taken?): its control instruction's cycles and
    the regions holding it. Ordinary instructions are priced as the measurement prices them: at the
    model's worst when conditional (``executed=None``)."""
    base: dict[int, int] = {}
    base_regions: dict[int, dict[str, int]] = {}
    term: dict[tuple[int, bool], int] = {}
    term_regions: dict[tuple[int, bool], list[str]] = {}
    holding = _Holding(regions)
    memo: dict[tuple[object, bool | None], int] = {}
    ordinary_cost: dict[object, int] = {}  # by shape: an ordinary instruction's cycles
    for start, block in cfg.blocks.items():
        ordinary = block.instructions[:-1] if block.control else block.instructions
        total, shares = 0, {}
        for insn in ordinary:
            cycles = ordinary_cost.get(insn.shape)
            if cycles is None:
                cycles = ordinary_cost[insn.shape] = _cycles(
                    model, insn, None if timing_models.is_conditional(insn) else True, memo)
            total += cycles
        if regions and ordinary:
            if holding.same(ordinary[0].address, ordinary[-1].address):  # a block is mostly in one region
                shares = {name: total for name in holding.at(ordinary[0].address)}
            else:
                for insn in ordinary:
                    for name in holding.at(insn.address):
                        shares[name] = shares.get(name, 0) + ordinary_cost[insn.shape]
        base[start], base_regions[start] = total, shares
        if block.control:
            last = block.last
            inside = list(holding.at(last.address))
            for executed in (True, False):
                term[(start, executed)] = _cycles(model, last, executed, memo)
                term_regions[(start, executed)] = inside
    return base, base_regions, term, term_regions


def _block_counts(cfg: Cfg, counts: tuple[int, ...]) -> dict[int, int]:
    result = {start: 0 for start in cfg.blocks}
    for edge, count in zip(cfg.edges, counts):
        if edge.target != EXIT:
            result[edge.target] += count
    return result
