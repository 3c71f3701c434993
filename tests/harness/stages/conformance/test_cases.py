"""The conformance cases are deterministic: the same case and seed give the same ``.keras`` bytes, in another
process too (Keras writes object ids into the config; the deterministic save renumbers them)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.stages.conformance import cases as conformance_cases

WORKTREE = Path(__file__).resolve().parents[4]
SAMPLE = ["dense_deep", "add_dense", "batchnorm_conv"]  # several layers sharing the float32 dtype policy


def test_same_case_same_bytes_in_another_process(tmp_path):
    cases = conformance_cases.select(SAMPLE)
    here = conformance_cases.build_all(cases, tmp_path / "a")
    script = (f"from pathlib import Path; from harness.stages.conformance import cases as c; "
              f"c.build_all(c.select({SAMPLE!r}), Path({str(tmp_path / 'b')!r}))")
    subprocess.run([sys.executable, "-c", script], cwd=WORKTREE, check=True, timeout=300)
    for name, path in here.items():
        other = tmp_path / "b" / path.relative_to(tmp_path / "a")
        assert other.read_bytes() == path.read_bytes(), name
    other_seed = conformance_cases.build(cases[0], tmp_path / "c", seed=1)
    assert other_seed.read_bytes() != here[cases[0].name].read_bytes()


def test_cached_file_is_reused(tmp_path):
    case = conformance_cases.select(["dense"])[0]
    first = conformance_cases.build(case, tmp_path)
    stamp = first.stat().st_mtime_ns
    assert conformance_cases.build(case, tmp_path) == first and first.stat().st_mtime_ns == stamp
    assert first.name == "dense.keras"  # the file's stem is the model's name in every report


def test_weights_are_seeded_and_batch_norm_is_not_the_identity():
    case = conformance_cases.select(["batchnorm_dense"])[0]
    first, second = (conformance_cases.keras_model(case) for _ in range(2))
    for a, b in zip(first.weights, second.weights):
        assert (a.numpy() == b.numpy()).all(), a.path
    variance = next(w for w in first.weights if w.path.endswith("moving_variance")).numpy()
    assert (variance >= 0.5).all() and not (variance == 1.0).all()


def test_selection_by_pattern():
    names = [case.name for case in conformance_cases.select(["dense*", "conv_same_k3*"])]
    assert names == ["dense", "dense_nobias", "dense_deep", "dense_single_in", "conv_same_k3_s1", "conv_same_k3_s2",
                     "conv_same_k3_s2_odd"]
    assert len(conformance_cases.select(None)) == len(conformance_cases.CASES)
    with pytest.raises(ConfigError, match="no conformance case matches 'nothing\\*'"):
        conformance_cases.select(["dense", "nothing*"])


def test_names_are_unique_and_cover_the_options():
    names = conformance_cases.names()
    assert len(names) == len(set(names))
    layers = {cls for case in conformance_cases.CASES for branch in (case.layers, *case.branches)
              for cls, _ in branch} | {case.merge[0] for case in conformance_cases.CASES if case.merge}
    assert {"Conv2D", "MaxPooling2D", "AveragePooling2D", "BatchNormalization", "Add", "Concatenate", "Flatten",
            "Dense", "ZeroPadding2D", "LeakyReLU", "Softmax"} <= layers
    paddings = {(args["padding"], args["kernel_size"][0] % 2) for case in conformance_cases.CASES
                for cls, args in case.layers + sum(case.branches, ()) if cls == "Conv2D"}
    assert {("same", 0), ("same", 1), ("valid", 0), ("valid", 1)} <= paddings
