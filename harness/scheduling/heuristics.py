"""Kruatrachue's list-scheduling heuristics (§3.3): ISH (insertion) and DSH (duplication).

Written here because no maintained Python package implements them with
communication costs and duplication. Both share the frame of §3.3: a node's
level is the largest sum of WCETs on a path from it to the sink; ready nodes
(all parents scheduled) wait in a queue ordered by level (then by index, so
the result is deterministic); the head of the queue goes to the core where it
can start earliest (ties: fewer duplicated tasks, then the lower core). Cores
are filled in time order: a task is only ever appended after the core's last
task, so a copy of a parent on the same core always finishes before its child.

- ISH: when the chosen start leaves the core idle, the ready queue is scanned
  in order and every node that fits in the idle period (its own inputs having
  arrived) is inserted there, without moving the chosen start (Figure 4).
- DSH: a node's start on a core is first improved by copying parents onto that
  core: the parent whose data arrives last is copied into the idle period (its
  own start improved the same way, recursively, so grandparents get copied
  when that helps); a copy is kept only when it makes the node start earlier,
  and copying goes on while the core is still idle before the node (Figure 5).
  Copies that end up unused are removed at the end (``schedule.prune``).
"""

from __future__ import annotations

from harness.scheduling.dag import Dag
from harness.scheduling.schedule import Schedule, from_placements

Placement = tuple[int, int, int]  # node, start, end


class _State:
    """Placed instances per core (append-only) and per node."""

    def __init__(self, dag: Dag, cores: int) -> None:
        self.dag = dag
        self.cores: list[list[Placement]] = [[] for _ in range(cores)]
        self.where: dict[int, dict[int, int]] = {}  # node -> core -> end

    def free(self, core: int) -> int:
        return self.cores[core][-1][2] if self.cores[core] else 0

    def place(self, node: int, core: int, start: int) -> None:
        end = start + self.dag.weights[node]
        self.cores[core].append((node, start, end))
        self.where.setdefault(node, {})[core] = end

    def arrival(self, parent: int, child: int, core: int, extra: dict[int, int]) -> int:
        """When ``parent``'s output can be on ``core`` for ``child`` (``extra``: tentative copies on ``core``)."""
        if parent in extra:
            return extra[parent]
        ends = self.where[parent]
        cost = self.dag.edges[(parent, child)]
        return min(end if c == core else end + cost for c, end in ends.items())

    def ready_time(self, node: int, core: int, extra: dict[int, int]) -> int:
        return max((self.arrival(p, node, core, extra) for p in self.dag.parents[node]), default=0)


def _by_level(dag: Dag, nodes) -> list[int]:
    return sorted(nodes, key=lambda v: (-dag.levels[v], v))


def _list_schedule(dag: Dag, cores: int, duplicate: bool) -> Schedule:
    if cores < 1:
        raise ValueError("at least one core is needed")
    state = _State(dag, cores)
    waiting = [len(dag.parents[v]) for v in range(dag.n)]
    queue = _by_level(dag, [v for v in range(dag.n) if waiting[v] == 0])

    def done(node: int) -> None:
        for child in dag.children[node]:
            waiting[child] -= 1
            if waiting[child] == 0:
                queue.append(child)
        queue[:] = _by_level(dag, queue)

    while queue:
        node = queue.pop(0)
        options = []
        for core in range(cores):
            if duplicate:
                start, copies = _with_copies(state, node, core, state.free(core), {})
            else:
                start, copies = max(state.free(core), state.ready_time(node, core, {})), []
            options.append((start, len(copies), core, copies))
        start, _, core, copies = min(options, key=lambda o: o[:3])
        for copy, copy_start in copies:
            state.place(copy, core, copy_start)
        if not duplicate:
            _insert(state, queue, core, start, done)
        state.place(node, core, start)
        done(node)
    return from_placements(dag, [[(v, s) for v, s, _ in tasks] for tasks in state.cores],
                           "dsh" if duplicate else "ish")


def _insert(state: _State, queue: list[int], core: int, start: int, done) -> None:
    """ISH's insertion step: fill the idle period before ``start`` on ``core`` with ready nodes that fit."""
    for candidate in list(queue):
        free = state.free(core)
        if free >= start:
            return
        begin = max(free, state.ready_time(candidate, core, {}))
        if begin + state.dag.weights[candidate] <= start:
            queue.remove(candidate)
            state.place(candidate, core, begin)
            done(candidate)


def _with_copies(state: _State, node: int, core: int, free: int,
                 extra: dict[int, int]) -> tuple[int, list[tuple[int, int]]]:
    """DSH's start of ``node`` on ``core`` after the core's time ``free``, and the copies that make it so.

    ``extra`` holds the copies already planned on ``core`` (node -> end); the result's copies are in order.
    """
    dag = state.dag
    copies: list[tuple[int, int]] = []
    start = max(free, state.ready_time(node, core, extra))
    while start > free:
        late = [p for p in dag.parents[node] if p not in extra and core not in state.where[p]]
        if not late:
            break
        parent = max(late, key=lambda p: (state.arrival(p, node, core, extra), -p))
        trial = dict(extra)
        parent_start, parent_copies = _with_copies(state, parent, core, free, trial)
        for copy, copy_start in parent_copies:
            trial[copy] = copy_start + dag.weights[copy]
        trial[parent] = parent_start + dag.weights[parent]
        trial_free = trial[parent]
        trial_start = max(trial_free, state.ready_time(node, core, trial))
        if trial_start >= start:
            break
        copies += [*parent_copies, (parent, parent_start)]
        extra, free, start = trial, trial_free, trial_start
    return start, copies


def ish(dag: Dag, cores: int) -> Schedule:
    """Insertion Scheduling Heuristic: no duplication, idle periods filled with ready nodes."""
    return _list_schedule(dag, cores, duplicate=False)


def dsh(dag: Dag, cores: int) -> Schedule:
    """Duplication Scheduling Heuristic: parents copied onto a core when that makes a node start earlier."""
    return _list_schedule(dag, cores, duplicate=True)
