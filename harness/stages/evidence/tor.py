"""Tool qualification data for Assay itself (DO-330, TQL-5): the Tool Operational Requirements of
``docs/tor.md``, the JUnit XML of a run of Assay's own test suite, and the TOR -> tests -> result matrix.

A test names the requirements it verifies with ``@pytest.mark.tor("TOR-SEM-001", ...)``; Assay's pytest plugin
writes them into the JUnit XML as ``<property name="tor" value="TOR-..."/>`` of each test case, so the matrix is
computed from the run's own report, not from a list kept by hand. The test sources are read too (without
importing them) so that a requirement whose tests were deselected or skipped is ``not run``, distinct from one
no test verifies (``missing``).

The JUnit XML is read with the standard library's ElementTree: the file is pytest's own and small, and no
JUnit library adds anything to reading test cases and their properties.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from harness.core.provenance import tool_versions
from harness.digests import digest, tree_digest
from harness.errors import AssayError

SCHEMA = "assay-tor-matrix/1"
REPO = Path(__file__).resolve().parents[3]
TOR_DOCUMENT = REPO / "docs" / "tor.md"
TESTS = REPO / "tests"
_HEADING = re.compile(r"^### (TOR-[A-Z]+-\d{3})\s+(.*\S)\s*$")
ID = re.compile(r"^TOR-[A-Z]+-\d{3}$")
# the evidence package's default selection: every test that verifies a requirement, except the slow ones and
# the end-to-end test of the package itself (it would build a package inside the package)
DEFAULT_SELECTION = ("tests -m 'tor and not slow' -n 2 --deselect "
                     "tests/harness/stages/evidence/test_evidence_command.py::"
                     "test_evidence_package_for_acas_reg50_on_cortex_m4f")


def requirements(document: Path = TOR_DOCUMENT) -> list[dict]:
    """The requirements of ``document`` in its order: ``{"id", "title", "area"}`` per ``### TOR-...`` heading."""
    if not Path(document).is_file():
        raise AssayError(f"{document}: no Tool Operational Requirements document")
    found = []
    for line in Path(document).read_text().splitlines():
        match = _HEADING.match(line)
        if match:
            found.append({"id": match[1], "title": match[2], "area": match[1].split("-")[1]})
    ids = [r["id"] for r in found]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise AssayError(f"{document}: requirement IDs given twice: {', '.join(duplicates)}")
    return found


