"""Tool qualification data for Assay itself (DO-330, TQL-5): the Tool Operational Requirements of
``docs/tor.md``, the JUnit XML of a run of Assay's own test suite, and the TOR -> tests -> result matrix.

A test names the requirements it verifies with ``@pytest.mark.tor("TOR-SEM-001", ...)`` on its function; Assay's
pytest plugin writes them into the JUnit XML as ``<property name="tor" value="TOR-..."/>`` of each test case, so the
matrix is computed from the run's own report, not from a list kept by hand. The test sources are read too
(without importing them): every test case of the run must be a test of the suite carrying the same IDs as its
marker in the source (else the file is refused, ``check_run``), and a requirement passes only when every test
that carries its ID in the source ran and passed; one of them skipped, deselected or not run makes it
``incomplete``.

A JUnit XML file that this run did not produce (``assay evidence tor-matrix --junit``, ``assay evidence
--tor-junit``) is not evidence of anything: its matrix says ``unverified`` (or ``fail``, a failure it reports is
never hidden), with what its results would give as ``results_verdict``.

The JUnit XML is read with the standard library's ElementTree: the file is pytest's own and small, and no
JUnit library adds anything to reading test cases and their properties.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from harness import seal
from harness.core import configuration, qualification
from harness.core.provenance import tool_versions
from harness.digests import digest, file_digest, tree_digest
from harness.errors import AssayError

SCHEMA = "assay-tor-matrix/2"
REPO = Path(__file__).resolve().parents[3]
TOR_DOCUMENT = REPO / "docs" / "tor.md"
TESTS = REPO / "tests"
_HEADING = re.compile(r"^### (TOR-[A-Z]+-\d{3})\s+(.*\S)\s*$")
ID = re.compile(r"^TOR-[A-Z]+-\d{3}$")
# the evidence package's default selection: every test that verifies a requirement, except the slow ones and
# the end-to-end test of the package itself (it would build a package inside the package)
DEFAULT_SELECTION = qualification.SELECTION


def requirements(document: Path = TOR_DOCUMENT) -> list[dict]:
    """The requirements of ``document`` in its order: ``{"id", "title", "area"}`` per ``### TOR-...`` heading."""
    if not Path(document).is_file():
        raise AssayError(f"{document}: no Tool Operational Requirements document")
    return requirements_of(Path(document).read_text(), str(document))


def requirements_of(text: str, where: str = "docs/tor.md") -> list[dict]:
    """``requirements`` of the document's text (``where`` names it in an error)."""
    found = []
    for line in text.splitlines():
        match = _HEADING.match(line)
        if match:
            found.append({"id": match[1], "title": match[2], "area": match[1].split("-")[1]})
    ids = [r["id"] for r in found]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise AssayError(f"{where}: requirement IDs given twice: {', '.join(duplicates)}")
    return found


def suite_tests(tests: Path = TESTS, root: Path | None = None) -> dict[str, list[str]]:
    """Every test function of the suite's sources (``test*`` functions of ``test_*.py`` files and ``test*`` methods
    of their ``Test*`` classes, read, not imported), with the requirement IDs of its ``pytest.mark.tor(...)``
    decorators: ``{"tests/x/test_y.py::test_z": [IDs]}``, paths relative to ``root`` (default: the folder holding
    ``tests``, where pytest runs, so that the names are those of the JUnit XML)."""
    root = Path(tests).parent if root is None else Path(root)
    found: dict[str, list[str]] = {}
    for path in sorted(Path(tests).rglob("test_*.py")):
        module = path.relative_to(root).as_posix()
        body = ast.parse(path.read_text(), filename=str(path)).body
        scopes = [("", body)] + [(f"{node.name}::", node.body) for node in body
                                 if isinstance(node, ast.ClassDef) and node.name.startswith("Test")]
        for prefix, nodes in scopes:
            for node in nodes:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                    found[f"{module}::{prefix}{node.name}"] = [
                        arg.value for decorator in node.decorator_list if _is_tor_marker(decorator)
                        for arg in decorator.args if isinstance(arg, ast.Constant)]
    return found


def source_tags(tests: Path = TESTS, root: Path | None = None) -> dict[str, list[str]]:
    """``{"tests/x/test_y.py::test_z": [TOR IDs]}``: the tests of ``suite_tests`` that carry a requirement."""
    return {test: ids for test, ids in suite_tests(tests, root).items() if ids}


def _is_tor_marker(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "tor"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "mark")


