"""A static schedule on m identical cores (§2.3), the communications it implies, and its validity check.

A schedule is, per core, a list of task instances ``(node, start, end)``; a
node may appear on several cores (duplication) but at most once per core.
The communications are derived, not chosen: an instance takes each input from
a copy of the parent on its own core when that copy has finished by its start,
otherwise from the parent's earliest-finishing copy on another core, paying the
edge's cost (the data leaves when that copy ends). That is the rule of the
exact model (constraints 10 and 11) and of the list heuristics.

``check`` verifies the §2.3 properties on any schedule, whichever algorithm
made it: every node at least once and at most once per core, the sink once
(constraint 6), no overlap on a core, each task lasting its WCET, every input
available at the start (the parents have finished and, across cores, the
listed communication is over), and no redundant copy (an instance whose output
nobody uses). ``prune`` removes redundant copies, which the paper requires and
which never lengthens a schedule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.scheduling.dag import Dag


@dataclass(frozen=True)
class Task:
    node: int
    start: int
    end: int


@dataclass(frozen=True)
class Communication:
    """The output of ``source`` on ``src_core`` sent to the instance of ``target`` on ``dst_core``."""

    source: int
    target: int
    src_core: int
    dst_core: int
    start: int
    end: int


@dataclass
class Schedule:
    """Per core, its tasks in start order; the communications; what the algorithm says about itself."""

    cores: list[list[Task]]
    communications: list[Communication] = field(default_factory=list)
    algorithm: str = ""
    optimal: bool | None = None  # proved optimal (exact algorithms), None for heuristics
    info: dict = field(default_factory=dict)  # solver status, bound, gap, seconds, ...

    @property
    def makespan(self) -> int:
        return max((t.end for tasks in self.cores for t in tasks), default=0)

    def instances(self, node: int) -> list[tuple[int, Task]]:
        return [(core, t) for core, tasks in enumerate(self.cores) for t in tasks if t.node == node]

    def duplications(self) -> dict[int, list[int]]:
        """Nodes placed on more than one core -> those cores."""
        found: dict[int, list[int]] = {}
        for core, tasks in enumerate(self.cores):
            for t in tasks:
                found.setdefault(t.node, []).append(core)
        return {node: cores for node, cores in sorted(found.items()) if len(cores) > 1}


def speedup(dag: Dag, schedule: Schedule) -> float:
    """Eq. 15: the single-core makespan over the multi-core one."""
    return dag.sequential / schedule.makespan if schedule.makespan else 1.0


def from_placements(dag: Dag, cores: list[list[tuple[int, int]]], algorithm: str, optimal: bool | None = None,
                    info: dict | None = None) -> Schedule:
    """A schedule from ``(node, start)`` per core: ends from the WCETs, redundant copies pruned, routes derived."""
    tasks = [sorted((Task(node, start, start + dag.weights[node]) for node, start in placed),
                    key=lambda t: (t.start, t.end, t.node)) for placed in cores]
    schedule = prune(dag, Schedule(tasks, algorithm=algorithm, optimal=optimal, info=dict(info or {})))
    schedule.communications = route(dag, schedule.cores)
    return schedule


def _source(dag: Dag, cores: list[list[Task]], parent: int, core: int, start: int) -> tuple[int, Task] | None:
    """Where an instance on ``core`` starting at ``start`` takes ``parent``'s output from (the rule above)."""
    local = [t for t in cores[core] if t.node == parent and t.end <= start]
    if local:
        return core, local[0]
    remote = [(c, t) for c, tasks in enumerate(cores) if c != core for t in tasks if t.node == parent]
    return min(remote, key=lambda ct: (ct[1].end, ct[0]), default=None)


def route(dag: Dag, cores: list[list[Task]]) -> list[Communication]:
    """The communications the schedule needs, one per (remote parent, consumer instance)."""
    comms = []
    for core, tasks in enumerate(cores):
        for task in tasks:
            for parent in dag.parents[task.node]:
                found = _source(dag, cores, parent, core, task.start)
                if found is not None and found[0] != core:
                    src_core, src = found
                    cost = dag.edges[(parent, task.node)]
                    comms.append(Communication(parent, task.node, src_core, core, src.end, src.end + cost))
    return sorted(comms, key=lambda c: (c.start, c.src_core, c.dst_core, c.source, c.target))


