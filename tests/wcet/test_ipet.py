"""IPET: the ILP against hand-computed optima and against brute-force enumeration of every path.

The enumerator below walks every path of a routine's CFG from its entry to an exit, keeping each loop
within its bound (back-edge traversals per entry of the loop, and the total per call when one is
given), prices it edge by edge with the timing model exactly as the analyzer's cost model says (a
block's ordinary instructions at their worst, its branch, call or return taken or not taken per edge,
a callee's worst case per call), and keeps the longest. It shares the CFG and the loop structure with
the analyzer, not the ILP: the two maxima must be equal.
"""

import functools
import itertools
import random

import programs
import pytest

from wcet import ipet, timing
from wcet.analyzer import analyze
from wcet.cfg import ENTRY, EXIT
from wcet.errors import AnalysisError
from wcet.facts import FlowFacts, LoopBound
from wcet.program import load_program
from recordings import OTAWA, needs_recordings

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")


# --------------------------------------------------------------------------- the ILP alone


def test_diamond_takes_the_dearer_arm():
    # entry(0) -> A; A -> B (1) | A -> C (2); B -> D (3); C -> D (4); D -> exit (5)
    problem = ipet.Problem(n=6, entry=0, blocks=[([0], [1, 2]), ([1], [3]), ([2], [4]), ([3, 4], [5])])
    solution = ipet.maximise(problem, [1, 7, 3, 0, 0, 2])
    assert (solution.value, solution.counts, solution.exact) == (10, (1, 1, 0, 1, 0, 1), True)


def test_the_ilp_solver_writes_nothing_to_standard_output(capfd):
    # highspy prints a licence banner at construction; it must not reach stdout (``--json``)
    problem = ipet.Problem(n=6, entry=0, blocks=[([0], [1, 2]), ([1], [3]), ([2], [4]), ([3, 4], [5])])
    assert ipet.Solver(problem, method="ilp").maximise([1, 7, 3, 0, 0, 2]).value == 10
    assert capfd.readouterr().out == ""


def test_loop_bound_counts_back_edges_per_entry():
    # entry(0) -> H; H -> body (1); body -> H (2, back); H -> exit (3)
    problem = ipet.Problem(n=4, entry=0, blocks=[([0, 2], [1, 3]), ([1], [2])], loops=[([2], [0], 8)])
    solution = ipet.maximise(problem, [5, 10, 5, 1])  # the header costs 5 (on its in-edges), the body 10
    assert solution.counts == (1, 8, 8, 1)
    assert solution.value == 5 + 8 * 10 + 8 * 5 + 1  # the header runs 9 times


def test_total_bound_caps_a_nested_loop_over_all_its_entries():
    # outer header O, inner header I: entry(0)->O; O->I (1); I->inner body (2); body->I (3, back);
    # I->O (4, outer back); O->exit (5)
    problem = ipet.Problem(n=6, entry=0, blocks=[([0, 4], [1, 5]), ([1, 3], [2, 4]), ([2], [3])],
                           loops=[([4], [0], 4), ([3], [1], 4)])
    assert ipet.maximise(problem, [0, 0, 1, 0, 0, 0]).value == 16
    problem.totals.append(([3], 10))
    assert ipet.maximise(problem, [0, 0, 1, 0, 0, 0]).value == 10


@pytest.mark.tor("TOR-WCET-003")
def test_a_cycle_without_a_bound_is_refused():
    problem = ipet.Problem(n=4, entry=0, blocks=[([0, 2], [1, 3]), ([1], [2])], name="spin")
    with pytest.raises(AnalysisError, match="spin: the ILP is unbounded"):
        ipet.maximise(problem, [0, 1, 0, 0])


def test_one_model_several_objectives():
    problem = ipet.Problem(n=6, entry=0, blocks=[([0], [1, 2]), ([1], [3]), ([2], [4]), ([3, 4], [5])])
    solver = ipet.Solver(problem)
    assert solver.maximise([0, 7, 3, 0, 0, 0]).value == 7
    assert solver.maximise([0, 3, 7, 0, 0, 0]).value == 7
    assert solver.maximise([0, 3, 7, 0, 0, 0]).counts[2] == 1


