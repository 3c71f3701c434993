"""Requalification: a results tool that moved past tested.toml is a difference until ``assay evidence qualify``
has run the tests on exactly this configuration; then ``assay doctor`` accepts it and names the run, and the
evidence package's ``tested-configuration`` part passes only with that run's JUnit XML inside.

The move is faked by a tested.toml that says this machine's gcc was tested at another version (the real
``dpkg-query`` reads the real one); the qualification is a real pytest run, of a small selection here (the whole
selection runs in ``test_the_cli_cycle_with_the_whole_selection``, ``--run-slow``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import seal
from harness.cli import main
from harness.core import configuration, qualification
from harness.core import tested as tested_file
from harness.stages.evidence import sci, tor
from harness.stages.evidence.qualify import qualify

SMALL = "tests/harness/core/test_tested.py"
pytestmark = pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system")


def moved_gcc(tmp_path: Path) -> Path:
    """tested.toml with this distribution's gcc tested at a version that is not the installed one."""
    where = tested_file.distribution()
    description = tested_file.load()
    installed = tested_file.machine_versions(description, where)
    if "gcc" not in installed:
        pytest.skip("gcc is not installed from a Debian package here")
    versions = {**description.versions.get("debian 12", {}), **installed}
    versions["gcc"] = installed["gcc"] + "~not-this-one"
    text = tested_file.TESTED_FILE.read_text().split("\n[tested.")[0] + "\n"
    text += f'[tested."{where}"]\n' + "".join(f'"{name}" = "{version}"\n' for name, version in versions.items())
    path = tmp_path / "tested.toml"
    path.write_text(text)
    return path


def lock_here(tmp_path: Path) -> Path:
    installed = configuration.installed_distributions()
    path = tmp_path / "requirements.lock"
    path.write_text("".join(f"{name}=={version}\n" for name, version in sorted(installed.items())
                            if name not in configuration.NOT_LOCKED))
    return path


@pytest.fixture
def qualified_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_QUALIFIED_DIR", str(tmp_path / "qualified"))
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path / "peers"))
    return tmp_path / "qualified"


def gcc_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith("gcc:")]


