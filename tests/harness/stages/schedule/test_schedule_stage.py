"""``assay schedule`` end to end: generated manifest -> DAG -> schedule.json, Gantt chart and HTML page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main

# WCETs for the branching model below: two heavy parallel branches (shortcut, conv2) after a short trunk
WCETS = {"conv1": 100, "pool1": 10, "shortcut": 1000, "conv2": 1000, "add": 10, "pool2": 10, "dense": 10}


@pytest.fixture(scope="module")
def branching(tmp_path_factory) -> Path:
    """A residual block: pool1 feeds shortcut and conv2, which meet at add (relu fused into add)."""
    import keras
    from keras import layers

    tmp = tmp_path_factory.mktemp("branching")
    inputs = keras.Input((14, 14, 1), name="image")
    x = layers.Conv2D(6, 5, padding="same", name="conv1")(inputs)
    x = layers.AveragePooling2D(2, name="pool1")(x)
    y = layers.Conv2D(6, 1, name="shortcut")(x)
    x = layers.Conv2D(6, 3, padding="same", name="conv2")(x)
    x = layers.Activation("relu", name="relu2")(layers.Add(name="add")([x, y]))
    x = layers.MaxPooling2D(2, padding="same", name="pool2")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(10, name="dense")(x)
    path = tmp / "branching.keras"
    keras.Model(inputs, x).save(path)
    return path


def wcet_json(path: Path, model: Path, wcets: dict, verdict: str = "pass") -> Path:
    """A wcet.json of the WCET stage's schema with these per-layer bounds (the stage's input, made up here)."""
    record = {"model": str(model), "generator": "assay-v2", "variant": "keras", "target": "cortex-m4f",
              "opt": "-O0", "timing": "cortex-m4", "engine": "builtin", "verdict": verdict,
              "cause": None if verdict == "pass" else "unsound: WCET 1 < measured 2",
              "wcet_cycles": sum(wcets.values()), "fingerprint": "f",
              "layers": [{"layer": name, "wcet_cycles": cycles, "max_measured_cycles": 0}
                         for name, cycles in wcets.items()]}
    path.write_text(json.dumps({"schema": "assay-wcet/1", "records": [record]}))
    return path


def schedule(model: Path, wcets: Path, out: Path, work: Path, algorithm: str, cores: int = 2) -> int:
    return main(["schedule", "--model", str(model), "--cores", str(cores), "--algorithm", algorithm,
                 "--wcet-json", str(wcets), "--comm-fixed", "5", "--comm-per-float", "0", "--time-limit", "5",
                 "--out", str(out), "--work", str(work)])


@pytest.mark.parametrize("algorithm", ["ish", "dsh", "cpsat"])
def test_branches_run_in_parallel(branching, tmp_path, algorithm):
    """Edges cost 2 x 5 = 10 cycles: trunk 110, one branch crosses cores (1000 + 10), then add, pool2 and
    dense (30): 1150 cycles against 2140 on one core, and no schedule can do better (the branches are
    1000 each and one of them must cross)."""
    out = tmp_path / "out"
    assert schedule(branching, wcet_json(tmp_path / "wcet.json", branching, WCETS), out, tmp_path / "work",
                    algorithm) == 0
    data = json.loads((out / "schedule.json").read_text())
    assert data["schema"] == "assay-schedule/1" and data["algorithm"] == algorithm and data["cores"] == 2
    assert data["sequential"] == sum(WCETS.values()) == 2140
    assert data["makespan"] == 1150 and data["speedup"] == pytest.approx(2140 / 1150)
    assert data["valid"] and data["violations"] == []
    assert data["optimal"] is (True if algorithm == "cpsat" else None)
    edges = {(e["from"], e["to"]) for e in data["edges"]}
    assert {("pool1", "shortcut"), ("pool1", "conv2"), ("shortcut", "add"), ("conv2", "add")} <= edges
    assert "relu2" not in {n["node"] for n in data["nodes"]}  # fused into add: no node of its own
    assert {n["node"]: n["wcet_cycles"] for n in data["nodes"]}["flatten"] == 0  # a view, no code
    placed = {t["node"]: lane["core"] for lane in data["schedule"] for t in lane["tasks"]}
    assert placed["shortcut"] != placed["conv2"]
    assert len(data["communications"]) >= 1 and all(c["end"] - c["start"] == 10 for c in data["communications"])
    assert data["communication_cost"]["model"] == "provisional-copy"
    assert (out / "gantt.png").stat().st_size > 1000 and "Gantt chart" in (out / "schedule.html").read_text()


def test_a_layer_without_wcet_and_a_failed_wcet_check_are_one_line_errors(branching, tmp_path, capsys):
    partial = {k: v for k, v in WCETS.items() if k != "conv2"}
    assert schedule(branching, wcet_json(tmp_path / "w1.json", branching, partial), tmp_path / "o1",
                    tmp_path / "work", "dsh") == 2
    assert "layer 'conv2' has code but no WCET" in capsys.readouterr().err
    assert schedule(branching, wcet_json(tmp_path / "w2.json", branching, WCETS, verdict="fail"), tmp_path / "o2",
                    tmp_path / "work", "dsh") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the WCET record is 'fail' (unsound: WCET 1 < measured 2)" in err[0]


def test_bad_options_are_refused_before_anything_runs(tmp_path, capsys):
    assert main(["schedule", "--model", "lenet5", "--cores", "0", "--algorithm", "dsh", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "assay: error: --cores must be at least 1, not 0"
    assert main(["schedule", "--model", "lenet5", "--cores", "2", "--algorithm", "dsh", "--timing", "arm7tdmi",
                 "--out", str(tmp_path)]) == 2
    assert "does not describe target cortex-m4f" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.arm
@pytest.mark.wcet
def test_lenet5_on_cortex_m4f_with_real_wcets_is_a_chain(tmp_path):
    """LeNet-5 is a chain: no schedule beats one core, and CP-SAT proves it. The WCETs are the WCET stage's
    own (run through `assay wcet`, hence the wcet mark: about 90 s), and the sequential makespan is the sum
    of its per-layer bounds."""
    out = tmp_path / "out"
    assert main(["schedule", "--model", "lenet5", "--cores", "2", "--algorithm", "cpsat", "--target", "cortex-m4f",
                 "--inputs", "3", "--out", str(out), "--work", str(tmp_path / "work"), "--quiet"]) == 0
    data = json.loads((out / "schedule.json").read_text())
    wcet = json.loads((out / "wcet" / "wcet.json").read_text())
    record = next(r for r in wcet["records"] if r["timing"] == "cortex-m4" and r["variant"] == data["variant"])
    per_layer = {layer["layer"]: layer["wcet_cycles"] for layer in record["layers"]}
    assert data["sequential"] == sum(c for name, c in per_layer.items() if name != "(outside layers)") > 0
    assert data["makespan"] == data["sequential"] and data["speedup"] == 1.0
    assert data["optimal"] is True and data["valid"]
    assert data["duplications"] == [] and data["communications"] == []
    assert sum(1 for lane in data["schedule"] if lane["tasks"]) == 1
    names = [n["node"] for n in data["nodes"]]
    assert [(e["from"], e["to"]) for e in data["edges"]] == list(zip(names, names[1:]))  # a chain
    assert data["wcet"]["command"][:2] == ["assay", "wcet"]


@pytest.mark.skipif(__import__("shutil").which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")
def test_edges_cost_the_operators_wcet_by_default(branching, tmp_path):
    """Without --comm-*, an edge costs the WCET of the generated Writing + Reading operators for the
    producer's tensor, analysed on the schedule's target and timing model."""
    from harness import targets
    from harness.stages.schedule.operator_wcet import operator_wcets

    out = tmp_path / "out"
    assert main(["schedule", "--model", str(branching), "--cores", "2", "--algorithm", "dsh", "--wcet-json",
                 str(wcet_json(tmp_path / "wcet.json", branching, WCETS)), "--out", str(out),
                 "--work", str(tmp_path / "work")]) == 0
    data = json.loads((out / "schedule.json").read_text())
    cost = data["communication_cost"]
    assert (cost["model"], cost["target"], cost["timing"]) == ("operator-wcet", "cortex-m4f", "cortex-m4")
    pool1 = next(e for e in data["edges"] if e["from"] == "pool1")  # 7 x 7 x 6 floats
    expected = operator_wcets(294, "assay-v2", targets.get("cortex-m4f"), "cortex-m4", "-O0", tmp_path / "check")
    assert pool1["floats"] == 294 and pool1["cost"] == expected["write"] + expected["read"]
    assert {o["floats"] for o in cost["operators"]} == {e["floats"] for e in data["edges"]}
