"""Tool qualification data: every requirement of docs/tor.md has a test and every test's ID is a requirement;
the TOR matrix gives pass, fail, incomplete, not run and missing from a real pytest run's JUnit XML, refuses a file
that is not a run of Assay's suite and says unverified of a file it did not produce (issue 24, D8)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
    result = tor.write(junit, tmp_path / "out", {"command": "pytest"}, document, pytester.path, pytester.path)
    status = {row["id"]: row["status"] for row in result["rows"]}
    assert status == {"TOR-ABC-001": "fail", "TOR-ABC-002": "fail", "TOR-ABC-003": "not run",
                      "TOR-ABC-004": "missing"}
    assert result["schema"] == "assay-tor-matrix/2" and result["verdict"] == "fail"
    assert result["unknown_ids"] == ["TOR-XYZ-009"]
    assert result["counts"] == {"pass": 0, "fail": 2, "incomplete": 0, "not run": 1, "missing": 1}
    (row,) = [r for r in result["rows"] if r["id"] == "TOR-ABC-001"]
    assert sorted(r["outcome"] for r in row["results"]) == ["failed", "passed", "passed"]
    markdown = (tmp_path / "out" / "tor-matrix.md").read_text()
    assert "| TOR-ABC-004 | No test | missing |" in markdown and "test_half[2]" in markdown
    assert json.loads((tmp_path / "out" / "tor-matrix.json").read_text()) == result

    # the failing case deselected: TOR-ABC-001's other test passed, but one of its tests did not run
    pytester.runpytest(f"--junitxml={junit}", "-k", "not test_half", *tor.PLUGIN_ARGUMENTS).assert_outcomes(
        passed=2, skipped=1)  # as a qualification run loads plugins: these only
    tags = tor.source_tags(pytester.path, pytester.path)
    again = tor.matrix(tor.requirements(document), tor.resolve(tor.junit_cases(junit), tags), tags, {},
                       tor.junit_plugins(junit))
    assert [row["status"] for row in again["rows"]] == ["incomplete", "not run", "not run", "missing"]
    assert again["rows"][0]["not_run"] == ["test_abc.py::test_half"] and again["verdict"] == "incomplete"


PARAMETRISED = """
import pytest

@pytest.mark.tor("TOR-ABC-001")
@pytest.mark.parametrize("n", [1, 2, 3])
def test_three(n):
    assert n > 0
"""


@pytest.mark.tor("TOR-EVD-006")
def test_a_partly_deselected_parametrised_test_leaves_its_requirement_incomplete(pytester, tmp_path):
    """B5 of issue 39: ``-k`` kept one case of a three-case test and the matrix, counting test functions, said
    pass. Counted against the suite's cases (``cases_in_suite``, what ``run_suite`` collects), it is incomplete."""
    pytester.makepyfile(test_abc=PARAMETRISED)
    document = tmp_path / "tor.md"
    document.write_text(DOCUMENT)
    junit = tmp_path / "junit.xml"
    pytester.runpytest(f"--junitxml={junit}", "-k", "1").assert_outcomes(passed=1)
    tags = tor.source_tags(pytester.path, pytester.path)
    cases = tor.resolve(tor.junit_cases(junit), tags)
    suite = [f"test_abc.py::test_three[{n}]" for n in (1, 2, 3)]
    old = tor.matrix(tor.requirements(document), cases, tags, {})
    assert old["rows"][0]["status"] == "pass"  # the old count: the function ran and passed
    new = tor.matrix(tor.requirements(document), cases, tags, {"cases_in_suite": suite})
    assert new["rows"][0]["status"] == "incomplete" and new["rows"][0]["cases"] == 3
    assert new["rows"][0]["cases_not_run"] == suite[1:]
    pytester.runpytest(f"--junitxml={junit}").assert_outcomes(passed=3)
    whole = tor.matrix(tor.requirements(document), tor.resolve(tor.junit_cases(junit), tags), tags,
                       {"cases_in_suite": suite})
    assert whole["rows"][0]["status"] == "pass" and whole["rows"][0]["cases_not_run"] == []


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


