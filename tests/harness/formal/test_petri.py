"""Petri-net semantics of NNEF descriptions (Translations 1 and 2) and trace checking, on the paper's listings."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.formal import nnef_items as ni
from harness.formal import petri

DATA = Path(__file__).parent / "data" / "nnef"


def listing(name: str) -> list[ni.Description]:
    return ni.parse((DATA / name).read_text(), name)


def test_listing1_net_matches_the_papers_example_4():
    """24 places, 11 initial tokens, one final token in 'out', a unique schedule."""
    net = petri.translate(listing("listing1_lenet5.nnef")[0])
    assert len(net.places) == 24 and sum(net.initial.values()) == 11
    assert net.final == {("out", petri.SINGLE): 1} and net.count_paths() == 1


def test_listing2_has_the_six_interleavings_of_its_two_branches():
    net = petri.translate(listing("listing2_dnn.nnef")[0])
    assert net.initial[("v5", petri.SINGLE)] == 2 and net.transitions["o1"].outputs == {("o1", petri.SINGLE): 2}
    assert net.count_paths() == 6 and len(net.orders()) == 6


def test_translation2_of_listing3_is_equivalent_to_listing2_property_3():
    whole = petri.translate(listing("listing2_dnn.nnef")[0])
    items = petri.translate_items(listing("listing3_items.nnef"))
    sync = items.transitions["sync_vsync1"]
    assert sync.silent and sync.inputs == {("o1", "ITEM1"): 1}
    assert sync.outputs == {("o1", "ITEM2"): 1, ("o1", "ITEM3"): 1}
    assert items.initial[("v5", "ITEM2")] == 1 and items.initial[("v5", "ITEM3")] == 1
    assert items.orders() == whole.orders()


def test_sequential_trace_accepted_and_reordered_trace_rejected_at_the_first_bad_event():
    (description,) = listing("listing2_dnn.nnef")
    net = petri.translate(description)
    layers = [ins.result for ins in description.layers()]
    assert petri.check_trace(net, petri.sequential_trace(layers)).accepted
    swapped = layers[:]
    swapped[1], swapped[2] = swapped[2], swapped[1]  # o3 before o2, which it reads
    verdict = petri.check_trace(net, petri.sequential_trace(swapped))
    assert not verdict.accepted and verdict.index == 2 and "start o3: not enabled, missing o2" in verdict.reason
    assert "still running" in petri.check_trace(net, petri.sequential_trace(layers)[:-1]).reason
    assert "before the final marking" in petri.check_trace(net, petri.sequential_trace(layers[:-1])).reason


def test_interleaved_parallel_traces_are_accepted_and_a_broken_synchronisation_rejected():
    net = petri.translate_items(listing("listing3_items.nnef"))
    # Item 3 delayed (all its layers after item 2's), then the opposite, then overlapping: all valid.
    for o4_start in (10, 1, 2.5):
        schedule = {"ITEM1": [{"node": "o1", "start": 0, "end": 1}, {"node": "o6", "start": 30, "end": 31},
                              {"node": "o7", "start": 31, "end": 32}, {"node": "out", "start": 32, "end": 33}],
                    "ITEM2": [{"node": "o2", "start": 2, "end": 4}, {"node": "o3", "start": 4, "end": 6}],
                    "ITEM3": [{"node": "o4", "start": o4_start, "end": o4_start + 1},
                              {"node": "o5", "start": o4_start + 1, "end": o4_start + 2}]}
        assert petri.check_trace(net, petri.trace_from_schedule(schedule)).accepted
    early = petri.trace_from_schedule({"ITEM1": [{"node": "o1", "start": 0, "end": 3}],
                                       "ITEM3": [{"node": "o4", "start": 2, "end": 4}]})  # no wait for o1
    verdict = petri.check_trace(net, early)
    assert not verdict.accepted and verdict.reason.startswith("start o4 on ITEM3: not enabled, missing o1 for ITEM3")
    wrong_item = petri.check_trace(net, [petri.Event("start", "o1", "ITEM2")])
    assert "the description puts o1 on item ITEM1" in wrong_item.reason


def test_logged_communications_replay_and_a_reordered_or_missing_sync_is_rejected():
    """The phases of a send_var logged by Writing/Reading operators: a read only after its write ended,
    the reader's layer only after its read ended; a duplicated layer runs on each item that computes it."""
    (original,) = listing("listing2_dnn.nnef")
    tasks = [[{"node": n, "start": 2 * k, "end": 2 * k + 2} for k, n in enumerate(names)]
             for names in (["o1", "o2", "o3", "o6", "o7", "out"], ["o1", "o4", "o5"])]
    net, groups = petri.schedule_net(original, tasks)
    assert net.transition_for("o1", "core1").name == "o1@core1" and groups["o1"] == ["o1"]

    def layers(item, names):
        return [petri.Event(kind, name, item) for name in names for kind in ("start", "end")]
    send = [petri.Event(kind, "o5_sync_core1", "core1", "core0") for kind in ("write-start", "write-end")]
    receive = [petri.Event(kind, "o5_sync_core1", "core0") for kind in ("read-start", "read-end")]
    good = (layers("core1", ["o1", "o4"]) + layers("core0", ["o1", "o2"]) + layers("core1", ["o5"]) + send
            + layers("core0", ["o3"]) + receive + layers("core0", ["o6", "o7", "out"]))
    assert petri.check_trace(net, good).accepted
    reordered = good[:]
    k = reordered.index(receive[0])
    reordered.insert(reordered.index(send[1]), reordered.pop(k))  # the read starts before the write ended
    verdict = petri.check_trace(net, reordered)
    assert not verdict.accepted and "read-start o5_sync_core1 on core0: read before its write ended" in verdict.reason
    missing = [event for event in good if event not in send + receive]
    assert petri.check_trace(net, missing).accepted  # as a schedule's trace: syncs fire when enabled
    verdict = petri.check_trace(net, missing, logged=True)
    assert not verdict.accepted and verdict.reason.startswith("start o6 on core0: not enabled, missing o5 for core0")
    unsent = layers("core1", ["o1", "o4"]) + send
    assert "missing o5 for core1 (written before it was computed)" in petri.check_trace(net, unsent).reason


def test_picture(tmp_path):
    net = petri.translate_items(listing("listing3_items.nnef"))
    text = petri.to_dot(net, "Listing 3")
    assert '"t_sync_vsync1"' in text and '"p_o1" -> "t_o2"' in text and "1:ITEM2 1:ITEM3" in text
    out = petri.render(text, tmp_path / "net.svg")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz dot is not installed (.ci/setup installs it)")
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))
