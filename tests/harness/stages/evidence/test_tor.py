"""Tool qualification data: every requirement of docs/tor.md has a test and every test's ID is a requirement;
the TOR matrix gives pass, fail, not run and missing from a real pytest run's JUnit XML."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.stages.evidence import tor

pytest_plugins = ["pytester"]


@pytest.mark.tor("TOR-EVD-006")
def test_every_requirement_has_a_test_and_every_tagged_id_is_a_requirement():
    ids = [r["id"] for r in tor.requirements()]
    assert len(ids) >= 30 and all(tor.ID.match(i) for i in ids)
    tagged = {i for found in tor.source_tags().values() for i in found}
    assert sorted(set(ids) - tagged) == [], "requirements without a test"
    assert sorted(tagged - set(ids)) == [], "tests naming an ID that docs/tor.md does not have"


DOCUMENT = """# TOR
### TOR-ABC-001 Passes
### TOR-ABC-002 Fails
### TOR-ABC-003 Only skipped
### TOR-ABC-004 No test
"""

TESTS = """
import pytest

@pytest.mark.tor("TOR-ABC-001")
def test_ok():
    assert True

@pytest.mark.tor("TOR-ABC-001", "TOR-ABC-002")
@pytest.mark.parametrize("n", [1, 2])
def test_half(n):
    assert n == 1

@pytest.mark.tor("TOR-ABC-003")
def test_skipped():
    pytest.skip("not here")

@pytest.mark.tor("TOR-XYZ-009")
def test_unknown():
    assert True
"""


@pytest.mark.tor("TOR-EVD-006")
def test_matrix_from_a_junit_run(pytester, tmp_path):
    pytester.makepyfile(test_abc=TESTS)
    document = tmp_path / "tor.md"
    document.write_text(DOCUMENT)
    junit = tmp_path / "junit.xml"
    pytester.runpytest(f"--junitxml={junit}").assert_outcomes(passed=3, failed=1, skipped=1)
    result = tor.write(junit, tmp_path / "out", {"command": "pytest"}, document, pytester.path)
    status = {row["id"]: row["status"] for row in result["rows"]}
    assert status == {"TOR-ABC-001": "fail", "TOR-ABC-002": "fail", "TOR-ABC-003": "not run",
                      "TOR-ABC-004": "missing"}
    assert result["schema"] == "assay-tor-matrix/1" and result["verdict"] == "fail"
    assert result["unknown_ids"] == ["TOR-XYZ-009"]
    assert result["counts"] == {"pass": 0, "fail": 2, "not run": 1, "missing": 1}
    (row,) = [r for r in result["rows"] if r["id"] == "TOR-ABC-001"]
    assert sorted(r["outcome"] for r in row["results"]) == ["failed", "passed", "passed"]
    markdown = (tmp_path / "out" / "tor-matrix.md").read_text()
    assert "| TOR-ABC-004 | No test | missing |" in markdown and "test_half[2]" in markdown
    assert json.loads((tmp_path / "out" / "tor-matrix.json").read_text()) == result

    # without the failing case every run requirement passes; the ones not run keep the verdict incomplete
    pytester.runpytest(f"--junitxml={junit}", "-k", "not test_half").assert_outcomes(passed=2, skipped=1)
    again = tor.matrix(tor.requirements(document), tor.junit_cases(junit), tor.source_tags(pytester.path), {})
    assert [row["status"] for row in again["rows"]] == ["pass", "not run", "not run", "missing"]
    assert again["verdict"] == "incomplete"


@pytest.mark.tor("TOR-EVD-002", "TOR-EVD-006")
def test_normalised_junit_is_the_same_for_the_same_results(pytester, tmp_path):
    pytester.makepyfile(test_abc=TESTS)
    copies = []
    for n in range(2):
        pytester.runpytest(f"--junitxml={tmp_path / f'j{n}.xml'}", "-p", "no:randomly")
        copies.append(tor.normalise_junit(tmp_path / f"j{n}.xml", tmp_path / f"n{n}.xml").read_bytes())
    assert (tmp_path / "j0.xml").read_bytes() != (tmp_path / "j1.xml").read_bytes()  # dates and durations
    assert copies[0] == copies[1] and b"timestamp" not in copies[0]
    assert [c["test"] for c in tor.junit_cases(tmp_path / "n0.xml")] == sorted(
        c["test"] for c in tor.junit_cases(tmp_path / "j0.xml"))


@pytest.mark.tor("TOR-EVD-006", "TOR-CLI-001")
def test_tor_matrix_command(tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text('<?xml version="1.0"?><testsuites><testsuite name="pytest">'
                     '<testcase classname="tests.test_x" name="test_a"><properties>'
                     '<property name="tor" value="TOR-SEM-001"/></properties></testcase>'
                     '</testsuite></testsuites>')
    done = subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "tor-matrix", "--junit", str(junit),
                           "--out", str(tmp_path / "m")], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr  # one requirement passes, the others were not run
    matrix = json.loads((tmp_path / "m" / "tor-matrix.json").read_text())
    assert next(r for r in matrix["rows"] if r["id"] == "TOR-SEM-001")["status"] == "pass"
    assert "TOR-SEM-001" in done.stdout and "incomplete" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "tor-matrix", "--junit",
                          str(tmp_path / "none.xml"), "--out", str(tmp_path / "m")], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