def junit_of(cases: dict[str, tuple[str, list[str]]], plugins: tuple[str, ...] = tor.PLUGINS) -> str:
    """A JUnit XML file as pytest writes it with Assay's plugin: ``{"tests/x/test_y.py::test_z[1]": (outcome,
    [TOR IDs])}``, and the plugins the run loaded."""
    body = []
    for test, (outcome, ids) in cases.items():
        path, name = test.split("::")
        result = {"passed": "", "skipped": '<skipped message="skipped"/>', "failed": '<failure message="boom"/>'}
        properties = "".join(f'<property name="tor" value="{i}"/>' for i in ids)
        body.append(f'<testcase classname="{path.removesuffix(".py").replace("/", ".")}" name="{name}">'
                    f'<properties>{properties}</properties>{result[outcome]}</testcase>')
    suite = f'<properties><property name="plugins" value="{" ".join(plugins)}"/></properties>'
    return (f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{suite}{"".join(body)}</testsuite>'
            f'</testsuites>')


def matrix_command(junit, out, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "tor-matrix", "--junit", str(junit),
                           "--out", str(out), *extra], capture_output=True, text=True)


@pytest.mark.tor("TOR-EVD-006")
def test_a_requirement_passes_only_when_every_test_carrying_it_ran_and_passed(tmp_path):
    """D8: TOR-WCET-001 with 2 tests passed and the others skipped, TOR-EVD-002 with its rebuild test deselected."""
    tags = tor.source_tags()
    wcet = sorted(t for t, ids in tags.items() if "TOR-WCET-001" in ids)
    rebuild = ("tests/harness/stages/evidence/test_evidence_command.py::"
               "test_evidence_package_for_acas_reg50_on_cortex_m4f")
    assert len(wcet) >= 3 and "TOR-EVD-002" in tags[rebuild]
    run = {test: ("skipped" if test in wcet[2:] else "passed", ids) for test, ids in tags.items() if test != rebuild}
    # one case of a parametrized test passed, another skipped: every test of TOR-EVD-006 ran, not every case
    partly = "tests/harness/stages/evidence/test_tor.py::test_matrix_from_a_junit_run"
    run.update({f"{partly}[a]": run.pop(partly), f"{partly}[b]": ("skipped", tags[partly])})
    (tmp_path / "junit.xml").write_text(junit_of(run))
    result = tor.write(tmp_path / "junit.xml", tmp_path / "out", {"command": "pytest"})
    status = {row["id"]: row for row in result["rows"]}
    assert status["TOR-WCET-001"]["status"] == "incomplete" and status["TOR-WCET-001"]["not_run"] == wcet[2:]
    assert status["TOR-EVD-002"]["status"] == "incomplete" and status["TOR-EVD-002"]["not_run"] == [rebuild]
    assert status["TOR-EVD-006"]["status"] == "incomplete" and status["TOR-EVD-006"]["not_run"] == []
    assert status["TOR-SEM-001"]["status"] == "pass" and result["verdict"] == "incomplete"
    assert "| TOR-WCET-001 | The WCET bound is at least every measured execution | incomplete | " \
           f"2/0/{len(wcet) - 2} | {len(wcet)} | {len(wcet) - 2} |" in (tmp_path / "out" / "tor-matrix.md").read_text()
    everything = {test: ("passed", ids) for test, ids in tags.items()}
    (tmp_path / "all.xml").write_text(junit_of(everything))
    assert tor.write(tmp_path / "all.xml", tmp_path / "out", {"command": "pytest"})["verdict"] == "pass"


@pytest.mark.tor("TOR-EVD-006", "TOR-CLI-001")
def test_a_junit_file_that_is_not_a_run_of_assays_suite_is_refused_in_one_line(tmp_path):
    """D8: one fake test case carrying every requirement; a real test carrying requirements its marker does not."""
    every = [r["id"] for r in tor.requirements()]
    (tmp_path / "fake.xml").write_text(junit_of({"tests/test_fake.py::test_everything": ("passed", every)}))
    done = matrix_command(tmp_path / "fake.xml", tmp_path / "m", "--accept-unverified")
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"assay: error: {tmp_path / 'fake.xml'}: 1 test case(s) are not tests of Assay's suite (first: "
        "tests/test_fake.py::test_everything): not a run of Assay's own tests, refused"]
    real = "tests/harness/stages/evidence/test_tor.py::test_matrix_from_a_junit_run"
    (tmp_path / "borrowed.xml").write_text(junit_of({real: ("passed", every)}))
    done = matrix_command(tmp_path / "borrowed.xml", tmp_path / "m")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert f"{real} carries the requirements TOR-ARC-001" in done.stderr and "marker in the source says TOR-EVD-006" \
        in done.stderr
    bad = matrix_command(tmp_path / "none.xml", tmp_path / "m")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


