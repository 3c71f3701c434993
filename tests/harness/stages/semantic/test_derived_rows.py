"""The inputs the default (derived) verdict judges (``run.derived_rows``, issue 40 item 4): a seeded sample of
``--derived-inputs``, and every input some reference's fixed tolerance does not pass, so that no input the fixed
rule would fail escapes the rule that decides. Real model (acas-reg50), real Keras and ONNX Runtime outputs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.core.plan import load_model
from harness.core.refcache import reference_outputs
from harness.stages.semantic import run as campaign
from harness.stages.semantic import sanitize


def test_the_judged_inputs_are_the_seeded_sample_and_every_input_outside_the_fixed_tolerance(tmp_path):
    settings = campaign.Settings(n_inputs=300, derived_inputs=10, seed=4, work_dir=tmp_path / "work")
    model = load_model("acas-reg50", settings)
    item = campaign.plan(["acas-reg50"], ["assay-v2"], ["keras", "onnxruntime"], ["host"], settings).items[0]
    outputs = reference_outputs("keras", model, settings).copy()
    sample = sanitize.sample(300, 10, 4)
    outside = [k for k in (7, 150, 299) if k not in sample]
    outputs[outside[0], 0] += 1e-3  # outside atol 1e-5 for both references
    outputs[outside[1], 2] = np.nan  # NaN is never within a tolerance
    rows = campaign.derived_rows(item, model, settings, outputs)
    assert list(rows[:10]) == list(sample) and sorted(rows[10:]) == sorted(outside[:2])
    assert len(set(rows)) == len(rows)
    for count in (0, 300):  # 0: every input; N at least the campaign's size: every input too
        everything = campaign.derived_rows(item, model, replace(settings, derived_inputs=count), outputs)
        assert list(everything) == list(range(300))