def junit_cases(junit: Path | bytes) -> list[dict]:
    """Every test case of a pytest JUnit XML file (a path, or its bytes): ``{"test", "outcome", "tor", "message",
    "key"}``.

    ``outcome`` is ``passed``, ``failed`` (a failure or an error), or ``skipped``; ``key`` is what names the test
    function in the JUnit XML (``classname::name`` without the parameters), ``resolve`` turns it into the suite's
    name of the function. A collection error (pytest's case without a class name) has the module as ``key``.
    """
    where = "the JUnit XML" if isinstance(junit, bytes) else junit
    try:
        root = ElementTree.fromstring(junit) if isinstance(junit, bytes) else ElementTree.parse(junit).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise AssayError(f"{where}: not a readable JUnit XML file ({exc})") from None
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
        cases.append({"test": f"{module.replace('.', '/')}.py::{name}" if module else name, "name": name,
                      "outcome": outcome, "tor": ids, "message": message,
                      "key": f"{module}::{name.split('[', 1)[0]}" if module else name})
    return cases


def _key(test: str) -> str:
    """The JUnit XML's name of a suite test: ``tests/x/test_y.py::Cls::test_z`` -> ``tests.x.test_y.Cls::test_z``."""
    path, *scope = test.split("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *scope[:-1]]) + "::" + scope[-1]


def resolve(cases: list[dict], tests: Iterable[str]) -> list[dict]:
    """``cases`` with ``function``: the suite's name of the test function each one ran (one of ``tests``), or None
    (a test the suite does not have, or a collection error: then ``module``, the suite's module it names, or None);
    a case of a known function is shown under the suite's name (``tests/x/test_y.py::test_z[1]``)."""
    by_key = {_key(test): test for test in tests}
    modules = {path.removesuffix(".py").replace("/", "."): path for path in {test.split("::")[0] for test in tests}}
    resolved = []
    for case in cases:
        function = by_key.get(case["key"])
        parameters = case["name"][len(case["name"].split("[", 1)[0]):]  # "[2]" of test_half[2]
        shown = function + parameters if function else case["test"]
        resolved.append({**case, "test": shown, "function": function,
                         "module": None if function or "::" in case["key"] else modules.get(case["key"])})
    return resolved


def check_run(cases: list[dict], suite: dict[str, list[str]], junit: Path | str) -> None:
    """Refuse (one line, an AssayError) a JUnit XML file that is not a run of this suite: a test case of a test
    the suite does not have, or one whose requirement IDs are not those of its test's marker in the source.
    ``cases``: resolved against ``suite`` (``suite_tests``)."""
    unknown = [c["test"] for c in cases if c["function"] is None and c["module"] is None]
    if unknown:
        raise AssayError(f"{junit}: {len(unknown)} test case(s) are not tests of Assay's suite (first: {unknown[0]}): "
                         f"not a run of Assay's own tests, refused")
    for case in cases:
        if case["function"] is not None and sorted(set(case["tor"])) != sorted(set(suite[case["function"]])):
            raise AssayError(f"{junit}: {case['test']} carries the requirements "
                             f"{', '.join(sorted(set(case['tor']))) or 'none'} but its marker in the source says "
                             f"{', '.join(sorted(set(suite[case['function']]))) or 'none'}: refused")


STATUSES = ("pass", "fail", "incomplete", "not run", "missing")


def matrix(reqs: list[dict], cases: list[dict], tags: dict[str, list[str]], run: dict,
           plugins: list[str] | None = None) -> dict:
    """The TOR -> tests -> result matrix (``assay-tor-matrix/2``); ``cases``: resolved (``resolve``) against the
    suite's tests, ``tags``: the tests that carry a requirement in the source (``source_tags``).

    A requirement is ``fail`` when one of its tests failed; ``pass`` only when every test that carries it in the
    source ran and passed (none skipped) and, where the run counted the suite's cases (``run["cases_in_suite"]``),
    every case of those tests ran and passed (a parametrised test partly deselected leaves it incomplete);
    ``incomplete`` when some ran and passed but another was skipped, deselected or not run; ``not run`` when none
    ran; ``missing`` when no test names it. IDs named by a test or the run but absent from the document are listed
    as ``unknown_ids``; a collection error of a test module (``collection_errors``) fails the run.
    ``run["junit_given"]``: the JUnit XML was given, not produced
    by this run: the verdict is ``unverified`` (``fail`` stays ``fail``), ``results_verdict`` what its results give.
    ``plugins``: the plugin modules the run loaded (``junit_plugins``); a run that does not name them, or loaded one
    the qualification run does not (``unexpected_plugins``), is ``unverified`` too: a plugin can make tests pass.
    """
    known = {r["id"] for r in reqs}
    cases_of: dict[str, list[str]] = {}  # the suite's cases of each test function, when the run counted them
    for node in run.get("cases_in_suite") or []:
        cases_of.setdefault(node.split("[", 1)[0], []).append(node)
    rows = []
    for requirement in reqs:
        ran = [c for c in cases if requirement["id"] in c["tor"]]
        tagged = sorted(test for test, ids in tags.items() if requirement["id"] in ids)
        passed = {c["function"] for c in ran if c["outcome"] == "passed"}
        passed_cases = {c["test"] for c in ran if c["outcome"] == "passed"}
        cases_not_run = [node for test in tagged for node in cases_of.get(test, []) if node not in passed_cases]
        if any(c["outcome"] == "failed" for c in ran):
            status = "fail"
        elif not tagged and not ran:
            status = "missing"
        elif not passed:
            status = "not run"
        elif all(c["outcome"] == "passed" for c in ran) and set(tagged) <= passed and not cases_not_run:
            status = "pass"
        else:
            status = "incomplete"
        rows.append({**requirement, "status": status, "tests_in_source": tagged,
                     "not_run": [test for test in tagged if test not in passed],
                     "cases": len([node for test in tagged for node in cases_of.get(test, [])]) or None,
                     "cases_not_run": cases_not_run,
                     "results": [{"test": c["test"], "outcome": c["outcome"], "message": c["message"]}
                                 for c in ran]})
    unknown = sorted({i for c in cases for i in c["tor"]} | {i for ids in tags.values() for i in ids})
    counts = {status: sum(r["status"] == status for r in rows) for status in STATUSES}
    errors = sorted(c["test"] for c in cases if c["function"] is None and c["outcome"] == "failed")
    results = verdict(counts, errors)
    unexpected = None if plugins is None else unexpected_plugins(plugins)
    given = bool(run.get("junit_given")) or unexpected != []
    return {"schema": SCHEMA, "run": run, "requirements": len(rows), "counts": counts,
            "verdict": "unverified" if given and results != "fail" else results, "results_verdict": results,
            "verified": not given, "collection_errors": errors, "plugins_seen": plugins,
            "plugins_unexpected": unexpected,
            "unknown_ids": [i for i in unknown if i not in known], "rows": rows,
            "test_cases": len(cases), "test_cases_with_tor": sum(bool(c["tor"]) for c in cases)}


def junit_plugins(junit: Path | bytes) -> list[str] | None:
    """The plugin modules a run loaded, as Assay's pytest plugin names them in the JUnit XML (the suite's
    ``plugins`` property, ``harness.pytest_plugin.pytest_sessionstart``); None when the file does not say."""
    root = ElementTree.fromstring(junit) if isinstance(junit, bytes) else ElementTree.parse(junit).getroot()
    found = next((p.get("value") for p in root.iter("property") if p.get("name") == "plugins"), None)
    return None if found is None else sorted(found.split())


def unexpected_plugins(plugins: list[str]) -> list[str]:
    """The plugins of ``plugins`` a qualification run does not load: anything but ``PLUGINS`` and the suite's own
    conftest modules."""
    return [name for name in plugins if name not in PLUGINS and name.rpartition(".")[2] != "conftest"]


def verdict(counts: dict[str, int], collection_errors: Iterable[str] = ()) -> str:
    """What the run's results give: ``pass`` only when every requirement passed; ``fail`` if one failed or a test
    module could not be collected; ``incomplete`` otherwise."""
    if counts["fail"] or list(collection_errors):
        return "fail"
    return "pass" if counts["pass"] == sum(counts.values()) else "incomplete"


def recheck(packaged: dict, junit: bytes, document: str) -> list[str]:
    """A packaged matrix against what its packaged JUnit XML and TOR document give (``assay evidence verify``),
    with the tests in source it lists: one line per requirement status, count or verdict that differs."""
    tags: dict[str, list[str]] = {}
    for row in packaged.get("rows", []):
        for test in row.get("tests_in_source", []):
            tags.setdefault(test, []).append(row["id"])
    again = matrix(requirements_of(document, "tool-qualification/tor.md"), resolve(junit_cases(junit), tags), tags,
                   packaged.get("run", {}), junit_plugins(junit))
    where = "tool-qualification/tor-matrix.json"
    recorded = packaged.get("run", {}).get("junit_sha256")
    lines = [] if recorded in (None, hashlib.sha256(junit).hexdigest()) else \
        [f"{where}: the JUnit XML's sha256 it records differs from tool-qualification/junit.xml"]
    lines += [f"{where}: {row['id']} says {old.get('status')}, the packaged JUnit XML gives {row['status']}"
             for row, old in zip(again["rows"], packaged.get("rows", [])) if row["status"] != old.get("status")]
    if [row["id"] for row in again["rows"]] != [row.get("id") for row in packaged.get("rows", [])]:
        lines.append(f"{where}: its requirements are not those of tool-qualification/tor.md")
    for key in ("counts", "verdict", "results_verdict", "plugins_seen", "plugins_unexpected"):
        if packaged.get(key) != again[key]:
            lines.append(f"{where}: {key} {packaged.get(key)!r}, the packaged JUnit XML gives {again[key]!r}")
    return lines


def verdict_line(result: dict) -> str:
    """The matrix's verdict in words: an unverified one says why and what its results give."""
    if result["verdict"] == "unverified" and not result["run"].get("junit_given"):
        named = ", ".join(result.get("plugins_unexpected") or []) or "none named in the JUnit XML"
        return (f"verdict **unverified**: the run's plugins are not the qualification run's ({named}), so its results "
                f"({result['results_verdict']}) are not evidence")
    if result["verdict"] == "unverified":
        return (f"verdict **unverified**: the JUnit XML was given, not produced by this run, so its results "
                f"({result['results_verdict']}) are not evidence")
    return f"verdict **{result['verdict']}**"


def as_markdown(result: dict) -> str:
    run = result["run"]
    lines = ["# Tool Operational Requirements: verification matrix", "",
             f"Test run: `{run.get('command') or 'given JUnit XML'}`" + (f" (exit {run['returncode']})"
                                                                         if run.get("returncode") is not None else ""),
             f"JUnit XML: `{run.get('junit')}`; {result['test_cases']} test cases, "
             f"{result['test_cases_with_tor']} of them tagged with a requirement.", "",
             "Counts: " + ", ".join(f"{k} {v}" for k, v in result["counts"].items()) + f"; {verdict_line(result)}",
             "", "A requirement passes only when every test carrying it in the source ran and passed.", "",
             "| requirement | title | status | tests run (passed/failed/skipped) | tests in source | not run |",
             "|---|---|---|---|---|---|"]
    for row in result["rows"]:
        outcomes = [r["outcome"] for r in row["results"]]
        figures = f"{outcomes.count('passed')}/{outcomes.count('failed')}/{outcomes.count('skipped')}"
        lines.append(f"| {row['id']} | {row['title']} | {row['status']} | {figures} | {len(row['tests_in_source'])} "
                     f"| {len(row['not_run'])} |")
    if result["unknown_ids"]:
        lines += ["", "IDs named by tests but not in docs/tor.md: " + ", ".join(result["unknown_ids"])]
    if result["collection_errors"]:
        lines += ["", "Test modules that could not be collected: " + ", ".join(result["collection_errors"])]
    failed = [(row["id"], r) for row in result["rows"] for r in row["results"] if r["outcome"] == "failed"]
    if failed:
        lines += ["", "## Failed tests", ""] + [f"- {i}: `{r['test']}`: {r['message']}" for i, r in failed]
    lines += ["", "## Tests per requirement", ""]
    for row in result["rows"]:
        tests = ", ".join(f"`{r['test']}` {r['outcome']}" for r in row["results"]) or "none ran"
        missing = "; not run: " + ", ".join(f"`{t}`" for t in row["not_run"]) if row["not_run"] else ""
        lines.append(f"- **{row['id']}** ({row['status']}): {tests}{missing}")
    return "\n".join(lines) + "\n"


def _anchored(words: list[str]) -> list[str]:
    """The selection's words with every path of Assay's tree (``tests``, ``tests/x.py::test_y``) made absolute, so
    that pytest runs from a folder outside the tree; a ``--deselect`` value stays as it is (a node id, relative to
    ``--rootdir``)."""
    return [str(REPO / word) if not word.startswith("-") and before != "--deselect"
            and (REPO / word.split("::")[0]).exists() else word for before, word in zip(["", *words], words)]


def run_suite(selection: str, cache_dir: Path, timeout: float | None = None, qualified: dict | None = None
              ) -> tuple[Path, dict, float | None]:
    """Run Assay's own test suite (``pytest SELECTION``) and return its JUnit XML, what was run and the seconds it
    took (None when reused).

    The tests are those of the installed Assay (an editable install's source tree: the test sources are not
    shipped in a wheel); pytest runs from a fresh folder under ``cache_dir``, never in the source tree, with no cache
    and no bytecode written there (``--rootdir`` names the tree, so the test names are the suite's). What was run:
    the command, its exit status, the content key, and the Assay and the configuration it ran on (``assay doctor``'s
    identity, verdict and differences), so that the tool verification results are bound to the Assay they verify.
    The run is content-keyed like a stage's results: the bytes of Assay's sources, tests, toolchains and this
    document, the selection and the tool versions; the same key reuses the JUnit XML of the earlier run, or that of
    ``qualified``, this configuration's qualification record as ``assay doctor`` accepted it (``qualified_by``).
    pytest's exit status 1 (some test failed) is a result: the matrix shows it per requirement.
    """
    if not TESTS.is_dir():
        raise AssayError(f"Assay's test suite is not installed (no {TESTS.name}/ beside the installed sources, as "
                         f"with a wheel): give --tor-junit FILE or --tor-tests none")
    arguments = [*shlex.split(selection), "-p", "no:cacheprovider", "-q", *PLUGIN_ARGUMENTS]
    key = digest([[tree_digest(REPO / part) for part in qualification.SOURCES],
                  TOR_DOCUMENT.read_text() if TOR_DOCUMENT.is_file() else None, arguments, tool_versions()])
    junit = Path(cache_dir).resolve() / key[:16] / "junit.xml"  # absolute: pytest runs in another folder
    doctor = configuration.report()
    run = {"command": "pytest " + shlex.join(arguments), "rootdir": "$ASSAY", "content_key": key,
           "plugins": list(PLUGINS), "environment": "PYTHON* and PYTEST* cleared, plugin autoload off",
           "assay": dict(doctor["assay"]),
           "configuration": {"verdict": doctor["verdict"], "differences": list(doctor["differences"])}}
    record = junit.with_name("run.json")
    reused, refused = _sealed_run(junit, record)
    if reused is not None:
        return junit, {**reused, "reused": True}, None
    earlier = _qualification_run(qualified, key)
    if earlier is not None:
        return earlier[0], earlier[1], None
    folder = junit.with_name("cwd")  # where pytest runs: outside Assay's tree
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    junit.unlink(missing_ok=True)
    start = time.perf_counter()
    hermetic = [f"--rootdir={REPO}", "-c", str(REPO / "pyproject.toml"), f"--confcutdir={REPO}"]
    run["cases_in_suite"] = suite_cases(folder, hermetic)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *_anchored(arguments), *hermetic,
                               f"--junitxml={junit}"],
                              cwd=folder, capture_output=True, text=True, timeout=timeout, check=False,
                              env=hermetic_environment())
    except subprocess.TimeoutExpired:
        raise AssayError(f"Assay's test suite did not finish within {timeout:g} s") from None
    if not junit.is_file():
        tail = (done.stdout + done.stderr).strip().splitlines()
        raise AssayError(f"Assay's test suite wrote no JUnit XML (exit {done.returncode}): "
                         f"{tail[-1] if tail else 'no output'}")
    run.update(returncode=done.returncode, reused=False, finished_at=_now(),
               **({"reuse_refused": refused} if refused else {}))
    run["seal"] = seal.seal(junit.read_bytes(), {k: v for k, v in run.items() if k != "seal"})
    record.write_text(json.dumps(run, indent=1, sort_keys=True) + "\n")
    return junit, run, time.perf_counter() - start