def source_tags(tests: Path = TESTS) -> dict[str, list[str]]:
    """``{"tests/x/test_y.py::test_z": [TOR IDs]}`` from the ``pytest.mark.tor(...)`` decorators of the sources."""
    tags: dict[str, list[str]] = {}
    for path in sorted(Path(tests).rglob("test_*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            ids = [arg.value for decorator in node.decorator_list if _is_tor_marker(decorator)
                   for arg in decorator.args if isinstance(arg, ast.Constant)]
            if ids:
                tags[f"{path.relative_to(Path(tests).parent).as_posix()}::{node.name}"] = ids
    return tags


def _is_tor_marker(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tor"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "mark")


def junit_cases(junit: Path) -> list[dict]:
    """Every test case of a pytest JUnit XML file: ``{"test", "outcome", "tor", "message"}``.

    ``outcome`` is ``passed``, ``failed`` (a failure or an error), or ``skipped``.
    """
    try:
        root = ElementTree.parse(junit).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise AssayError(f"{junit}: not a readable JUnit XML file ({exc})") from None
    cases = []
    for case in root.iter("testcase"):
        module, name = case.get("classname", ""), case.get("name", "")
        outcome, message = "passed", None
        for kind in ("failure", "error", "skipped"):
            element = case.find(kind)
            if element is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                message = (element.get("message") or "").splitlines()[0][:200] if element.get("message") else kind
                break
        ids = [p.get("value") for p in case.iter("property") if p.get("name") == "tor"]
        cases.append({"test": f"{module.replace('.', '/')}.py::{name}", "outcome": outcome, "tor": ids,
                      "message": message})
    return cases


def matrix(reqs: list[dict], cases: list[dict], tags: dict[str, list[str]], run: dict) -> dict:
    """The TOR -> tests -> result matrix (``assay-tor-matrix/1``).

    A requirement is ``pass`` when at least one of its tests ran and every one that ran passed, ``fail`` when
    one failed, ``not run`` when it has tests but none ran, ``missing`` when no test names it. IDs named by a
    test or the run but absent from the document are listed as ``unknown_ids``.
    """
    known = {r["id"] for r in reqs}
    rows = []
    for requirement in reqs:
        ran = [c for c in cases if requirement["id"] in c["tor"]]
        executed = [c for c in ran if c["outcome"] != "skipped"]
        tagged = sorted(test for test, ids in tags.items() if requirement["id"] in ids)
        if any(c["outcome"] == "failed" for c in executed):
            status = "fail"
        elif executed:
            status = "pass"
        else:
            status = "not run" if tagged or ran else "missing"
        rows.append({**requirement, "status": status, "tests_in_source": tagged,
                     "results": [{"test": c["test"], "outcome": c["outcome"], "message": c["message"]}
                                 for c in ran]})
    unknown = sorted({i for c in cases for i in c["tor"]} | {i for ids in tags.values() for i in ids})
    counts = {status: sum(r["status"] == status for r in rows) for status in ("pass", "fail", "not run", "missing")}
    return {"schema": SCHEMA, "run": run, "requirements": len(rows), "counts": counts,
            "verdict": verdict(counts), "unknown_ids": [i for i in unknown if i not in known], "rows": rows,
            "test_cases": len(cases), "test_cases_with_tor": sum(bool(c["tor"]) for c in cases)}


def verdict(counts: dict[str, int]) -> str:
    """``pass`` only when every requirement passed; ``fail`` if one failed; ``incomplete`` otherwise."""
    if counts["fail"]:
        return "fail"
    return "pass" if not (counts["not run"] or counts["missing"]) else "incomplete"


def as_markdown(result: dict) -> str:
    run = result["run"]
    lines = ["# Tool Operational Requirements: verification matrix", "",
             f"Test run: `{run.get('command') or 'given JUnit XML'}`" + (f" (exit {run['returncode']})"
                                                                         if run.get("returncode") is not None else ""),
             f"JUnit XML: `{run.get('junit')}`; {result['test_cases']} test cases, "
             f"{result['test_cases_with_tor']} of them tagged with a requirement.", "",
             "Counts: " + ", ".join(f"{k} {v}" for k, v in result["counts"].items()) + f"; verdict **{result['verdict']}**",
             "", "| requirement | title | status | tests run (passed/failed/skipped) | tests in source |",
             "|---|---|---|---|---|"]
    for row in result["rows"]:
        outcomes = [r["outcome"] for r in row["results"]]
        figures = f"{outcomes.count('passed')}/{outcomes.count('failed')}/{outcomes.count('skipped')}"
        lines.append(f"| {row['id']} | {row['title']} | {row['status']} | {figures} | {len(row['tests_in_source'])} |")
    if result["unknown_ids"]:
        lines += ["", "IDs named by tests but not in docs/tor.md: " + ", ".join(result["unknown_ids"])]
    failed = [(row["id"], r) for row in result["rows"] for r in row["results"] if r["outcome"] == "failed"]
    if failed:
        lines += ["", "## Failed tests", ""] + [f"- {i}: `{r['test']}`: {r['message']}" for i, r in failed]
    lines += ["", "## Tests per requirement", ""]
    for row in result["rows"]:
        tests = ", ".join(f"`{r['test']}` {r['outcome']}" for r in row["results"]) or "none ran"
        lines.append(f"- **{row['id']}** ({row['status']}): {tests}")
    return "\n".join(lines) + "\n"


def run_suite(selection: str, cache_dir: Path, timeout: float | None = None) -> tuple[Path, dict, float | None]:
    """Run Assay's own test suite (``pytest SELECTION``, in the source tree) and return its JUnit XML,
    what was run (command, exit status, content key) and the seconds it took (None when reused).

    The run is content-keyed like a stage's results: the bytes of Assay's sources, tests, toolchains and this
    document, the selection and the tool versions; the same key reuses the JUnit XML of the earlier run.
    pytest's exit status 1 (some test failed) is a result: the matrix shows it per requirement.
    """
    if not TESTS.is_dir():
        raise AssayError(f"Assay's test suite is not at {TESTS}: the tool qualification run needs the source tree")
    arguments = [*shlex.split(selection), "-p", "no:cacheprovider", "-q"]
    key = digest([[tree_digest(REPO / part) for part in ("harness", "codegen", "wcet", "tests", "toolchains")],
                  TOR_DOCUMENT.read_text() if TOR_DOCUMENT.is_file() else None, arguments, tool_versions()])
    junit = Path(cache_dir) / key[:16] / "junit.xml"
    run = {"command": "pytest " + shlex.join(arguments), "content_key": key}
    record = junit.with_name("run.json")
    if junit.is_file() and record.is_file():
        return junit, json.loads(record.read_text()), None
    junit.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *arguments, f"--junitxml={junit}"], cwd=REPO,
                              capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise AssayError(f"Assay's test suite did not finish within {timeout:g} s") from None
    if not junit.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()
        raise AssayError(f"Assay's test suite wrote no JUnit XML (exit {done.returncode}): "
                         f"{tail[-1] if tail else 'no output'}")
    run["returncode"] = done.returncode
    record.write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
    return junit, run, time.perf_counter() - start


_VOLATILE_ATTRIBUTES = ("time", "timestamp", "hostname")


def normalise_junit(source: Path, target: Path) -> Path:
    """A copy of a JUnit XML file without durations, dates, host name and captured output, its test cases in
    name order (xdist finishes them in any order): the same results give the same bytes."""
    try:
        tree = ElementTree.parse(source)
    except (OSError, ElementTree.ParseError) as exc:
        raise AssayError(f"{source}: not a readable JUnit XML file ({exc})") from None
    for element in tree.getroot().iter():
        for name in _VOLATILE_ATTRIBUTES:
            element.attrib.pop(name, None)
        for captured in [child for child in element if child.tag in ("system-out", "system-err")]:
            element.remove(captured)
    for suite in tree.getroot().iter("testsuite"):
        cases = sorted(suite.findall("testcase"), key=lambda c: (c.get("classname", ""), c.get("name", "")))
        for case in cases:
            suite.remove(case)
        suite.extend(cases)
    target.parent.mkdir(parents=True, exist_ok=True)
    tree.write(target, encoding="utf-8", xml_declaration=True)
    return target


def write(junit: Path, out: Path, run: dict, document: Path = TOR_DOCUMENT, tests: Path = TESTS) -> dict:
    """Write ``tor-matrix.json`` and ``tor-matrix.md`` for ``junit`` into ``out``; return the matrix."""
    result = matrix(requirements(document), junit_cases(junit), source_tags(tests), {**run, "junit": junit.name})
    out.mkdir(parents=True, exist_ok=True)
    (out / "tor-matrix.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    (out / "tor-matrix.md").write_text(as_markdown(result))
    return result
