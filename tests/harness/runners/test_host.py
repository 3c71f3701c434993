"""The host runner builds and runs real C, and turns faults into RunError causes."""

import json

import numpy as np
import pytest

from harness.generators.generated import GeneratedCode
from harness.runners import host

SCALE = """
void scale(const float *input, float *output) {
    for (int i = 0; i < 3; ++i) output[i] = 2.0f * input[i] + (float)i;
}
"""


def prebuilt(tmp_path, body, name="net"):
    directory = tmp_path / name
    directory.mkdir()
    (directory / "net.c").write_text(body)
    (directory / "assay.json").write_text(json.dumps({"entry": "scale", "input_size": 3, "output_size": 3}))
    return GeneratedCode.from_directory(directory)


def test_runs_a_batch_and_returns_outputs_in_order(tmp_path):
    code = prebuilt(tmp_path, SCALE)
    inputs = np.arange(12, dtype=np.float32).reshape(4, 3)
    outcome = host.run(host.build(code, tmp_path / "build"), inputs)
    np.testing.assert_array_equal(outcome.outputs, 2 * inputs + np.arange(3, dtype=np.float32))
    assert outcome.c_seconds <= outcome.wall_seconds


def test_identical_rebuild_is_reused_and_a_changed_source_rebuilds(tmp_path):
    code = prebuilt(tmp_path, SCALE)
    first = host.build(code, tmp_path / "build")
    mtime = first.library.stat().st_mtime_ns
    assert host.build(code, tmp_path / "build").library.stat().st_mtime_ns == mtime
    (code.directory / "net.c").write_text(SCALE.replace("2.0f", "3.0f"))
    rebuilt = host.build(code, tmp_path / "build")
    outputs = host.run(rebuilt, np.ones((1, 3), np.float32)).outputs
    np.testing.assert_array_equal(outputs, [[3.0, 4.0, 5.0]])


@pytest.mark.tor("TOR-SEM-004")
def test_segfault_becomes_a_cause_not_a_harness_crash(tmp_path):
    code = prebuilt(tmp_path, "void scale(const float *i, float *o) { (void)i; (void)o; *(volatile int *)0 = 1; }")
    with pytest.raises(host.RunError, match="crashed with SIGSEGV"):
        host.run(host.build(code, tmp_path / "build"), np.zeros((2, 3), np.float32))


@pytest.mark.tor("TOR-SEM-004")
def test_hang_is_stopped_by_the_timeout(tmp_path):
    code = prebuilt(tmp_path, "void scale(const float *i, float *o) { (void)i; (void)o; for (;;) {} }")
    with pytest.raises(host.RunError, match="timed out after 2 s"):
        host.run(host.build(code, tmp_path / "build"), np.zeros((1, 3), np.float32), timeout=2)


@pytest.mark.tor("TOR-SEM-004")
def test_compile_error_names_the_first_diagnostic(tmp_path):
    code = prebuilt(tmp_path, "void scale(const float *i, float *o) { undeclared_thing = 1; }")
    with pytest.raises(host.RunError, match=r"compile error: .*net\.c:1:.*undeclared_thing"):
        host.build(code, tmp_path / "build")


def test_wrong_input_width_is_refused(tmp_path):
    code = prebuilt(tmp_path, SCALE)
    with pytest.raises(host.RunError, match="expects 3"):
        host.run(host.build(code, tmp_path / "build"), np.zeros((2, 4), np.float32))


@pytest.mark.tor("TOR-SEM-004")
def test_link_error_names_the_missing_symbol(tmp_path):
    code = prebuilt(tmp_path, "void helper(void); void scale(const float *i, float *o) { (void)i; (void)o; helper(); }")
    with pytest.raises(host.RunError, match="undefined reference to `helper'"):
        host.build(code, tmp_path / "build")