def suite_cases(folder: Path, hermetic: list[str]) -> list[str]:
    """Every test case of the suite that carries a requirement (``pytest --collect-only -m tor``, every
    parametrisation), whatever the selection: what the matrix counts a requirement's cases against, so that a
    selection that deselects some cases of a test (``-k``, ``--deselect``) leaves its requirement incomplete."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "tor", "-p",
                           "no:cacheprovider", *PLUGIN_ARGUMENTS, str(TESTS), *hermetic],
                          cwd=folder, capture_output=True, text=True, check=False, env=hermetic_environment())
    cases = sorted(line for line in done.stdout.splitlines() if line.startswith("tests/") and "::" in line)
    if done.returncode != 0 or not cases:
        tail = (done.stdout + done.stderr).strip().splitlines()
        raise AssayError(f"Assay's test suite cannot be collected (exit {done.returncode}): "
                         f"{tail[-1] if tail else 'no output'}")
    return cases


# The only pytest plugins of a qualification run: autoload off on its command line (a plugin installed or named in
# the environment, e.g. one that makes every test pass, is not loaded), these named. On the command line, not in
# the environment: the suite's own tests that run pytest inside (pytester) must see the plugins as a user does.
PLUGINS = ("xdist.plugin", "xdist.looponfail", "harness.pytest_plugin")
PLUGIN_ARGUMENTS = ("--disable-plugin-autoload", *(word for plugin in PLUGINS for word in ("-p", plugin)))


def hermetic_environment() -> dict[str, str]:
    """The environment of a run of Assay's own tests: the user's, without any ``PYTHON*`` variable (no
    ``PYTHONPATH`` that puts a module first, no ``PYTHONSTARTUP``) and any ``PYTEST*`` one (no
    ``PYTEST_PLUGINS``, ``PYTEST_ADDOPTS``), and no bytecode written."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYTEST"))}
    return {**environment, "PYTHONDONTWRITEBYTECODE": "1"}


