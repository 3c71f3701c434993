"""The sandbox's own rules (harness/sandbox.py, docs/sandbox.md): the fixed environment, the scratch folder
the only place a run writes and given back after it, a signal reported as one, the visible fallback, the
settings validated. Real bubblewrap, real processes; the hostile-code campaigns are in runners/test_hostile.py."""

from __future__ import annotations

import os

import pytest

from harness import sandbox
from harness.errors import ConfigError

needs_sandbox = pytest.mark.skipif(not sandbox.isolation().confined,
                                   reason=f"no sandbox on this machine: {sandbox.isolation().reason}")


def test_a_run_sees_only_the_fixed_environment_and_its_scratch_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_PRIVATE", "do not leak")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "beside.txt").write_text("private")
    done = sandbox.run(["sh", "-c", "env; cat ../beside.txt; echo made > made.txt"], scratch, 30,
                       env={"ASSAY_NEEDED": "1"}, capture_output=True, text=True)
    environment = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert "ASSAY_TEST_PRIVATE" not in environment and environment["ASSAY_NEEDED"] == "1"
    assert {key: environment[key] for key in ("LC_ALL", "TZ")} == {"LC_ALL": "C", "TZ": "UTC"}
    assert environment["HOME"] == str(scratch.resolve())
    assert (scratch / "made.txt").read_text() == "made\n"
    # whatever the run made is the user's again afterwards
    assert (scratch / "made.txt").stat().st_uid == scratch.stat().st_uid == os.geteuid()
    if sandbox.isolation().confined:
        assert "private" not in done.stdout and "No such file" in done.stderr


@needs_sandbox
def test_a_signal_that_ends_the_run_is_reported_as_a_signal(tmp_path):
    done = sandbox.run(["sh", "-c", "kill -SEGV $$"], tmp_path, 30, capture_output=True)
    assert done.returncode == -11


def test_without_a_sandbox_assay_says_so_once_and_records_it(monkeypatch, capsys):
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setattr(sandbox, "isolation", sandbox.isolation.__wrapped__)
    found = sandbox.isolation()
    assert found.sandbox == sandbox.NONE and found.reason == f"{sandbox.SWITCH}=off"
    assert capsys.readouterr().err == f"assay: {found.describe()}\n"
    record = found.record()
    assert record["sandbox"] == "none" and record["network"] == "the machine's"


def test_bad_settings_are_one_line_naming_the_file(tmp_path):
    path = tmp_path / "sandbox.toml"
    path.write_text('system = ["usr"]\n[limits]\nmemory_mib = 1\n[environment]\nLC_ALL = "C"\n')
    with pytest.raises(ConfigError) as caught:
        sandbox.settings(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert "absolute paths" in message and "[limits] must have exactly" in message


def test_the_shipped_settings_load():
    loaded = sandbox.settings()
    assert loaded.environment["LC_ALL"] == "C" and "/usr" in loaded.system
    assert loaded.memory_mib < 10 << 10  # the hostile 10 GiB allocation must not fit


def test_the_doctor_says_which_sandbox_and_its_absence_is_a_difference(monkeypatch):
    from harness.core import configuration

    found = sandbox.isolation()
    differences, notes = configuration.isolation()
    if found.confined:
        assert differences == [] and notes == [found.describe()]
        assert notes[0].startswith("sandbox: bubblewrap ")
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setattr(sandbox, "isolation", sandbox.isolation.__wrapped__)
    differences, notes = configuration.isolation()
    assert notes == [] and [str(d) for d in differences] == [
        f"sandbox: none ({sandbox.SWITCH}=off), bubblewrap in the tested configuration"]
