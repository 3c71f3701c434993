"""Static multi-core scheduling of a DAG of layers (the multi-core ACETONE paper, §2-§4).

A library, not a stage: plain data in (``dag.Dag``), plain data out
(``schedule.Schedule``), nothing of models, generators or targets, so the
benchmark, the ``assay schedule`` stage and the parallel code generator can
all use it. Algorithms register by name in ``ALGORITHMS``:

- ``ish``, ``dsh``: Kruatrachue's heuristics (``heuristics``);
- ``cpsat``: the paper's improved exact encoding on OR-Tools CP-SAT (``exact``),
  warm-started with the DSH schedule (the hybrid §4.3 suggests; ISH's when it
  is shorter) and stopped at a time limit.

``run`` makes the DAG one-sink, schedules it and checks the result with
``schedule.check`` whichever algorithm made it; ``to_json`` gives the schedule
as the plain data ``schedule.json`` carries (docs/schedule.md).
"""

from __future__ import annotations

from collections.abc import Callable

from harness.scheduling import exact, heuristics
from harness.scheduling.dag import Dag
from harness.scheduling.schedule import Schedule, check, speedup


def _cpsat(dag: Dag, cores: int, time_limit: float = 10.0, workers: int = 1) -> Schedule:
    """CP-SAT warm-started with the DSH schedule, or ISH's when it is shorter (both are solutions of the model)."""
    hint = min(heuristics.dsh(dag, cores), heuristics.ish(dag, cores), key=lambda s: s.makespan)
    return exact.solve(dag, cores, hint=hint, time_limit=time_limit, workers=workers)


def _heuristic(function: Callable[[Dag, int], Schedule]) -> Callable[..., Schedule]:
    def algorithm(dag: Dag, cores: int, time_limit: float = 10.0, workers: int = 1) -> Schedule:
        return function(dag, cores)  # no time limit: a list heuristic runs to its end

    return algorithm


ALGORITHMS: dict[str, Callable[..., Schedule]] = {
    "ish": _heuristic(heuristics.ish),
    "dsh": _heuristic(heuristics.dsh),
    "cpsat": _cpsat,
}


def run(dag: Dag, cores: int, algorithm: str, time_limit: float = 10.0,
        workers: int = 1) -> tuple[Dag, Schedule, list[str]]:
    """The one-sink DAG, its schedule, and the schedule's violations of §2.3 (empty when valid)."""
    if algorithm not in ALGORITHMS:
        raise KeyError(f"unknown scheduling algorithm '{algorithm}'; choose from {', '.join(ALGORITHMS)}")
    if cores < 1:
        raise ValueError(f"at least one core is needed, not {cores}")
    dag = dag.with_single_sink()
    schedule = ALGORITHMS[algorithm](dag, cores, time_limit=time_limit, workers=workers)
    return dag, schedule, check(dag, schedule)


def to_json(dag: Dag, schedule: Schedule) -> dict:
    """The schedule as plain data, nodes named (the scheduling part of ``assay-schedule/1``)."""
    name = dag.names
    return {
        "algorithm": schedule.algorithm,
        "cores": len(schedule.cores),
        "makespan": schedule.makespan,
        "sequential": dag.sequential,
        "speedup": speedup(dag, schedule),
        "optimal": schedule.optimal,
        "solver": schedule.info or None,
        "schedule": [{"core": core, "tasks": [{"node": name[t.node], "start": t.start, "end": t.end}
                                              for t in tasks]}
                     for core, tasks in enumerate(schedule.cores)],
        "duplications": [{"node": name[node], "cores": cores}
                         for node, cores in schedule.duplications().items()],
        "communications": [{"from": name[c.source], "to": name[c.target], "src_core": c.src_core,
                            "dst_core": c.dst_core, "start": c.start, "end": c.end,
                            "floats": dag.size(c.source)} for c in schedule.communications],
    }
