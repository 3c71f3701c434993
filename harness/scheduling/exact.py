"""The exact schedule: the paper's improved CP encoding (§3.2) solved by OR-Tools CP-SAT.

Variables per node v and core p, as in the paper: ``x[v,p]`` (v runs on p),
``s[v,p]`` and ``f[v,p]`` (its start and end there). Constraints:

- (1) every node at least once; (6) the sink exactly once;
- (3) an absent instance starts at 0; (12) a present one ends WCET later;
  (13) an absent one "ends" at the horizon H, so that ``earliest_f[v] =
  min_p f[v,p]`` is the end of its earliest copy;
- (4) no two instances overlap on a core, written as CP-SAT's ``NoOverlap``
  over optional intervals (the same disjunction, propagated globally);
- (10) parent and child on the same core: the parent ends before the child
  starts; (11) child on a core without the parent: it starts after the
  parent's earliest copy ends plus the edge's cost;
- (9) a bound on the number of copies of a non-sink node. The paper bounds
  it by its number of children, which assumes each child runs once: a node
  whose only child is copied onto two cores may need a copy under each, and
  the paper's bound would forbid that (DSH builds such schedules, see the
  tests). Here the bound is the number of child *instances* it may have to
  feed, ``min(m, sum over children of their own bound)``, with the sink at 1:
  it equals the paper's bound when no child is copied, and it never cuts off
  a schedule without redundant copies (each useful copy feeds at least one
  child instance, and each child instance reads one copy).

H is the sequential makespan (the paper's "sum of all WCETs"), or the hint's
makespan if that is larger. Redundant lower bounds help the solver prove
optimality without changing the optimum: the makespan is at least the critical
path and the total work over m cores, a task starts no earlier than its
longest chain of predecessors, and the earliest copy of a node leaves time for
its longest chain of successors. The sink is put on core 0 (cores are
identical, so this only removes mirror solutions).

The search starts from a hint (the DSH schedule, ``AddHint``), so a solution
at least as good as the hint is known from the start; whatever the solver
returns, the better of its schedule and the hint is kept. The result says
whether optimality was proved, the best bound and the relative gap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from harness.scheduling.dag import Dag
from harness.scheduling.schedule import Schedule, from_placements

# Seconds kept back from the solver for what follows its search: reading the solution out, the child's exit,
# the parent parsing it. The time limit is the caller's whole wait (an aim like "within 60 s" is wall time
# for the user), so the child's start and the model's construction are taken from the solver's share too.
_READBACK_S = 0.3


def copy_bounds(dag: Dag, cores: int) -> list[int]:
    """Constraint 9 as used here: the largest useful number of copies of each node (module docstring)."""
    bound = [0] * dag.n
    for node in reversed(dag.order):
        children = dag.children[node]
        bound[node] = 1 if not children else min(cores, sum(bound[c] for c in children))
    return bound


def solve(dag: Dag, cores: int, hint: Schedule | None = None, time_limit: float = 10.0,
          workers: int = 1, seed: int = 0) -> Schedule:
    """The optimal schedule of ``dag`` on ``cores`` cores (or the best found within ``time_limit`` seconds).

    ``time_limit`` bounds this call's wall time, not only the solver's search (``_READBACK_S``).

    The solver runs in a child process (``python -m harness.scheduling.exact``, JSON on stdin and stdout):
    OR-Tools and TensorFlow in one process crash on their clashing native libraries (a segmentation fault
    in ``Solve`` once Keras is loaded, as it is after code generation), and a child also keeps the
    solver's memory out of the caller's.
    """
    deadline = time.time() + time_limit  # wall clock: shared with the child process
    dag = dag.with_single_sink()
    if hint is not None and len(hint.cores) != cores:
        raise ValueError(f"the hint has {len(hint.cores)} cores, not {cores}")
    payload = {"names": list(dag.names), "weights": list(dag.weights),
               "edges": [[u, v, cost] for (u, v), cost in sorted(dag.edges.items())], "cores": cores,
               "hint": None if hint is None else [[[t.node, t.start] for t in tasks] for tasks in hint.cores],
               "deadline": deadline, "workers": workers, "seed": seed}
    done = subprocess.run([sys.executable, "-m", "harness.scheduling.exact"], input=json.dumps(payload),
                          capture_output=True, text=True, check=False, timeout=time_limit * 3 + 120)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RuntimeError(f"the CP-SAT process failed: {tail}")
    answer = json.loads(done.stdout)
    info = {"status": answer["status"], "solve_seconds": answer["seconds"], "time_limit": time_limit,
            "workers": workers, "hint_makespan": hint.makespan if hint else None,
            "hint_algorithm": hint.algorithm if hint else None, "bound": answer["bound"], "from": "solver"}
    proved = answer["status"] == "OPTIMAL"
    result = None
    if answer["placements"] is not None:
        placed = [[(v, start) for v, start in tasks] for tasks in answer["placements"]]
        result = from_placements(dag, placed, "cpsat", proved, info)
    if hint is not None and (result is None or hint.makespan < result.makespan):
        info["from"] = "hint"
        result = Schedule(hint.cores, hint.communications, "cpsat", False, info)
    if result is None:
        raise TimeoutError(f"CP-SAT found no schedule within {time_limit:g} s ({info['status']}) and had no hint")
    bound = info["bound"] if info["bound"] is not None else _lower_bound(dag, cores)
    info["bound"] = bound
    info["gap"] = (result.makespan - bound) / result.makespan if result.makespan else 0.0
    result.optimal = proved and info["from"] == "solver"
    result.info = info
    return result


def _lower_bound(dag: Dag, cores: int) -> int:
    """No schedule is shorter than the critical path or than the total work spread over every core."""
    return max(dag.critical_path, -(-dag.sequential // cores))


def _solve_here(payload: dict) -> dict:
    """Build and solve the model in this process (the child's side of ``solve``)."""
    from ortools.sat.python import cp_model

    dag = Dag(tuple(payload["names"]), tuple(payload["weights"]),
              {(u, v): cost for u, v, cost in payload["edges"]})
    cores = payload["cores"]
    hint = payload["hint"]
    sink, n, cores_range = dag.sink, dag.n, range(cores)
    hint_ends = [[start + dag.weights[v] for v, start in tasks] for tasks in hint] if hint else []
    horizon = max([dag.sequential, *(max(ends, default=0) for ends in hint_ends)])
    bounds = copy_bounds(dag, cores)
    model = cp_model.CpModel()
    x = {(v, p): model.NewBoolVar(f"x_{v}_{p}") for v in range(n) for p in cores_range}
    s = {(v, p): model.NewIntVar(0, horizon, f"s_{v}_{p}") for v in range(n) for p in cores_range}
    f = {(v, p): model.NewIntVar(0, horizon, f"f_{v}_{p}") for v in range(n) for p in cores_range}
    earliest = {v: model.NewIntVar(0, horizon, f"earliest_f_{v}") for v in range(n)}
    makespan = model.NewIntVar(_lower_bound(dag, cores), horizon, "makespan")
    intervals: dict[int, list] = {p: [] for p in cores_range}
    for v in range(n):
        t = dag.weights[v]
        model.Add(sum(x[v, p] for p in cores_range) >= 1)  # (1)
        model.Add(sum(x[v, p] for p in cores_range) <= bounds[v])  # (9), (6) for the sink
        for p in cores_range:
            model.Add(s[v, p] == 0).OnlyEnforceIf(x[v, p].Not())  # (3)
            model.Add(f[v, p] == s[v, p] + t).OnlyEnforceIf(x[v, p])  # (12)
            model.Add(f[v, p] == horizon).OnlyEnforceIf(x[v, p].Not())  # (13)
            model.Add(s[v, p] >= dag.heads[v]).OnlyEnforceIf(x[v, p])
            model.Add(makespan >= f[v, p]).OnlyEnforceIf(x[v, p])
            intervals[p].append(model.NewOptionalFixedSizeIntervalVar(s[v, p], t, x[v, p], f"i_{v}_{p}"))
        model.AddMinEquality(earliest[v], [f[v, p] for p in cores_range])
        model.Add(earliest[v] + dag.levels[v] - t <= makespan)
    model.Add(x[sink, 0] == 1)  # (6) and the cores' symmetry
    for p in cores_range:
        model.AddNoOverlap(intervals[p])  # (4)
    for (u, v), cost in dag.edges.items():
        for p in cores_range:
            model.Add(f[u, p] <= s[v, p]).OnlyEnforceIf([x[u, p], x[v, p]])  # (10)
            model.Add(earliest[u] + cost <= s[v, p]).OnlyEnforceIf([x[u, p].Not(), x[v, p]])  # (11)
    model.Minimize(makespan)
    if hint:
        _add_hint(model, dag, hint, horizon, x, s, f, earliest, makespan)

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(payload["deadline"] - time.time() - _READBACK_S, 0.01)
    solver.parameters.num_workers = payload["workers"]
    solver.parameters.random_seed = payload["seed"]
    start = time.perf_counter()
    status = solver.Solve(model)
    seconds = time.perf_counter() - start
    found = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return {"status": solver.StatusName(status), "seconds": seconds,
            "bound": int(solver.BestObjectiveBound()) if found else None,
            "placements": [[[v, solver.Value(s[v, p])] for v in range(n) if solver.Value(x[v, p])]
                           for p in cores_range] if found else None}


def _add_hint(model, dag: Dag, hint: list, horizon: int, x, s, f, earliest, makespan) -> None:
    """The hint's values for every variable, its cores renumbered so that the sink runs on core 0."""
    cores = len(hint)
    sink_core = next(core for core, tasks in enumerate(hint) if any(v == dag.sink for v, _ in tasks))
    order = [sink_core, *(c for c in range(cores) if c != sink_core)]
    placed = {(v, new): start for new, old in enumerate(order) for v, start in hint[old]}
    ends = []
    for v in range(dag.n):
        for p in range(cores):
            start = placed.get((v, p))
            model.AddHint(x[v, p], start is not None)
            model.AddHint(s[v, p], start if start is not None else 0)
            model.AddHint(f[v, p], start + dag.weights[v] if start is not None else horizon)
        first = min(start + dag.weights[v] for (node, _), start in placed.items() if node == v)
        model.AddHint(earliest[v], first)
        ends.append(max(start + dag.weights[v] for (node, _), start in placed.items() if node == v))
    model.AddHint(makespan, max(ends))


if __name__ == "__main__":
    print(json.dumps(_solve_here(json.load(sys.stdin))))