@pytest.mark.tor("TOR-EVD-006", "TOR-CLI-001")
def test_a_given_junit_file_is_unverified_unless_accepted(tmp_path):
    tags = tor.source_tags()
    (tmp_path / "junit.xml").write_text(junit_of({test: ("passed", ids) for test, ids in tags.items()}))
    done = matrix_command(tmp_path / "junit.xml", tmp_path / "m")
    assert done.returncode == 1, done.stderr  # every requirement passed in the file, but this run did not run them
    matrix = json.loads((tmp_path / "m" / "tor-matrix.json").read_text())
    assert (matrix["verdict"], matrix["results_verdict"], matrix["verified"]) == ("unverified", "pass", False)
    assert "verdict unverified: the JUnit XML was given, not produced by this run, so its results (pass) are not " \
           "evidence" in done.stdout.splitlines()[-1]
    assert "verdict **unverified**" in (tmp_path / "m" / "tor-matrix.md").read_text()
    accepted = matrix_command(tmp_path / "junit.xml", tmp_path / "m", "--accept-unverified")
    assert accepted.returncode == 0 and "accepted as given (--accept-unverified)" in accepted.stdout
    # a requirement that did not pass in the file: the acceptance does not make it pass
    one = "tests/harness/stages/evidence/test_tor.py::test_matrix_from_a_junit_run"
    (tmp_path / "one.xml").write_text(junit_of({one: ("passed", tags[one])}))
    partial = matrix_command(tmp_path / "one.xml", tmp_path / "m", "--accept-unverified")
    assert partial.returncode == 1 and "TOR-EVD-006: incomplete" in partial.stdout


@pytest.mark.tor("TOR-EVD-006")
@pytest.mark.parametrize("relative", [False, True], ids=["absolute-cache", "relative-cache"])
def test_the_suite_runs_from_a_folder_outside_assays_tree_and_the_run_names_the_assay_it_verified(
        relative, tmp_path, monkeypatch):
    """A real run of two of Assay's test modules (a few seconds), one test deselected by node id; its cache given
    as an absolute folder, and as a relative one (``assay evidence``'s default work folder, ``generated``: the
    JUnit XML must land there, not below the folder pytest runs in)."""
    from harness.core import configuration

    monkeypatch.chdir(tmp_path)
    deselected = "tests/harness/stages/evidence/test_kit.py::test_an_unknown_level_is_refused"
    cache = Path("tor-cache") if relative else tmp_path / "tor-cache"
    junit, run, seconds = tor.run_suite(f"tests/harness/stages/evidence/test_kit.py -m 'not slow' --deselect "
                                        f"{deselected}", cache)
    assert seconds is not None and run["returncode"] == 0 and junit.is_relative_to(tmp_path)
    assert (junit.parent / "cwd").is_dir() and not (junit.parent / "cwd").is_relative_to(tor.REPO)
    assert run["assay"] == configuration.report()["assay"] and run["rootdir"] == "$ASSAY"
    assert run["configuration"]["verdict"] == configuration.report()["verdict"]
    cases = tor.junit_cases(junit)
    names = {case["test"] for case in cases}  # the suite's names: relative to Assay's tree
    assert "tests/harness/stages/evidence/test_kit.py::test_a_known_problem_without_a_workaround_or_given_twice_" \
           "is_refused" in names and deselected not in names
    assert all(case["outcome"] == "passed" for case in cases)
    again = tor.run_suite(f"tests/harness/stages/evidence/test_kit.py -m 'not slow' --deselect {deselected}", cache)
    assert again == (junit, {**run, "reused": True}, None)  # content-keyed and sealed: reused, and it says so


SMALL = "tests/harness/stages/evidence/test_kit.py -m 'not slow'"


