"""The CP-SAT model (§3.2) against brute-force enumeration on tiny DAGs, and against its DSH hint."""

from __future__ import annotations

import itertools

import pytest

from harness.scheduling import dag as dags
from harness.scheduling import exact, heuristics
from harness.scheduling.schedule import check

pytest.importorskip("ortools")


def linear_extensions(dag: dags.Dag, nodes: list[int]) -> list[tuple[int, ...]]:
    """Orders of ``nodes`` on one core in which a parent precedes its child (constraint 10)."""
    return [order for order in itertools.permutations(nodes)
            if all(order.index(u) < order.index(v) for (u, v) in dag.edges if u in order and v in order)]


def earliest_makespan(dag: dags.Dag, orders: list[tuple[int, ...]]) -> int | None:
    """ASAP times of the model's rules for these per-core orders (None when they wait on each other)."""
    start = {(v, p): 0 for p, order in enumerate(orders) for v in order}
    for _ in range(len(start) + 2):
        changed = False
        end = {key: s + dag.weights[key[0]] for key, s in start.items()}
        for p, order in enumerate(orders):
            for i, v in enumerate(order):
                needed = [end[(order[i - 1], p)]] if i else [0]
                for u in dag.parents[v]:
                    if (u, p) in end:
                        needed.append(end[(u, p)])
                    else:
                        needed.append(min(e for (w, _), e in end.items() if w == u) + dag.edges[(u, v)])
                if max(needed) != start[(v, p)]:
                    start[(v, p)], changed = max(needed), True
        if not changed:
            return max(end.values())
    return None


def brute_force(dag: dags.Dag, cores: int, copy_limit: list[int] | None = None) -> int:
    """The shortest makespan over every placement (a non-empty set of cores per node, the sink once) and
    every order on every core."""
    choices = []
    for v in range(dag.n):
        sets = [c for k in range(1, cores + 1) for c in itertools.combinations(range(cores), k)]
        limit = 1 if v == dag.sink else (copy_limit[v] if copy_limit else cores)
        choices.append([c for c in sets if len(c) <= limit])
    best = None
    for placement in itertools.product(*choices):
        per_core = [[v for v in range(dag.n) if p in placement[v]] for p in range(cores)]
        for orders in itertools.product(*(linear_extensions(dag, nodes) for nodes in per_core)):
            span = earliest_makespan(dag, list(orders))
            if span is not None and (best is None or span < best):
                best = span
    return best


# a -> b -> {c, d} -> e: b's copy on each core wants its own copy of a
FORK = dags.Dag(tuple("abcde"), (1, 1, 5, 5, 1), {(0, 1): 10, (1, 2): 10, (1, 3): 10, (2, 4): 1, (3, 4): 1})


def test_the_copy_bound_keeps_the_optimum_the_papers_bound_cuts_off():
    """Constraint 9 as the paper writes it (copies <= children) forbids copying 'a' under both copies of
    'b', and the best schedule left is the sequential one; the bound on child instances keeps the optimum."""
    assert exact.copy_bounds(FORK, 2) == [2, 2, 1, 1, 1]
    assert brute_force(FORK, 2) == 9
    assert brute_force(FORK, 2, copy_limit=[len(c) for c in FORK.children]) == 13
    result = exact.solve(FORK, 2, time_limit=5.0)
    assert result.makespan == 9 and result.optimal and check(FORK, result) == []
    assert result.duplications() == {0: [0, 1], 1: [0, 1]}


def tiny_dags(count: int) -> list[dags.Dag]:
    """Random 5-node DAGs (§4.1's generator, denser) that have one sink of their own, so 5 nodes stay 5."""
    found = (dags.random_dag(5, 0.6, seed) for seed in itertools.count())
    return list(itertools.islice((dag for dag in found if dag.n == 5), count))


@pytest.mark.parametrize("dag", tiny_dags(3), ids=lambda dag: f"{len(dag.edges)}-edges")
def test_cpsat_is_the_brute_force_optimum_on_tiny_dags(dag):
    cores = 2
    expected = brute_force(dag, cores)
    result = exact.solve(dag, cores, hint=heuristics.dsh(dag, cores), time_limit=5.0)
    assert result.optimal and result.info["gap"] == 0.0
    assert result.makespan == expected, (dag, expected)
    assert check(dag, result) == []


def test_cpsat_is_never_worse_than_its_dsh_hint_and_reports_its_gap():
    for seed in range(2):
        dag = dags.random_dag(40, 0.1, seed)
        hint = heuristics.dsh(dag, 4)
        result = exact.solve(dag, 4, hint=hint, time_limit=1.0)
        assert result.makespan <= hint.makespan
        assert check(dag, result) == []
        assert result.info["hint_makespan"] == hint.makespan
        assert result.info["bound"] <= result.makespan
        assert result.info["gap"] == pytest.approx((result.makespan - result.info["bound"]) / result.makespan)
        assert result.optimal == (result.info["status"] == "OPTIMAL" and result.info["from"] == "solver")
