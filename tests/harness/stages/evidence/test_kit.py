"""The DO-330 kit (``kit.py``): the TQL determination is DO-178C Table 12-1's, the known-problems list is data
validated at load, and the kit's documents are written from the package's files."""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess

import pytest

from harness.errors import AssayError
from harness.core import qualification
from harness.stages.evidence import kit, tor


@pytest.mark.tor("TOR-EVD-010")
@pytest.mark.parametrize(("level", "criterion_2", "criterion_3"),
                         [("A", "TQL-4", "TQL-5"), ("B", "TQL-4", "TQL-5"), ("C", "TQL-5", "TQL-5"),
                          ("D", "TQL-5", "TQL-5")])
def test_the_tql_of_a_verification_tool_follows_do_178c_table_12_1(level, criterion_2, criterion_3):
    found = kit.determination(level)
    assert found["by_criterion"] == {"2": criterion_2, "3": criterion_3}
    assert found["tql"] == criterion_3 and found["intended_criterion"] == 3


def test_an_unknown_level_is_refused():
    with pytest.raises(AssayError, match="software level 'E': one of A, B, C, D"):
        kit.determination("E")


@pytest.mark.tor("TOR-EVD-010")
def test_every_known_problem_of_the_document_has_an_id_a_title_and_a_workaround():
    problems = kit.known_problems()
    assert problems and [p["id"] for p in problems] == sorted({p["id"] for p in problems})
    assert all(p["title"] and p["text"] and p["workaround"] for p in problems)


def test_a_known_problem_without_a_workaround_or_given_twice_is_refused(tmp_path):
    document = tmp_path / "known-problems.md"
    document.write_text("# Known problems\n\n### KP-001 One\nText.\nWorkaround: do this.\n\n### KP-002 Two\nText.\n")
    with pytest.raises(AssayError, match="KP-002 has no 'Workaround:' line"):
        kit.known_problems(document)
    document.write_text("### KP-001 One\nWorkaround: a.\n### KP-001 Again\nWorkaround: b.\n")
    with pytest.raises(AssayError, match="ids given twice: KP-001"):
        kit.known_problems(document)


@pytest.mark.tor("TOR-EVD-010")
def test_the_kit_is_written_from_the_packages_files(tmp_path):
    """A package's index and TOR matrix as data: every document is there and states what those files say."""
    (tmp_path / "sci").mkdir()
    (tmp_path / "sci" / "sci.json").write_text(json.dumps({
        "assay": {"version": "9.9", "commit": "abc123", "requirements_lock_sha256": "f" * 64},
        "configuration": {"verdict": "tested", "differences": []}, "python_packages": {"gcovr": "8.8"},
        "targets": [{"target": "cortex-m4f", "compiler_version": "gcc-x", "linker_script_file": "/x/picolibc.ld",
                     "linker_script_sha256": "e" * 64}],
        "archived": [{"file": "configuration/drivers/target_driver.c", "sha256": "d" * 64, "what": "driver"}],
        "command_line": "assay evidence --models m", "tools": {}}))
    rows = [{"id": "TOR-SEM-001", "title": "t", "status": "pass", "tests_in_source": ["tests/a.py::test_a"],
             "not_run": [], "results": [{"test": "tests/a.py::test_a", "outcome": "passed", "message": None}]},
            {"id": "TOR-SEM-002", "title": "u", "status": "incomplete", "tests_in_source": ["tests/a.py::test_b"],
             "not_run": ["tests/a.py::test_b"], "results": []}]
    (tmp_path / "tool-qualification").mkdir()
    (tmp_path / "tool-qualification" / "tor-matrix.json").write_text(json.dumps({
        "rows": rows, "verdict": "incomplete", "counts": {"pass": 1, "incomplete": 1},
        "run": {"command": "pytest tests -m tor", "junit_sha256": "c" * 64, "assay": {"commit": "abc123"}}}))
    written = kit.write(tmp_path, "B", {"semantic": "pass"}, "incomplete", "incomplete", ["a note"])
    assert written == [f"kit/{name}" for name in kit.DOCUMENTS] + ["kit/kit.json"]
    assert all((tmp_path / path).is_file() for path in written)
    plan = (tmp_path / "kit" / "tool-qualification-plan.md").read_text()
    assert "Software level of the verified software (`--level`): **B**" in plan and "hence **TQL-5**" in plan
    assert "| 2 |" in plan and "TQL-4 at level B" in plan
    procedures = (tmp_path / "kit" / "tool-verification-cases-and-procedures.md").read_text()
    assert "| TOR-SEM-002 | u | `tests/a.py::test_b` | passed |" in procedures
    results = (tmp_path / "kit" / "tool-verification-results.md").read_text()
    assert "SHA-256 " + "c" * 64 in results and "| TOR-SEM-002 | incomplete | 0/0/0 | 1 |" in results
    index = (tmp_path / "kit" / "tool-configuration-index.md").read_text()
    assert "| gcovr | 8.8 |" in index and "e" * 64 in index and "`configuration/drivers/target_driver.c`" in index
    summary = (tmp_path / "kit" / "tool-accomplishment-summary.md").read_text()
    assert "Deviations from the plan (requirements not passed in this build's run): TOR-SEM-002 incomplete" in summary
    assert "TOR-SEM-001" in (tmp_path / "kit" / "tool-operational-requirements.md").read_text()  # docs/tor.md
    problems = (tmp_path / "kit" / "known-problems.md").read_text()
    assert all(f"## {p['id']} " in problems for p in kit.known_problems())
    assert json.loads((tmp_path / "kit" / "kit.json").read_text())["determination"]["tql"] == "TQL-5"


