"""Multi-item NNEF (the paper's Syntax 1-4): parsing, writing, splitting, and the composition rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.formal import nnef_items as ni

DATA = Path(__file__).parent / "data" / "nnef"
LISTING2_ITEMS = {"ITEM1": ["o1", "o6", "o7", "out"], "ITEM2": ["o2", "o3"], "ITEM3": ["o4", "o5"]}


def listing(name: str) -> list[ni.Description]:
    return ni.parse((DATA / name).read_text(), name)


def test_listing1_parses_with_its_declarations_and_layers():
    (d,) = listing("listing1_lenet5.nnef")
    assert (d.name, d.inputs, d.outputs, d.item) == ("torch_jit_export", ["e1"], ["out"], None)
    assert len(d.declarations()) == 11 and [i.result for i in d.layers()] == [f"o{k}" for k in range(1, 13)] + ["out"]
    pool = d.layers()[2]
    assert pool.op == "max_pool" and dict(pool.kwargs)["padding"] == [(0, 0), (0, 0), (0, 0), (0, 0)]
    assert pool.reads() == ["o2"] and d.layers()[0].reads() == ["e1", "v1", "v2"]


def test_listing3_items_parse_with_the_extension():
    items = listing("listing3_items.nnef")
    assert [(d.item, d.name, d.inputs, d.outputs) for d in items] == [
        ("ITEM1", "DNN1", ["e1", "vsync2", "vsync3"], ["vsync1", "out"]),
        ("ITEM2", "DNN2", ["vsync1"], ["vsync2"]), ("ITEM3", "DNN3", ["vsync1"], ["vsync3"])]
    send = next(i for i in items[0].body if i.op == "send_var")
    assert send.reads() == ["o1"] and [r.name for r in send.arg(0, "dest")] == ["ITEM2", "ITEM3"]
    get = next(i for i in items[1].body if i.op == "get_var")
    assert get.reads() == [] and get.result == "o1"


def test_written_text_reads_back_the_same():
    for name in ("listing1_lenet5.nnef", "listing3_items.nnef"):
        descriptions = listing(name)
        again = ni.parse("\n".join(d.text() for d in descriptions))
        assert all(a.text() == b.text() for a, b in zip(descriptions, again)) and len(again) == len(descriptions)


def test_the_corrected_listing3_composes_to_listing2():
    (original,) = listing("listing2_dnn.nnef")
    ni.check_composition(original, listing("listing3_items.nnef"))


def test_the_listing3_as_printed_is_refused_at_its_first_slip():
    (original,) = listing("listing2_dnn.nnef")
    with pytest.raises(ni.ItemError, match=r"item ITEM1 line \d+: receives vsync3 as 'o4', but ITEM3 sends 'o5'"):
        ni.check_composition(original, listing("listing3_items_as_printed.nnef"))


def test_split_writes_listing3_and_it_composes():
    (original,) = listing("listing2_dnn.nnef")
    items = ni.split(original, LISTING2_ITEMS, {"o1": [1, 4, 16, 16]})
    ni.check_composition(original, list(items.values()))
    item2 = items["ITEM2"]
    assert [i.op for i in item2.body if i.op in ni.COMMUNICATIONS] == ["variablesync", "variablesync", "get_var",
                                                                      "send_var"]
    assert item2.inputs == ["o1_sync"] and item2.outputs == ["o3_sync"]
    assert "o1_sync = variablesync<scalar>(shape = [1, 4, 16, 16]);" in item2.text()
    assert "o1_sync = send_var([ITEM2, ITEM3], o1);" in items["ITEM1"].text()


@pytest.mark.parametrize("partition, message", [
    ({"A": ["o1", "o2", "o3", "o4", "o5", "o6", "o7"]}, r"layer 'out' is in no item"),
    ({"A": ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "out"], "B": ["o2"]}, r"layer 'o2' is in items A and B"),
    ({"A": ["o1", "o2", "o3", "o4", "o5", "o6", "o7", "out", "v5"]}, r"'v5', which is no layer .*declaration"),
    ({"2x": ["o1"]}, r"item name '2x' is not an NNEF identifier"),
])
def test_bad_partitions_are_refused_in_one_line(partition, message):
    (original,) = listing("listing2_dnn.nnef")
    with pytest.raises(ni.ItemError, match=message):
        ni.split(original, partition)


def test_reading_a_variable_no_item_sends_is_refused():
    (original,) = listing("listing2_dnn.nnef")
    items = listing("listing3_items.nnef")
    items[0].body = [i for i in items[0].body if not (i.op == "send_var")]  # ITEM1 no longer sends o1
    with pytest.raises(ni.ItemError, match=r"item ITEM2 .*get_var\(ITEM1, vsync1\) reads a variable that ITEM1 "
                                           r"does not send"):
        ni.check_composition(original, items)


def test_a_layer_left_out_or_computed_twice_is_refused():
    (original,) = listing("listing2_dnn.nnef")
    items = listing("listing3_items.nnef")
    items[0].body = [i for i in items[0].body if i.result != "out"]
    with pytest.raises(ni.ItemError, match=r"layer 'out' of DNN is computed by no item"):
        ni.check_composition(original, items)
    items = listing("listing3_items.nnef")
    items[2].body.insert(-1, next(i for i in items[1].body if i.result == "o3").__class__(
        ("o3",), "conv", (ni.Ref("o2"), ni.Ref("v5"), ni.Ref("v6")), (("padding", [(1, 1), (1, 1)]),)))
    with pytest.raises(ni.ItemError, match=r"reads 'o2', which item ITEM3 neither declares"):
        ni.check_composition(original, items)


def _timed(names: list[str], start: int = 0) -> list[dict]:
    return [{"node": name, "start": start + 2 * k, "end": start + 2 * k + 2} for k, name in enumerate(names)]


# Listing 2 on two cores as DSH would place it: o1 duplicated so that core 1 needs no message from core 0
DUPLICATED = {"schema": "assay-schedule/1", "schedule": [
    {"core": 0, "tasks": _timed(["o1", "o2", "o3", "o6", "o7", "out"])},
    {"core": 1, "tasks": _timed(["o1", "o4", "o5"])}]}


def test_a_schedule_json_gives_timed_tasks_and_a_partition_stays_a_partition():
    assert [[t["node"] for t in core] for core in ni.schedule_tasks(DUPLICATED)] == [
        ["o1", "o2", "o3", "o6", "o7", "out"], ["o1", "o4", "o5"]]
    assert ni.schedule_tasks({"A": ["x"]}) is None and ni.partition_from_json({"A": ["x"]}) == {"A": ["x"]}
    with pytest.raises(ni.ItemError, match="numeric times"):
        ni.schedule_tasks({"schedule": [{"core": 0, "tasks": [{"start": 1}]}]})
    with pytest.raises(ni.ItemError, match="must list layer names"):
        ni.partition_from_json({"A": [{"node": "o1"}]})


def test_split_along_a_schedule_keeps_a_useful_duplicate_and_refuses_a_useless_one():
    (original,) = listing("listing2_dnn.nnef")
    items = ni.split_schedule(original, ni.schedule_tasks(DUPLICATED), {"o5": [1, 4, 16, 16]})
    ni.check_composition(original, list(items.values()))
    core1 = items["core1"].text()
    assert "o5_sync_core1 = send_var([core0], o5);" in core1 and "get_var" not in core1  # o1 is its own copy
    assert "o5 = get_var(core1, o5_sync_core1);" in items["core0"].text()
    missing = {"schedule": [DUPLICATED["schedule"][0], {"core": 1, "tasks": _timed(["o1"])}]}
    with pytest.raises(ni.ItemError, match="layer 'o4' of DNN belongs to no scheduled layer"):
        ni.check_composition(original, list(ni.split_schedule(original, ni.schedule_tasks(missing)).values()))
    items = ni.split_schedule(original, ni.schedule_tasks(
        {"schedule": [{"core": 0, "tasks": _timed(["o1", "o2", "o3", "o4", "o5", "o6", "o7", "out"])},
                      {"core": 1, "tasks": _timed(["o1"])}]}))
    with pytest.raises(ni.ItemError, match="core1's copy is used by nothing in core1 .a duplicate without purpose"):
        ni.check_composition(original, list(items.values()))


def test_layer_groups_map_keras_layers_and_fused_activations_to_instructions():
    (d,) = ni.parse("""version 1.0;
graph g(x) -> (y) {
  x = external<scalar>(shape = [1, 4]); w = variable<scalar>(shape = [4, 4], label = 'w');
  dense1_gemm = linear(x, w); dense1_tanh = tanh(dense1_gemm); dense2_gemm = linear(dense1_tanh, w);
  y = relu(dense2_gemm);
}""")
    assert ni.layer_groups(d, ["dense1", "dense2"]) == {"dense1": ["dense1_gemm", "dense1_tanh"],
                                                        "dense2": ["dense2_gemm", "y"]}
    assert ni.layer_groups(d, ["dense1_gemm", "dense2_gemm"]) == {"dense1_gemm": ["dense1_gemm", "dense1_tanh"],
                                                                  "dense2_gemm": ["dense2_gemm", "y"]}
    with pytest.raises(ni.ItemError, match="places 'dense3', which is no layer"):
        ni.layer_groups(d, ["dense1", "dense2", "dense3"])


def test_syntax_errors_name_the_line():
    with pytest.raises(ni.ItemError, match=r"line 3: expected '=', found 'conv'"):
        ni.parse("version 1.0;\ngraph g(x) -> (y) {\n y conv(x);\n}")