def _sealed_run(junit: Path, record: Path) -> tuple[dict | None, str | None]:
    """(the earlier run's record, None) when ``junit`` and ``record`` are an entry Assay wrote and sealed
    (``harness.seal``) and nothing changed since; (None, why not) for an entry found but not trusted (it is
    run again, and the new run says why); (None, None) when there is none."""
    if not junit.is_file() and not record.is_file():
        return None, None
    try:
        data = json.loads(record.read_text())
        junit_bytes = junit.read_bytes()
    except (OSError, ValueError):
        return None, f"{record.parent.name}: an incomplete earlier run"
    if not isinstance(data, dict) or not seal.sealed(data.get("seal"), junit_bytes,
                                                     {k: v for k, v in data.items() if k != "seal"}):
        return None, f"{record.parent.name}: an earlier run's files not sealed by this user's Assay (ignored)"
    return data, None


def _qualification_run(qualified: dict | None, key: str) -> tuple[Path, dict] | None:
    """The JUnit XML and the run of this configuration's qualification run (``assay evidence qualify``, the record
    ``assay doctor`` accepted: sealed, on this configuration, these sources) when its content key is ``key``: the
    same tests of the same Assay with the same tools, run once per configuration, as DO-330 asks, not once per
    package. None when there is none, or it ran something else."""
    if not qualified:
        return None
    folder = Path(qualified["folder"])
    try:
        record = json.loads((folder / qualification.RECORD).read_text())
    except (OSError, ValueError):
        return None
    run = record.get("suite_run") if isinstance(record, dict) else None
    junit = folder / qualification.JUNIT
    # the record doctor checked (its seal covers suite_run and the JUnit XML), and nothing changed since
    if not isinstance(run, dict) or run.get("content_key") != key or record.get("key") != qualified["key"] \
            or not junit.is_file() or file_digest(junit) != qualified["junit_sha256"]:
        return None
    if not seal.sealed(record.get("seal"), junit.read_bytes(), {k: v for k, v in record.items() if k != "seal"}):
        return None
    return junit, {**run, "reused": True, "reused_from_qualification": record["key"]}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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


def write(junit: Path, out: Path, run: dict, document: Path = TOR_DOCUMENT, tests: Path = TESTS,
          root: Path | None = None) -> dict:
    """Write ``tor-matrix.json`` and ``tor-matrix.md`` for ``junit`` into ``out``; return the matrix. ``tests``: the
    suite's sources (names relative to ``root``, ``suite_tests``); a JUnit XML file that is not a run of them is
    refused (``check_run``). ``run["junit_given"]``: the file was given, not produced by this run (unverified)."""
    suite = suite_tests(tests, root)
    cases = resolve(junit_cases(junit), suite)
    check_run(cases, suite, junit)
    result = matrix(requirements(document), cases, {test: ids for test, ids in suite.items() if ids},
                    {**run, "junit": Path(junit).name}, junit_plugins(junit))
    out.mkdir(parents=True, exist_ok=True)
    (out / "tor-matrix.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    (out / "tor-matrix.md").write_text(as_markdown(result))
    return result