def test_large_counts_stay_exact():
    problem = ipet.Problem(n=4, entry=0, blocks=[([0, 2], [1, 3]), ([1], [2])], loops=[([2], [0], 10**9)])
    solution = ipet.maximise(problem, [0, 123457, 0, 0])
    assert solution.exact and solution.value == 123457 * 10**9


# --------------------------------------------------------------------------- brute force on real CFGs


def brute_force(program, function, facts, model):
    """The longest path of ``function`` by enumeration (callees by their own enumeration, once each)."""

    @functools.cache
    def worst(entry):
        cfg = program.cfg(entry, facts)
        loops = program.loops(entry, facts)
        bounds = {}
        for loop in loops:
            (bound,) = [b for b in facts.loops if b.function == loop.function and b.offset == loop.offset]
            bounds[loop.header] = (bound.max, bound.total)
        successors = cfg.successors()

        def price(insn, executed):
            return model.cycles(insn, executed)

        def edge_cost(edge):
            cost = 0
            if edge.target != EXIT:
                block = cfg.blocks[edge.target]
                ordinary = block.instructions[:-1] if block.control else block.instructions
                cost += sum(price(i, None if timing.is_conditional(i) else True) for i in ordinary)
            if edge.source != ENTRY and cfg.blocks[edge.source].control:
                cost += price(cfg.blocks[edge.source].last, True if edge.executed is None else edge.executed)
            if edge.callees:
                cost += max(worst(callee) for callee in edge.callees)
            return cost

        best = [-1]

        def walk(edge, cost, per_entry, totals):
            cost += edge_cost(edge)
            if edge.target == EXIT:
                best[0] = max(best[0], cost)
                return
            per_entry, totals = dict(per_entry), dict(totals)
            for loop in loops:
                if loop.header != edge.target:
                    continue
                if edge.source in loop.blocks:  # a back edge
                    per_entry[loop.header] += 1
                    totals[loop.header] = totals.get(loop.header, 0) + 1
                    bound, total = bounds[loop.header]
                    if per_entry[loop.header] > bound or (total is not None and totals[loop.header] > total):
                        return
                else:
                    per_entry[loop.header] = 0
            for following in successors[edge.target]:
                walk(following, cost, per_entry, totals)

        (first,) = successors[ENTRY]
        walk(first, 0, {}, {})
        assert best[0] >= 0, f"no path through {cfg.name}"
        return best[0]

    return worst(program.address(function))


def shape_facts(program):
    marks = programs.loop_lines()
    by_line = {loop.source_line[1]: loop for function in ("nested", "early_exit", "calls_in_loop", "triangular")
               for loop in program.loops(function)}
    return FlowFacts(loops=tuple(LoopBound(by_line[line].function, by_line[line].offset, bound, total)
                                 for line, bound, total in marks.values()))


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shapes")
    return {target: load_program(programs.build("shapes.c", target, directory)) for target in ("arm7tdmi", "cortex-m4")}


@needs_gcc
@pytest.mark.parametrize("target, model", [("arm7tdmi", "trivial"), ("arm7tdmi", "arm7tdmi"),
                                           ("cortex-m4", "trivial"), ("cortex-m4", "cortex-m4")])
@pytest.mark.parametrize("function", ["diamond", "nested", "early_exit", "calls_in_loop", "triangular", "choose",
                                      "entry"])
@pytest.mark.tor("TOR-WCET-005")
def test_ilp_equals_enumeration_on_c_shapes(shapes, target, model, function):
    program = shapes[target]
    facts = shape_facts(program)
    model = timing.get(model)
    assert analyze(program, function, facts, model).wcet_cycles == brute_force(program, function, facts, model)


@needs_gcc
@pytest.mark.parametrize("source, target, model", [("arm_flow.S", "arm7tdmi", "trivial"),
                                                   ("arm_flow.S", "arm7tdmi", "arm7tdmi"),
                                                   ("thumb_flow.S", "cortex-m4", "trivial"),
                                                   ("thumb_flow.S", "cortex-m4", "cortex-m4")])
@pytest.mark.tor("TOR-WCET-005")
def test_ilp_equals_enumeration_on_hand_written_flow(tmp_path, source, target, model):
    program = load_program(programs.build(source, target, tmp_path))
    facts = FlowFacts(loops=(LoopBound("normalise", 8, 22),))
    model = timing.get(model)
    for function in ("entry", "condret", "tailer", "sharer", "pool"):
        assert analyze(program, function, facts, model).wcet_cycles == brute_force(program, function, facts, model)