@pytest.mark.tor("TOR-CFG-002")
def test_a_moved_results_tool_is_refused_until_a_qualification_run_passes_on_it(tmp_path, qualified_dir, capsys):
    tested, lock = moved_gcc(tmp_path), lock_here(tmp_path)
    assert main(["doctor", "--tested", str(tested), "--lock", str(lock)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(gcc_lines(out)) == 1 and "~not-this-one in " in gcc_lines(out)[0]
    assert any("no qualification record for this configuration: 'assay evidence qualify'" in line for line in out)

    record = qualify(SMALL, lock, tested, timeout=300, progress=lambda line: None)
    assert record["counts"]["passed"] >= 4 and record["counts"]["failed"] == 0
    assert (Path(record["folder"]) / "tor-matrix.json").is_file()

    differences, notes, found = configuration.compare(lock, tested, selection=SMALL)
    assert not [d for d in differences if d.component == "gcc"] and found["key"] == record["key"]
    (note,) = gcc_lines(notes)
    assert "qualified by 'assay evidence qualify' on " in note and record["key"] in note

    # an evidence package's run of the same tests on this configuration is that run, not a second one (doctor's
    # qualified_by), unless its JUnit XML changed since doctor accepted it or the package runs other tests
    qualified = {name: found[name] for name in ("key", "junit_sha256", "folder")}
    junit, run, seconds = tor.run_suite(SMALL, tmp_path / "cache", qualified=qualified)
    assert seconds is None and run["reused_from_qualification"] == record["key"] and run["returncode"] == 0
    assert junit.parent == Path(found["folder"]) and not (tmp_path / "cache").exists()  # no pytest ran
    text = junit.read_text()
    junit.write_text(text.replace("<testcase ", "<testcase x='1' ", 1))
    assert tor._qualification_run(qualified, run["content_key"]) is None
    junit.write_text(text)
    record_file = junit.with_name(qualification.RECORD)
    data = record_file.read_text()
    record_file.write_text(json.dumps({**json.loads(data), "returncode": 1}))  # the record edited, not sealed again
    assert tor._qualification_run(qualified, run["content_key"]) is None
    record_file.write_text(data)
    assert tor._qualification_run(qualified, run["content_key"]) is not None
    assert tor._qualification_run(qualified, run["content_key"][::-1]) is None

    # with nothing moved (every results package at its tested version) the record is this configuration's too
    same = tmp_path / "same.toml"
    same.write_text(tested.read_text().replace("~not-this-one", ""))
    _, notes, again = configuration.compare(lock, same, selection=SMALL)
    assert again["key"] == record["key"] and qualification.summary(again) in notes

    # the doctor's own selection is the whole qualification suite: a run of a few tests does not qualify
    differences, notes, found = configuration.compare(lock, tested)
    assert found is None and [d.component for d in differences if d.component == "gcc"] == ["gcc"]
    assert any("not the qualification tests" in n for n in notes)

    # another gcc is another configuration: the record does not cover it
    fingerprint = configuration.current_fingerprint(tested_file.load(tested), {"gcc": "4:99"},
                                                    tested_file.distribution(), lock)
    assert qualification.accepted(fingerprint, SMALL) == (None, None)


def accepted_record(tmp_path: Path) -> tuple[dict, dict]:
    tested, lock = moved_gcc(tmp_path), lock_here(tmp_path)
    record = qualify(SMALL, lock, tested, timeout=300, progress=lambda line: None)
    description = tested_file.load(tested)
    where = tested_file.distribution()
    fingerprint = configuration.current_fingerprint(description, tested_file.machine_versions(description, where),
                                                    where, lock)
    return record, fingerprint


@pytest.mark.tor("TOR-CFG-002")
def test_a_tampered_or_shared_record_is_refused_with_the_reason(tmp_path, qualified_dir):
    record, fingerprint = accepted_record(tmp_path)
    folder = Path(record["folder"])
    assert qualification.accepted(fingerprint, SMALL)[0] is not None

    junit = (folder / "junit.xml").read_text()
    (folder / "junit.xml").write_text(junit.replace("<testcase ", "<testcase x='1' ", 1))
    assert "does not match the SHA-256" in qualification.accepted(fingerprint, SMALL)[1]
    (folder / "junit.xml").write_text(junit)

    os.chmod(folder / "record.json", 0o666)
    assert "writable by other users" in qualification.accepted(fingerprint, SMALL)[1]
    os.chmod(folder / "record.json", 0o644)

    data = json.loads((folder / "record.json").read_text())
    (folder / "record.json").write_text(json.dumps({**data, "returncode": 1}))
    assert "not sealed by this user's Assay" in qualification.accepted(fingerprint, SMALL)[1]
    forged = {**data, "counts": {**data["counts"], "passed": 9999}}
    forged["seal"] = seal.seal((folder / "junit.xml").read_bytes(), {k: v for k, v in forged.items() if k != "seal"})
    (folder / "record.json").write_text(json.dumps(forged))  # sealed, yet the counts are recomputed from the XML
    assert qualification.accepted(fingerprint, SMALL)[0]["counts"]["passed"] == data["counts"]["passed"]


@pytest.mark.tor("TOR-CFG-002")
def test_the_evidence_part_passes_only_with_the_qualification_run_inside_the_package(tmp_path, qualified_dir):
    record, _ = accepted_record(tmp_path)
    doctor = {"verdict": "tested", "differences": [],
              "qualified_by": {"key": record["key"], "junit_sha256": record["junit_sha256"],
                               "summary": qualification.summary(record)}}
    junit = (Path(record["folder"]) / "junit.xml").read_bytes()
    inside = {sci.QUALIFICATION_JUNIT: junit}
    verdict, (note,) = sci.tested_configuration(doctor, inside.get)
    assert verdict == "pass" and record["key"] in note and "sci/qualification/" in note
    assert sci.tested_configuration(doctor, {}.get)[0] == "fail"
    forged = junit.replace(b"<testcase ", b"<testcase x='1' ", 1)
    assert sci.tested_configuration(doctor, {sci.QUALIFICATION_JUNIT: forged}.get)[0] == "fail"
    failing = {**doctor, "qualified_by": {**doctor["qualified_by"]}}
    bad = junit.replace(b"</testcase>", b"<failure message='x'/></testcase>", 1)
    failing["qualified_by"]["junit_sha256"] = hashlib.sha256(bad).hexdigest()
    assert sci.tested_configuration(failing, {sci.QUALIFICATION_JUNIT: bad}.get)[0] == "fail"


@pytest.mark.slow
@pytest.mark.tor("TOR-CFG-002")
def test_the_cli_cycle_with_the_whole_selection(tmp_path, qualified_dir):
    """doctor exits 1 naming gcc; ``assay evidence qualify`` runs the whole qualification selection; doctor exits 0
    and says which run qualified the configuration (several minutes: --run-slow)."""
    tested = moved_gcc(tmp_path)
    env = {**os.environ, "ASSAY_QUALIFIED_DIR": str(qualified_dir)}
    doctor = [sys.executable, "-m", "harness.cli", "doctor", "--tested", str(tested)]
    before = subprocess.run(doctor, capture_output=True, text=True, env=env, timeout=120)
    assert before.returncode == 1 and len(gcc_lines(before.stdout.splitlines())) == 1
    done = subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "qualify", "--tested", str(tested)],
                          capture_output=True, text=True, env=env, timeout=3600)
    assert done.returncode == 0, done.stderr[-2000:]
    after = subprocess.run(doctor, capture_output=True, text=True, env=env, timeout=120)
    assert after.returncode == 0, after.stdout
    assert "by its own qualification run" in after.stdout.splitlines()[-1]
    assert "qualified by 'assay evidence qualify'" in gcc_lines(
        [line.removeprefix("note: ") for line in after.stdout.splitlines()])[0]