@pytest.mark.tor("TOR-EVD-006")
def test_a_junit_planted_in_the_cache_is_not_reused(tmp_path):
    """B1: a JUnit XML put where the cached run lies (its run.json kept) was reused as Assay's own; the entry is
    now sealed under this user's key when written, and one that does not carry the seal is run again, which the
    run's record (signed into the matrix) says."""
    junit, run, seconds = tor.run_suite(SMALL, tmp_path / "cache")
    assert seconds is not None and run["reused"] is False and "seal" in run
    forged = junit.read_text().replace("<testcase ", "<testcase forged='1' ", 1)
    junit.write_text(forged)
    assert junit.with_name("run.json").is_file()  # the old path reused any entry with both files
    again, rerun, seconds = tor.run_suite(SMALL, tmp_path / "cache")
    assert seconds is not None and rerun["reused"] is False and "not sealed" in rerun["reuse_refused"]
    assert "forged=" not in again.read_text()


@pytest.mark.tor("TOR-EVD-006")
def test_a_plugin_named_in_the_environment_is_not_loaded(tmp_path, monkeypatch):
    """B3: a do-nothing plugin given through ``PYTHONPATH`` and ``PYTEST_PLUGINS`` ran inside the qualification
    run; the run now clears ``PYTHON*`` and ``PYTEST*`` and turns plugin autoload off. Shown by a plugin that
    leaves a mark when pytest loads it: a plain pytest run with that environment loads it."""
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    mark = tmp_path / "loaded"
    (plugins / "evil_plugin.py").write_text(f"def pytest_configure(config):\n    open({str(mark)!r}, 'w')\n")
    monkeypatch.setenv("PYTHONPATH", str(plugins))
    monkeypatch.setenv("PYTEST_PLUGINS", "evil_plugin")
    junit, run, _ = tor.run_suite(SMALL, tmp_path / "cache")
    assert run["returncode"] == 0 and not mark.exists()
    assert run["plugins"] == list(tor.PLUGINS) and "autoload off" in run["environment"]
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--co",
                    str(tor.REPO / "tests/harness/stages/evidence/test_kit.py")], cwd=tmp_path, capture_output=True,
                   timeout=300, check=False)
    assert mark.exists()  # the old path: the plugin ran


@pytest.mark.tor("TOR-EVD-006")
def test_a_run_with_a_plugin_the_qualification_run_does_not_load_is_unverified(tmp_path):
    """B3 of issue 39: a do-nothing plugin (given through PYTHONPATH and PYTEST_PLUGINS, or installed) made 449 cases
    "pass" and nothing in the package named it. The JUnit XML names every plugin the run loaded (Assay's plugin
    writes them); one the qualification run does not load, or a file that names none, leaves the matrix
    unverified, and verify recomputes that from the packaged XML."""
    everything = {test: ("passed", ids) for test, ids in tor.source_tags().items()}
    for plugins, unexpected in ((tor.PLUGINS, []), ((*tor.PLUGINS, "pytest_passall"), ["pytest_passall"]),
                                ((*tor.PLUGINS, "tests.conftest"), [])):
        (tmp_path / "junit.xml").write_text(junit_of(everything, plugins))
        result = tor.write(tmp_path / "junit.xml", tmp_path / "out", {"command": "pytest"})
        assert result["plugins_unexpected"] == unexpected and result["results_verdict"] == "pass"
        assert result["verdict"] == ("unverified" if unexpected else "pass")
    assert "the run's plugins are not the qualification run's (pytest_passall)" in tor.verdict_line(result) or \
        tor.verdict_line(result) == "verdict **pass**"
    (tmp_path / "bare.xml").write_text(junit_of(everything).replace('<property name="plugins"', '<property name="x"'))
    bare = tor.write(tmp_path / "bare.xml", tmp_path / "out", {"command": "pytest"})
    assert bare["plugins_seen"] is None and bare["verdict"] == "unverified"
    assert "none named in the JUnit XML" in tor.verdict_line(bare)
    forged = {**bare, "verdict": "pass", "plugins_unexpected": []}
    lines = tor.recheck(forged, (tmp_path / "bare.xml").read_bytes(), tor.TOR_DOCUMENT.read_text())
    assert "tool-qualification/tor-matrix.json: verdict 'pass', the packaged JUnit XML gives 'unverified'" in lines