def test_straight_line_chains_are_merged_before_the_ilp():
    # V3-like code: 20000 blocks in a row (one per soft-float call), a diamond in the middle
    n = 20000
    blocks = [([v], [v + 1]) for v in range(n)]  # block v: in-edge v, out-edge v + 1
    blocks[n // 2] = ([n // 2], [n // 2 + 1, n + 1])  # a branch around the next block ...
    blocks.append(([n // 2 + 1 + 1, n + 1], [n + 2]))  # ... joining here
    blocks[n // 2 + 1] = ([n // 2 + 1], [n // 2 + 2])
    blocks[n // 2 + 2] = ([n + 2], [n // 2 + 3])
    problem = ipet.Problem(n=n + 3, entry=0, blocks=blocks)
    costs = [1] * (n + 3)
    costs[n + 1] = 10  # the branch's other arm is dearer
    solver = ipet.Solver(problem)
    assert solver.problem.n <= 4 and solver.problem.rows <= 2
    solution = solver.maximise(costs)
    assert solution.exact and solution.certified
    assert solution.value == sum(costs) - costs[n // 2 + 1] - costs[n // 2 + 2]  # the cheaper arm left out
    assert len(solution.counts) == n + 3 and solution.counts[n + 1] == 1 and solution.counts[n // 2 + 1] == 0


# --------------------------------------------------------------------------- the structural solution against HiGHS


def random_program(rng: random.Random, depth: int) -> tuple[ipet.Problem, int]:
    """The IPET problem of a random structured routine (sequences, if/else, loops with breaks, continues
    and early returns, nested to ``depth``), as the analyzer builds it, and its number of loops."""
    edges: list[tuple[int | None, int | None]] = []
    loops: list[tuple[int, list[int], int]] = []  # (header, back edges, bound)
    blocks = itertools.count()

    def fragment(level: int) -> tuple[int, int]:
        kind = rng.choice(["block", "seq", "if", "loop", "loop", "return"]) if level else "block"
        if kind == "block":
            block = next(blocks)
            return block, block
        if kind == "seq":
            first, second = fragment(level - 1), fragment(level - 1)
            edges.append((first[1], second[0]))
            return first[0], second[1]
        if kind == "if":
            test, then, orelse, join = next(blocks), fragment(level - 1), fragment(level - 1), next(blocks)
            edges.extend([(test, then[0]), (test, orelse[0]), (then[1], join), (orelse[1], join)])
            if rng.random() < 0.3:
                edges.append((test, join))
            return test, join
        if kind == "return":
            block, following = next(blocks), next(blocks)
            edges.extend([(block, None), (block, following)])
            return block, following
        header = next(blocks)
        start = header + 1
        body = fragment(level - 1)
        inside = range(start, next(blocks))
        after = next(blocks)
        edges.extend([(header, body[0]), (header, after)])
        back = [len(edges)]
        edges.append((body[1], header))
        if rng.random() < 0.4:  # continue
            back.append(len(edges))
            edges.append((rng.choice(inside), header))
        if rng.random() < 0.4:  # break
            edges.append((rng.choice(inside), after))
        loops.append((header, back, rng.randint(0, 6)))
        return header, after

    first, last = fragment(depth)
    edges = [(None, first)] + edges + [(last, None)]
    count = next(blocks)
    into: list[list[int]] = [[] for _ in range(count)]
    out: list[list[int]] = [[] for _ in range(count)]
    for n, (source, target) in enumerate(edges):
        if source is not None:
            out[source].append(n)
        if target is not None:
            into[target].append(n)
    problem = ipet.Problem(n=len(edges), entry=0, blocks=list(zip(into, out)), name="random")
    for header, back, bound in loops:
        back = [b + 1 for b in back]  # the entry edge comes first
        problem.loops.append((back, [e for e in into[header] if e not in back], bound))
    return problem, len(loops)


@pytest.mark.parametrize("seed", range(60))
def test_structural_optimum_equals_the_ilp_on_random_structured_routines(seed):
    rng = random.Random(seed)
    problem, n_loops = random_program(rng, depth=4)
    for round in range(3):
        costs = [rng.randint(-3 if round == 2 else 0, 30) for _ in range(problem.n)]
        structural, ilp = ipet.Solver(problem), ipet.Solver(problem, method="ilp")
        assert structural.structural and not ilp.structural
        found, reference = structural.maximise(costs), ilp.maximise(costs)
        assert reference.exact and found.exact and found.certified
        assert found.value == reference.value, (seed, n_loops, costs)
        assert ipet._feasible(problem, found.counts)
        assert sum(c * x for c, x in zip(costs, found.counts)) == found.value


def test_problems_outside_the_structure_go_to_the_ilp():
    # irreducible: entry -> S; S -> A (1) | B (2); A -> B (3); B -> A (4); A, B -> exit (5, 6); a row on A
    irreducible = ipet.Problem(n=7, entry=0, blocks=[([0], [1, 2]), ([1, 4], [3, 5]), ([2, 3], [4, 6])],
                               loops=[([4], [1], 3)])
    solver = ipet.Solver(irreducible)
    assert not solver.structural and solver.maximise([0, 0, 0, 1, 1, 0, 0]).value == 7
    with_total = ipet.Problem(n=4, entry=0, blocks=[([0, 2], [1, 3]), ([1], [2])], loops=[([2], [0], 8)],
                              totals=[([2], 5)])
    solver = ipet.Solver(with_total)
    assert not solver.structural and solver.maximise([0, 0, 1, 0]).value == 5


class _IlpOnly(ipet.Solver):
    """The analyzer's solver with the structural solution turned off."""

    def __init__(self, problem, time_limit=300.0, method="ilp"):
        super().__init__(problem, time_limit, "ilp")


def both_ways(monkeypatch, program, function, facts, model, regions=None):
    """(the analysis as it runs, the same with every problem solved by HiGHS)."""
    fast = analyze(program, function, facts, model, regions)
    with monkeypatch.context() as patch:
        patch.setattr(ipet, "Solver", _IlpOnly)
        slow = analyze(program, function, facts, model, regions)
    return fast, slow


@needs_gcc
@pytest.mark.parametrize("target, model", [("arm7tdmi", "arm7tdmi"), ("cortex-m4", "cortex-m4")])
def test_structural_analysis_equals_the_ilp_on_c_shapes(monkeypatch, shapes, target, model):
    program = shapes[target]
    facts = shape_facts(program)
    for function in ("diamond", "nested", "early_exit", "calls_in_loop", "choose", "entry"):
        regions = {"own": [(program.function(function).start, program.function(function).end)]}
        fast, slow = both_ways(monkeypatch, program, function, facts, timing.get(model), regions)
        assert (fast.wcet_cycles, fast.regions) == (slow.wcet_cycles, slow.regions)
        assert fast.certified and fast.ilp == slow.ilp


@needs_recordings
@pytest.mark.parametrize("elf, function, facts, expected", [
    ("arm7tdmi/dense.elf", "main", "arm7tdmi/dense.ff", 22715),
    ("arm7tdmi/dense.elf", "main", "arm7tdmi/dense-context.ffx", 22715),
    ("cortex-m4/fdense_m4.elf", "layer", "cortex-m4/fdense_m4.ff", 15755)])
def test_structural_analysis_reproduces_otawa_as_the_ilp_does(monkeypatch, elf, function, facts, expected):
    from wcet.bound import facts_for_elf

    program = load_program(OTAWA / elf)
    regions = {name: [(f.start, f.end)] for name, f in program.functions.items()}
    fast, slow = both_ways(monkeypatch, program, function, facts_for_elf(OTAWA / elf, OTAWA / facts), "trivial",
                           regions)
    assert fast.wcet_cycles == slow.wcet_cycles == expected
    assert fast.regions == slow.regions


def test_infeasible_structural_problem_is_refused_as_by_the_ilp():
    problem = ipet.Problem(n=2, entry=0, blocks=[([0, 1], [1])], loops=[([1], [0], 3)], name="stuck")
    for method in ("auto", "ilp"):
        with pytest.raises(AnalysisError, match="stuck: the ILP is infeasible"):
            ipet.Solver(problem, method=method).maximise([1, 1])
