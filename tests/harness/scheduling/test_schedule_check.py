"""The §2.3 validity checker catches broken schedules, and accepts the valid ones the algorithms make."""

from __future__ import annotations

import pytest

from harness.scheduling import dag as dags
from harness.scheduling.schedule import Communication, Schedule, Task, check, from_placements, prune, route

# a -> b, a -> c, b -> d, c -> d; WCETs 2, 3, 4, 1; every edge costs 5
DIAMOND = dags.Dag(("a", "b", "c", "d"), (2, 3, 4, 1), {(0, 1): 5, (0, 2): 5, (1, 3): 5, (2, 3): 5})


def valid_two_core() -> Schedule:
    # core 0: a, b, d; core 1: a (copy), c; c's output reaches core 0 at 6 + 5 = 11
    return from_placements(DIAMOND, [[(0, 0), (1, 2), (3, 11)], [(0, 0), (2, 2)]], "hand")


def test_a_valid_schedule_passes_and_lists_its_communication():
    schedule = valid_two_core()
    assert check(DIAMOND, schedule) == []
    assert schedule.communications == [Communication(2, 3, 1, 0, 6, 11)]
    assert schedule.duplications() == {0: [0, 1]} and schedule.makespan == 12


def test_overlap_on_a_core_is_caught():
    schedule = valid_two_core()
    schedule.cores[0][1] = Task(1, 1, 4)  # b starts while a runs
    assert any("overlap" in line for line in check(DIAMOND, schedule))


def test_precedence_on_one_core_is_caught():
    schedule = Schedule([[Task(1, 0, 3), Task(0, 3, 5), Task(2, 5, 9), Task(3, 9, 10)], []])
    schedule.communications = route(DIAMOND, schedule.cores)
    problems = check(DIAMOND, schedule)
    assert any(line.startswith("b on core 0 at 0: no input from a") for line in problems), problems


def test_a_missing_communication_is_caught():
    schedule = valid_two_core()
    schedule.communications = []
    assert check(DIAMOND, schedule) == [
        "d on core 0 at 11: no input from c (no copy on core 0 finished by then and no communication listed)"]


def test_a_communication_shorter_than_its_edge_is_caught():
    schedule = from_placements(DIAMOND, [[(0, 0), (1, 2), (3, 8)], [(0, 0), (2, 2)]], "hand")  # d 3 cycles early
    problems = check(DIAMOND, schedule)
    assert problems == ["d on core 0 at 8: starts before its input from c on core 1 arrives at 11"]


def test_a_communication_from_a_core_without_the_producer_is_caught():
    schedule = valid_two_core()
    schedule.communications = [Communication(2, 3, 0, 0, 6, 11)]
    assert any("names core 0, which does not run c" in line for line in check(DIAMOND, schedule))


def test_missing_nodes_twice_on_a_core_wrong_durations_and_a_copied_sink_are_caught():
    schedule = Schedule([[Task(0, 0, 2), Task(0, 2, 4), Task(1, 4, 6), Task(3, 20, 21)], [Task(3, 20, 21)]])
    problems = check(DIAMOND, schedule)
    assert "core 0: a appears twice" in problems
    assert "core 0: b runs [4, 6) but its WCET is 3" in problems
    assert "c is not scheduled" in problems
    assert "sink d is scheduled 2 times (constraint 6: once)" in problems


def test_a_redundant_copy_is_caught_and_pruned():
    # the copy of a on core 1 feeds nothing: c runs on core 0
    schedule = Schedule([[Task(0, 0, 2), Task(1, 2, 5), Task(2, 5, 9), Task(3, 9, 10)], [Task(0, 0, 2)]])
    schedule.communications = route(DIAMOND, schedule.cores)
    assert check(DIAMOND, schedule) == ["core 1: the copy of a at 0 is redundant (nobody uses its output)"]
    pruned = prune(DIAMOND, schedule)
    assert pruned.cores[1] == [] and check(DIAMOND, pruned) == []


@pytest.mark.parametrize("algorithm, seeds, core_counts", [("ish", range(6), (1, 2, 3, 5)),
                                                          ("dsh", range(6), (1, 2, 3, 5)),
                                                          ("cpsat", range(2), (3,))])
def test_every_algorithm_makes_valid_schedules_on_random_dags(algorithm, seeds, core_counts):
    from harness import scheduling

    for seed in seeds:
        for cores in core_counts:
            dag, schedule, problems = scheduling.run(dags.random_dag(12, 0.2, seed), cores, algorithm,
                                                     time_limit=2.0)
            assert problems == [], (seed, cores, problems)
            assert schedule.makespan >= max(dag.critical_path, -(-dag.sequential // cores))
            if cores == 1:
                assert schedule.makespan == dag.sequential
