"""``assay semantic --sanitize N`` (default 16): a memory fault the oracle cannot see becomes an ``error`` verdict
with the sanitizer's (or the arena-region check's) first line; clean generated code gives no report; ``--sanitize 0``
turns the checks off, visibly.

The faulty C is hand-written (the ``dir:`` prebuilt generator); the model, the references, gcc and the
sanitizers are real.
"""

import json
import os
import subprocess
import sys

from harness.core.results import ResultStore
from harness.stages.semantic import run as campaign
from harness.stages.semantic import sanitize

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
    assert plain["verdict"] == "pass" and plain["provenance"]["sanitizer"] == sanitize.OFF
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


# The same outputs, plus a write one past a buffer of 4 floats from malloc: nothing reads it, no guard word is near
# it, and it lands in the allocation's own padding (glibc gives at least 24 bytes), so the outputs stay right.
WRITE_PAST = """#include <stdlib.h>
static volatile int extent = 4;
void dense(const float *input, float *output) {
    float *scratch = malloc(4 * sizeof(float));
    scratch[extent] = input[0];
    free(scratch);
    output[0] = input[0] * 0.5f + input[1] * 0.25f + input[2] * -0.75f + 0.1f;
    output[1] = input[0] * -1.0f + input[1] * 2.0f + input[2] * 0.125f + -0.2f;
}
"""


def assay(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, timeout=600)


def test_a_default_run_fails_an_out_of_bounds_write_that_leaves_the_outputs_unchanged(tmp_path, dense_keras_model):
    """Issue 40: memory checks by default. The write changes no output (``--sanitize 0`` passes it), yet a default
    ``assay semantic`` fails it, with one line naming the sanitizer's report."""
    directory = tmp_path / "writer"
    directory.mkdir()
    (directory / "net.c").write_text(WRITE_PAST)
    (directory / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
    common = ("semantic", "--models", dense_keras_model, "--generators", f"dir:{directory}", "--references", "keras",
              "--inputs", "20", "--quiet", "--work", str(tmp_path / "work"))
    off = assay(*common, "--sanitize", "0", "--out", str(tmp_path / "off"))
    assert off.returncode == 0, off.stderr
    assert "memory checks off (--sanitize 0)" in off.stderr
    assert "Memory checks: off (--sanitize 0) for" in (tmp_path / "off" / "table1.md").read_text()
    default = assay(*common, "--out", str(tmp_path / "default"))
    assert default.returncode == 1
    lines = [line for line in default.stderr.splitlines() if "Sanitizer" in line]
    assert len(lines) == 1 and lines[0].endswith(" vs keras: error: AddressSanitizer: heap-buffer-overflow, "
                                                 "WRITE of size 4 in dense at net.c:5"), default.stderr
    (record,) = ResultStore(tmp_path / "default" / "results.json").records()
    assert record["provenance"]["sanitizer"]["inputs"] == 16
    assert "16 seeded inputs of each host item run again" in (tmp_path / "default" / "table1.md").read_text()


# A layer writing one float past its output, into the arena's padding: inside the array (no sanitizer report),
# read by nothing (the outputs are right). The manifest places the two layers and the arena.
ARENA_C = """static float arena[8];
void dense(const float *input, float *output) {
    arena[0] = input[0] * 0.5f + input[1] * 0.25f + input[2] * -0.75f + 0.1f;
    arena[1] = input[0] * -1.0f + input[1] * 2.0f + input[2] * 0.125f + -0.2f;
    STRAY
    output[0] = arena[0];
    output[1] = arena[1];
}
"""


def arena_code(root, stray: int | None) -> str:
    """The code, with ``arena[stray] = 1.0f;`` on its fifth line (None: a comment there)."""
    directory = root / f"arena{stray}"
    directory.mkdir()
    (directory / "net.c").write_text(ARENA_C.replace("STRAY", "/* none */" if stray is None else
                                                     f"arena[{stray}] = 1.0f;"))
    tensor = {"layout": "C", "dtype": "float32"}
    manifest = {"entry": {"symbol": "dense", "file": "net.c"}, "sources": ["net.c"],
                "inputs": [{"name": "x", "shape": [3], "size": 3, **tensor}],
                "outputs": [{"name": "y", "shape": [2], "size": 2, **tensor}],
                "arena": {"symbol": "arena", "floats": 8},
                "layers": [{"index": 0, "file": "net.c", "lines": [3, 5], "inputs": [None],
                            "output": {"symbol": "arena", "offset": 0, "size": 2}},
                           {"index": 1, "file": "net.c", "lines": [6, 7], "inputs": [0],
                            "output": {"symbol": "output", "offset": 0, "size": 2}}]}
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return f"dir:{directory}"


def test_the_arena_check_sees_a_write_into_arena_padding_that_no_sanitizer_sees(tmp_path, dense_keras_model):
    (clean,) = records(tmp_path, [dense_keras_model], arena_code(tmp_path, None), sanitize=16)
    assert clean["verdict"] == "pass", clean["cause"]
    assert clean["provenance"]["sanitizer"]["arena_check"] is True
    (stray,) = records(tmp_path / "stray", [dense_keras_model], arena_code(tmp_path, 5), sanitize=16)
    assert stray["verdict"] == "error"
    assert stray["cause"] == "arena check: arena float 5 (no live tensor) written by layer 0 (outside its output)"


def test_the_sample_is_seeded_and_within_the_campaign():
    from harness.stages.semantic.sanitize import sample

    first = sample(1000, 100, 3)
    assert list(first) == sorted(set(first)) and len(first) == 100 and first.max() < 1000
    assert list(first) == list(sample(1000, 100, 3)) and list(first) != list(sample(1000, 100, 4))
    assert len(sample(10, 100, 0)) == 10
