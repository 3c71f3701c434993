"""Pareto fronts, budgets and the report of ``assay explore`` on hand-made configurations."""

from __future__ import annotations

import json

import pytest

from harness.errors import AssayError, ConfigError
from harness.stages.explore import run
from harness.stages.explore.report import markdown, write_explore_report


def config(j, quality, rom, ram, wcet, verdict="pass"):
    return {"j": j, "quality": quality, "rom": rom, "ram": ram, "wcet_cycles": wcet,
            "max_measured_cycles": None if wcet is None else wcet - 10, "verdict": verdict,
            "units": {"conv1": 16 - j, "dense1": 64 - 4 * j}, "parameters": 1000 - 50 * j,
            "model_file": f"m-j{j:02d}.keras", "wcet_verdict": "pass", "causes": []}


def test_non_dominated_on_hand_made_points():
    points = [(1, 5), (2, 4), (2, 6), (3, 3), (3, 3), (4, 4), (1, 5)]
    # (2, 6) is dominated by (1, 5) and (2, 4); (4, 4) by (3, 3); equal points do not dominate each other
    assert run.non_dominated(points) == [0, 1, 3, 4, 6]
    assert run.non_dominated([(0.1, 10, 5, 100)]) == [0]
    assert run.non_dominated([(1, 1, 1, 1), (1, 1, 1, 2)]) == [0]  # smaller on one axis, equal on the rest
    assert run.non_dominated([]) == []


def test_fronts_leave_out_failed_and_unmeasured_configurations():
    configurations = [
        config(0, 0.02, 5000, 900, 600),
        config(1, 0.02, 4000, 800, 500),  # dominates 0
        config(2, 0.05, 3000, 800, 400),
        config(3, 0.01, 1000, 100, 100, verdict="fail"),  # would dominate all: its C is wrong
        config(4, 0.30, 2000, 850, None),  # not measured
        config(5, 0.40, 2500, 700, 450),
    ]
    assert run.front(configurations, run.AXES) == [1, 2, 5]
    fronts = run.fronts(configurations)
    assert fronts["quality/rom/ram/wcet_cycles"] == [1, 2, 5]
    assert fronts["quality/rom"] == [1, 2, 5]
    assert fronts["ram/wcet_cycles"] == [2, 5]
    assert fronts["rom/ram"] == [5]
    assert len(fronts) == 1 + 6  # all four axes and every pair


def test_budgets_mark_what_fits_and_its_own_front():
    settings = run.Settings(model="digits-cnn", steps=5, target="cortex-m4f", ram_limit=820, rom_limit=4500)
    configurations = [config(0, 0.02, 5000, 900, 600), config(1, 0.02, 4000, 800, 500),
                      config(2, 0.05, 3000, 850, 400), config(3, 0.10, 2000, 820, 450)]
    for c in configurations:
        c["fits"] = run.fits(c, settings)
    assert [c["fits"] for c in configurations] == [False, True, False, True]
    run.mark_pareto(configurations)
    assert [c["j"] for c in configurations if c["pareto"]] == [1, 2, 3]
    assert [c["j"] for c in configurations if c["pareto_fitting"]] == [1, 3]
    unknown = config(4, 0.1, None, None, None)
    assert run.fits(unknown, settings) is None
    assert run.fits(unknown, run.Settings(model="digits-cnn", steps=5, target="cortex-m4f")) is True


def test_sizes():
    assert run.parse_size("96k") == 98304 and run.parse_size("1M") == 1048576 and run.parse_size("4096") == 4096
    for bad in ("lots", "-1k", "0"):
        with pytest.raises(ConfigError, match="size"):
            run.parse_size(bad)


def test_bad_input_fails_before_anything_runs():
    with pytest.raises(ConfigError, match="explore needs a model trained on real data.*not 'lenet5'"):
        run.check(run.Settings(model="lenet5", steps=3, target="cortex-m4f"))
    with pytest.raises(ConfigError, match="--steps must be at least 1"):
        run.check(run.Settings(model="digits-cnn", steps=0, target="cortex-m4f"))
    with pytest.raises(ConfigError, match="target host does not run under QEMU"):
        run.check(run.Settings(model="digits-cnn", steps=3, target="host"))
    with pytest.raises(ConfigError, match="timing model arm7tdmi does not describe target cortex-m4f"):
        run.check(run.Settings(model="digits-cnn", steps=3, target="cortex-m4f", timing="arm7tdmi"))


def _document(configurations):
    run.mark_pareto(configurations)
    return {"schema": run.SCHEMA, "model": "digits-cnn", "metric": "error rate", "baseline_quality": 0.02,
            "threshold": 0.03,
            "settings": {"steps": 2, "target": "cortex-m4f", "opt": "-O0", "timing": "cortex-m4",
                         "generator": "assay-v2", "variant": "keras", "retrain_epochs": 0, "seed": 0,
                         "ram_limit": 850, "rom_limit": None},
            "sensitivities": [{"layer": "conv1", "units": 16, "p_max": 0.4, "sensitivity": 0.6, "dropped": True,
                               "qualities": [[0.1, 0.02]]},
                              {"layer": "dense1", "units": 64, "p_max": 0.9, "sensitivity": 0.1, "dropped": False,
                               "qualities": [[0.1, 0.02]]}],
            "p_init": {"conv1": 0.2, "dense1": 0.45}, "configurations": configurations,
            "fronts": run.fronts(configurations), "stages": {"met": {"command": ["assay", "met"], "exit": 0, "seconds": 12.3}},
            "seconds": {"total_s": 30.0, "per_configuration_s": 10.0, "sensitivity_s": 5.0, "pruning_s": 1.0,
                        "stages_s": 24.0}}


def test_report_from_explore_json(tmp_path):
    configurations = [config(0, 0.02, 5000, 900, 600), config(1, 0.0244, 4000, 800, 500),
                      config(2, 0.2, 3000, 700, 400, verdict="fail")]
    configurations[2]["causes"] = ["semantic vs keras: max error 1e-3 > tolerance"]
    for c in configurations:
        c["fits"] = c["ram"] <= 850
    document = _document(configurations)
    text = markdown(document)
    assert "| 1 * | 15 60 | 950 | 0.0244 | 4\u2009000 | 800 | 490 | 500 | pass | yes |" in text
    assert "| 0 * | 16 64 | 1\u2009000 | 0.0200 | 5\u2009000 | 900 | 590 | 600 | pass | no |" in text
    assert "| dense1 | 64 | 0.9 (never dropped) | 0.1 | 0.450 |" in text
    assert "- j=2: semantic vs keras: max error 1e-3 > tolerance" in text
    assert "- within the budgets (RAM 850 bytes): j=1" in text
    assert "- `assay met` (exit 0, 12 s)" in text
    (tmp_path / "explore.json").write_text(json.dumps(document))
    written = write_explore_report(tmp_path / "explore.json", tmp_path)
    assert [p.name for p in written] == ["pareto.md", "fronts.png", "sensitivities.png", "index.html"]
    assert all(p.stat().st_size > 0 for p in written)
    assert "data:image/png;base64," in (tmp_path / "index.html").read_text()
    (tmp_path / "other.json").write_text(json.dumps({"schema": "assay-met/1", "records": []}))
    with pytest.raises(AssayError, match="not an Assay assay-explore/1 file"):
        write_explore_report(tmp_path / "other.json", tmp_path)