@pytest.mark.tor("TOR-EVD-010")
def test_every_document_has_its_identifier_revision_date_and_review_record(tmp_path):
    """Each document opens with its control block (identifier, the revision and date of the Assay commit that wrote
    it: the same commit writes the same bytes) and ends with its review checklist and the record the applicant
    fills; the plan states the coverage criteria of its level."""
    head = kit.tor.REPO / ".git"
    commit = subprocess.run(["git", "-C", str(kit.tor.REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip() if head.exists() else ""
    (tmp_path / "sci").mkdir()
    (tmp_path / "sci" / "sci.json").write_text(json.dumps({"assay": {"version": "9.9", "commit": commit or None,
                                                                      "dirty": True, "sources_sha256": "a" * 64}}))
    kit.write(tmp_path, "A", {}, "not run", "incomplete", [])
    for name, identifier in kit.IDENTIFIERS.items():
        text = (tmp_path / "kit" / name).read_text()
        control = text.split("\n")[2:5]
        assert control[0] == "| document | revision | date |" and control[2].startswith(f"| {identifier} | 9.9+")
        assert "(with changes)" in control[2]
        if commit:
            assert f"9.9+{commit[:12]}" in control[2] and kit.commit_date(commit) in control[2]
        record = text.split(f"## Review record of {identifier}\n", 1)[1]
        assert record.count("- [ ] ") == len(kit.CHECKLISTS[name]) >= 2
        assert all(f"| {role} | | | |" in record for role in kit.ROLES)
    plan = (tmp_path / "kit" / "tool-qualification-plan.md").read_text()
    assert "criteria DO-178C Table A-7 sets for\nlevel A: statement coverage (every line), decision coverage (every " \
           "branch outcome), MC/DC." in plan
    assert json.loads((tmp_path / "kit" / "kit.json").read_text())["coverage_criteria"] == ["statement", "decision",
                                                                                            "mcdc"]


GATES = {"slow", "wcet", "peers"}  # markers whose tests the default selection skips (harness.pytest_plugin)


def _gated_tests() -> set[str]:
    """The tests of the suite the default tool-qualification selection does not run: marked slow, wcet or peers
    (by decorator or by their module's ``pytestmark``), or deselected by the selection itself; read, not imported."""
    gated = {word for word in shlex.split(qualification.SELECTION) if "::" in word}
    for path in sorted(tor.TESTS.rglob("test_*.py")):
        module = path.relative_to(tor.REPO).as_posix()
        body = ast.parse(path.read_text()).body
        marks = {node.attr for statement in body if isinstance(statement, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in statement.targets)
                 for node in ast.walk(statement) if isinstance(node, ast.Attribute)}
        for node in body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                own = {n.attr for d in node.decorator_list for n in ast.walk(d) if isinstance(n, ast.Attribute)}
                if (marks | own) & GATES:
                    gated.add(f"{module}::{node.name}")
    return gated


@pytest.mark.tor("TOR-EVD-010")
def test_kp_002_lists_exactly_the_requirements_the_default_selection_leaves_incomplete():
    """The kit's known problem KP-002 names the requirements that the default selection cannot complete: each one has
    a test marked slow, wcet or peers, or the deselected end-to-end test. Its list is checked, not typed and left."""
    tags = tor.source_tags()
    left = sorted({requirement for test in _gated_tests() for requirement in tags.get(test, [])})
    problem = next(p for p in kit.known_problems() if p["id"] == "KP-002")
    assert sorted(re.findall(r"TOR-[A-Z]+-\d{3}", problem["affects"])) == left and len(left) >= 5
    assert not re.search(r"20\d\d-\d\d-\d\d", problem["affects"] + problem["text"])  # no dated note
