"""``assay doctor``: one line per difference, notes, the verdict and identity last; exit 0 only on the tested
configuration, 1 otherwise, 2 for a tested configuration it cannot read."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

from harness.cli import main
from harness.core import configuration

RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def tested_here(tmp_path, monkeypatch):
    """(lock, tested.toml) of this very environment, no Debian package; no peer or plugin built."""
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path / "peers"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    installed = configuration.installed_distributions()
    lock = tmp_path / "requirements.lock"
    lock.write_text("".join(f"{name}=={version}\n" for name, version in sorted(installed.items())
                            if name not in configuration.NOT_LOCKED))
    tested = tmp_path / "tested.toml"
    tested.write_text(f'[python]\nversions = ["{RUNNING}"]\nplatform = "{sys.platform} {platform.machine()}"\n'
                      '[packages]\n[tested]\n')
    return lock, tested


@pytest.mark.tor("TOR-CFG-001")
def test_tested_configuration_exits_0_with_notes_and_the_identity_last(tested_here, capsys):
    lock, tested = tested_here
    assert main(["doctor", "--lock", str(lock), "--tested", str(tested)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("note: ") for line in lines[:-1]) and any("QEMU counting plugin" in line for line in lines)
    assert lines[-1].startswith("tested configuration (0 differences); Assay ")
    assert "requirements.lock sha256 " in lines[-1]


@pytest.mark.tor("TOR-CFG-001")
def test_one_changed_version_is_one_line_and_exit_1(tested_here, capsys):
    lock, tested = tested_here
    name, version = next(line.split("==") for line in lock.read_text().splitlines())
    lock.write_text(lock.read_text().replace(f"{name}=={version}\n", f"{name}==0.0.1\n"))
    assert main(["doctor", "--lock", str(lock), "--tested", str(tested)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if not line.startswith("note: ")][:-1] == [
        f"{name}: {version} installed, 0.0.1 in {lock}"]
    assert lines[-1].startswith("untested configuration (1 difference); Assay ")

    assert main(["doctor", "--json", "--lock", str(lock), "--tested", str(tested)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == "assay-doctor/1" and report["verdict"] == "untested"
    assert report["differences"] == [f"{name}: {version} installed, 0.0.1 in {lock}"]
    assert set(report["assay"]) == {"version", "commit", "dirty", "sources_sha256", "requirements_lock_sha256"}
    assert report["qualified_by"] is None


@pytest.mark.tor("TOR-CFG-001")
def test_a_malformed_tested_toml_is_one_line_and_exit_2(tmp_path):
    tested = tmp_path / "tested.toml"
    tested.write_text('[python]\nversions = ["3.11"]\n[packages]\n[tested]\n')
    result = subprocess.run([sys.executable, "-m", "harness.cli", "doctor", "--tested", str(tested)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"assay: error: {tested}: key 'python.platform' must be a non-empty string"


def test_the_real_command_agrees_with_the_report_and_help_says_what_is_compared():
    result = subprocess.run([sys.executable, "-m", "harness.cli", "doctor", "--json"], capture_output=True,
                            text=True, timeout=120)
    report = json.loads(result.stdout)
    assert result.returncode == (0 if report["verdict"] == "tested" else 1) == (1 if report["differences"] else 0)
    described = subprocess.run([sys.executable, "-m", "harness.cli", "doctor", "--help"], capture_output=True,
                               text=True, timeout=120).stdout
    for words in ("requirements.lock", "toolchains/tested.toml", "dpkg-query", "peer", "Exit status"):
        assert words in described
