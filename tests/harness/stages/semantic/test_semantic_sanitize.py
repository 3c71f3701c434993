"""``assay semantic --sanitize N``: a memory fault the oracle cannot see becomes an ``error`` verdict with the
sanitizer's first line; clean generated code gives no report.

The faulty C is hand-written (the ``dir:`` prebuilt generator); the model, the references, gcc and the
sanitizers are real.
"""

import json
import os

from harness.core.results import ResultStore
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Correct outputs for Dense(3 -> 2) with the weights below, plus a read past a scratch buffer into a
# variable nobody reads: the outputs stay right and no guard word changes, so only the sanitizer can tell.
SOURCE = """
static float scratch[4];
void dense(const float *input, float *output) {
    const float *p = scratch;
    volatile float sink = p[EXTENT];
    (void)sink;
    output[0] = input[0] * 0.5f + input[1] * 0.25f + input[2] * -0.75f + 0.1f;
    output[1] = input[0] * -1.0f + input[1] * 2.0f + input[2] * 0.125f + -0.2f;
}
"""


def prebuilt(root, name, extent):
    directory = root / name
    directory.mkdir()
    (directory / "net.c").write_text(SOURCE.replace("EXTENT", str(extent)))
    (directory / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    return f"dir:{directory}"


def records(tmp_path, models, generator, sanitize, n_inputs=20):
    settings = campaign.Settings(n_inputs=n_inputs, work_dir=tmp_path / "work", sanitize=sanitize)
    store = ResultStore(tmp_path / f"results-{sanitize}.json")
    for item in campaign.plan(models, [generator], ["keras"], ["host"], settings).items:
        if item.variant != "onnx":  # the zoo's code from the Keras file is enough here
            campaign.run_item(item, settings, store)
    return store.records()


def test_a_write_past_a_buffer_passes_the_oracle_and_fails_under_the_sanitizers(tmp_path, dense_keras_model):
    generator = prebuilt(tmp_path, "overflow", 4)
    (plain,) = records(tmp_path, [dense_keras_model], generator, sanitize=0)
    assert plain["verdict"] == "pass" and "sanitizer" not in plain["provenance"]
    (checked,) = records(tmp_path, [dense_keras_model], generator, sanitize=5)
    assert checked["verdict"] == "error"
    assert checked["cause"].startswith("AddressSanitizer: global-buffer-overflow, READ of size 4 in dense at net.c:")


def test_the_same_code_in_bounds_passes_under_the_sanitizers(tmp_path, dense_keras_model):
    (record,) = records(tmp_path, [dense_keras_model], prebuilt(tmp_path, "inbounds", 3), sanitize=5)
    assert record["verdict"] == "pass", record["cause"]
    assert record["provenance"]["sanitizer"]["inputs"] == 5


def test_generated_code_of_the_zoo_gives_no_sanitizer_report(tmp_path):
    done = records(tmp_path, ["acas-reg50", "lenet5"], "assay-v2", sanitize=20)
    assert len(done) == 2
    for record in done:
        assert record["verdict"] == "pass", (record["model"], record["cause"])
        assert record["provenance"]["sanitizer"]["inputs"] == 20


def test_the_sample_is_seeded_and_within_the_campaign():
    from harness.stages.semantic.sanitize import sample

    first = sample(1000, 100, 3)
    assert list(first) == sorted(set(first)) and len(first) == 100 and first.max() < 1000
    assert list(first) == list(sample(1000, 100, 3)) and list(first) != list(sample(1000, 100, 4))
    assert len(sample(10, 100, 0)) == 10