def _used(dag: Dag, cores: list[list[Task]]) -> set[tuple[int, int]]:
    """(core, node) of every instance some consumer instance takes its input from, plus the sink's."""
    used = {(core, t.node) for core, tasks in enumerate(cores) for t in tasks if not dag.children[t.node]}
    for core, tasks in enumerate(cores):
        for task in tasks:
            for parent in dag.parents[task.node]:
                found = _source(dag, cores, parent, core, task.start)
                if found is not None:
                    used.add((found[0], parent))
    return used


def _copies(dag: Dag, cores: list[list[Task]]) -> list[int]:
    counts = [0] * dag.n
    for tasks in cores:
        for task in tasks:
            counts[task.node] += 1
    return counts


def prune(dag: Dag, schedule: Schedule) -> Schedule:
    """Remove redundant copies (§2.3) until none is left; the other tasks keep their times."""
    cores = [list(tasks) for tasks in schedule.cores]
    while True:
        used = _used(dag, cores)
        copies = _copies(dag, cores)
        redundant = [(core, t) for core, tasks in enumerate(cores) for t in tasks
                     if (core, t.node) not in used and copies[t.node] > 1]
        if not redundant:
            break
        core, task = max(redundant, key=lambda ct: (ct[1].end, ct[0]))  # the latest first: its inputs may free others
        cores[core].remove(task)
    return Schedule(cores, schedule.communications, schedule.algorithm, schedule.optimal, schedule.info)


def check(dag: Dag, schedule: Schedule) -> list[str]:
    """Every violation of the §2.3 properties, one line each (an empty list: the schedule is valid)."""
    problems: list[str] = []
    name = dag.names
    counts = [0] * dag.n
    for core, tasks in enumerate(schedule.cores):
        seen: set[int] = set()
        for task in tasks:
            if not 0 <= task.node < dag.n:
                problems.append(f"core {core}: unknown node {task.node}")
                return problems
            counts[task.node] += 1
            if task.node in seen:
                problems.append(f"core {core}: {name[task.node]} appears twice")
            seen.add(task.node)
            if task.start < 0 or task.end - task.start != dag.weights[task.node]:
                problems.append(f"core {core}: {name[task.node]} runs [{task.start}, {task.end}) "
                                f"but its WCET is {dag.weights[task.node]}")
        ordered = sorted(tasks, key=lambda t: (t.start, t.end))
        for a, b in zip(ordered, ordered[1:]):
            if b.start < a.end:
                problems.append(f"core {core}: {name[a.node]} [{a.start}, {a.end}) and "
                                f"{name[b.node]} [{b.start}, {b.end}) overlap")
    problems += [f"{name[v]} is not scheduled" for v in range(dag.n) if counts[v] == 0]
    for sink in dag.sinks:
        if counts[sink] > 1:
            problems.append(f"sink {name[sink]} is scheduled {counts[sink]} times (constraint 6: once)")
    listed = {(c.source, c.target, c.dst_core): c for c in schedule.communications}
    ends = {(core, t.node): t.end for core, tasks in enumerate(schedule.cores) for t in tasks}
    for core, tasks in enumerate(schedule.cores):
        for task in tasks:
            for parent in dag.parents[task.node]:
                if any(t.node == parent and t.end <= task.start for t in tasks):
                    continue
                what = f"{name[task.node]} on core {core} at {task.start}"
                comm = listed.get((parent, task.node, core))
                if comm is None:
                    problems.append(f"{what}: no input from {name[parent]} (no copy on core {core} finished "
                                    f"by then and no communication listed)")
                    continue
                source_end = ends.get((comm.src_core, parent))
                cost = dag.edges[(parent, task.node)]
                if comm.src_core == core or source_end is None:
                    problems.append(f"{what}: the communication from {name[parent]} names core {comm.src_core}, "
                                    f"which does not run {name[parent]}")
                elif comm.start < source_end or comm.end - comm.start != cost:
                    problems.append(f"{what}: communication from {name[parent]} on core {comm.src_core} runs "
                                    f"[{comm.start}, {comm.end}); {name[parent]} ends at {source_end} and the "
                                    f"edge costs {cost}")
                elif comm.end > task.start:
                    problems.append(f"{what}: starts before its input from {name[parent]} on core "
                                    f"{comm.src_core} arrives at {comm.end}")
    if not problems:
        used = _used(dag, schedule.cores)
        problems += [f"core {core}: the copy of {name[t.node]} at {t.start} is redundant (nobody uses its output)"
                     for core, tasks in enumerate(schedule.cores) for t in tasks
                     if (core, t.node) not in used and counts[t.node] > 1]
    return problems
