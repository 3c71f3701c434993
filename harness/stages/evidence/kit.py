"""The DO-330 tool qualification kit of Assay, generated from data with every package (``kit/``): the Tool
Qualification Plan (the TQL for the user's software level), the Tool Operational Requirements (``docs/tor.md``,
whose last section is the installation, with the operational environment of this build and the limitations), the
Tool Verification Cases and Procedures (each requirement's tests, how to run them and the expected result), the
Tool Verification Results (the TOR matrix of the run this build made), the Tool Configuration Index (the Assay,
packages, tools, drivers and scripts the figures come from), the Tool Accomplishment Summary, and the known problems
(``docs/known-problems.md``).

Every document is written from the package's own files (``sci/sci.json``, ``tool-qualification/``) and the
verdicts the build computed, never typed in: the same package gives the same kit, and a reviewer can check each
statement against the file it names.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from harness.errors import AssayError
from harness.stages.evidence import tor
from harness.stages.evidence.verdicts import COVERAGE_CRITERIA

SCHEMA = "assay-do330-kit/1"
FOLDER = "kit"
KNOWN_PROBLEMS = tor.REPO / "docs" / "known-problems.md"
LEVELS = ("A", "B", "C", "D")
# DO-178C Table 12-1 (DO-330 section 4.4): the tool qualification level from the software level and the tool's
# criterion. Criterion 1: its output is part of the airborne software; 2: it automates verification and its output
# is used to eliminate or reduce other development or verification processes; 3: it could only fail to detect an
# error.
TQL = {1: {"A": 1, "B": 2, "C": 3, "D": 4}, 2: {"A": 4, "B": 4, "C": 5, "D": 5}, 3: {"A": 5, "B": 5, "C": 5, "D": 5}}
CRITERIA = {1: "its output is part of the airborne software and could insert an error",
            2: "it automates verification and its output is used to justify eliminating or reducing other "
               "verification or development processes, and could fail to detect an error",
            3: "within its intended use it could only fail to detect an error"}
DOCUMENTS = {"tool-qualification-plan.md": "Tool Qualification Plan",
             "tool-operational-requirements.md": "Tool Operational Requirements",
             "tool-verification-cases-and-procedures.md": "Tool Verification Cases and Procedures",
             "tool-verification-results.md": "Tool Verification Results",
             "tool-configuration-index.md": "Tool Configuration Index",
             "tool-accomplishment-summary.md": "Tool Accomplishment Summary",
             "known-problems.md": "Known problems"}
# Each document's identifier (its revision is the Assay commit that wrote it: ``control``) and the questions its
# reviewer answers (DO-330 section 6.1.3 and Table T-0 to T-10: the kit's documents are reviewed and kept under
# configuration management by the applicant; the kit gives the checklist and the record to fill, and claims no
# review it did not see).
IDENTIFIERS = {"tool-qualification-plan.md": "ASSAY-TQP", "tool-operational-requirements.md": "ASSAY-TOR",
               "tool-verification-cases-and-procedures.md": "ASSAY-TVCP",
               "tool-verification-results.md": "ASSAY-TVR", "tool-configuration-index.md": "ASSAY-TCI",
               "tool-accomplishment-summary.md": "ASSAY-TAS", "known-problems.md": "ASSAY-KP"}
CHECKLISTS = {
    "tool-qualification-plan.md": ("The TQL follows from the software level and the tool's criterion (DO-178C Table "
                                   "12-1)", "The intended use matches how the applicant uses the package's results",
                                   "The structural coverage criteria match the software level (DO-178C Table A-7)"),
    "tool-operational-requirements.md": ("Each requirement is verifiable and states what its tests show",
                                         "The operational environment is the one the package was built in",
                                         "Each limitation has a workaround the applicant can apply"),
    "tool-verification-cases-and-procedures.md": ("Each requirement has at least one test",
                                                  "Five links picked at random: the test shows what the requirement "
                                                  "says", "The procedure reruns the tests from a clean checkout"),
    "tool-verification-results.md": ("The JUnit XML's SHA-256 matches the packaged file",
                                     "Every requirement passed, or its deviation is justified in the summary",
                                     "The Assay verified is the Assay that built the package"),
    "tool-configuration-index.md": ("Every configuration item has an identity (SHA-256 or version)",
                                    "The configuration is the tested one (assay doctor), or its qualification run is "
                                    "packaged", "The archived items can rebuild the figures"),
    "tool-accomplishment-summary.md": ("Every part's verdict is the one `assay evidence verify` recomputes",
                                       "Every deviation and open problem is assessed for this use"),
    "known-problems.md": ("Each problem's effect on this use is assessed", "Each workaround is applied or justified"),
}
ROLES = ("review", "quality assurance", "configuration management")
COVERAGE_NAMES = {"statement": "statement coverage (every line)",
                  "decision": "decision coverage (every branch outcome)", "mcdc": "MC/DC"}
_PROBLEM = re.compile(r"^### (KP-\d{3})\s+(.*\S)\s*$")


def known_problems(document: Path = KNOWN_PROBLEMS) -> list[dict]:
    """The entries of docs/known-problems.md: ``{"id", "title", "text", "affects", "workaround"}``; an AssayError
    naming the entry when one has no workaround or an id is given twice."""
    if not Path(document).is_file():
        raise AssayError(f"{document}: no known-problems list")
    entries: list[dict] = []
    for line in Path(document).read_text().splitlines():
        match = _PROBLEM.match(line)
        if match:
            entries.append({"id": match[1], "title": match[2], "lines": []})
        elif entries and not line.startswith("#"):
            entries[-1]["lines"].append(line)
    found = []
    for entry in entries:
        text, fields, field = [], {"affects": "", "workaround": ""}, None
        for line in entry.pop("lines"):
            key = next((k for k in fields if line.lower().startswith(k + ":")), None)
            if key:
                field, line = key, line.split(":", 1)[1].strip()
            if field:
                fields[field] = (fields[field] + " " + line.strip()).strip()
            elif line.strip():
                text.append(line.strip())
        if not fields["workaround"]:
            raise AssayError(f"{document}: {entry['id']} has no 'Workaround:' line")
        found.append({**entry, "text": " ".join(text), **fields})
    ids = [e["id"] for e in found]
    if len(set(ids)) != len(ids):
        raise AssayError(f"{document}: known-problem ids given twice: "
                         f"{', '.join(sorted({i for i in ids if ids.count(i) > 1}))}")
    return found


def determination(level: str) -> dict:
    """The TQL of Assay for software of ``level`` under each criterion, and the one its intended use gives."""
    if level not in LEVELS:
        raise AssayError(f"software level {level!r}: one of {', '.join(LEVELS)}")
    return {"level": level, "intended_criterion": 3, "tql": f"TQL-{TQL[3][level]}",
            "by_criterion": {str(c): f"TQL-{TQL[c][level]}" for c in (2, 3)}}


def write(root: Path, level: str, verdicts: dict[str, str], tool_qualification: str, verdict: str,
          notes: list[str]) -> list[str]:
    """Write the kit's documents and ``kit/kit.json`` into the package ``root`` from its files; return their paths
    (relative to ``root``)."""
    def read(path: str) -> dict:
        return json.loads((root / path).read_text()) if (root / path).is_file() else {}

    sci, matrix = read("sci/sci.json"), read("tool-qualification/tor-matrix.json")
    problems, tql = known_problems(), determination(level)
    packaged = root / "tool-qualification" / "tor.md"
    document = (packaged if packaged.is_file() else tor.TOR_DOCUMENT).read_text()
    texts = {"tool-qualification-plan.md": _plan(tql, sci),
             "tool-operational-requirements.md": _requirements(document, sci, problems),
             "tool-verification-cases-and-procedures.md": _procedures(matrix),
             "tool-verification-results.md": _results(matrix),
             "tool-configuration-index.md": _configuration(sci),
             "tool-accomplishment-summary.md": _summary(tql, sci, matrix, verdicts, tool_qualification, verdict,
                                                        notes, problems),
             "known-problems.md": _problems(problems)}
    folder = root / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (folder / name).write_text(f"# {DOCUMENTS[name]} of Assay\n\n{control(name, sci)}\n\n{text.rstrip()}\n\n"
                                   f"{review_record(name)}\n")
    (folder / "kit.json").write_text(json.dumps(
        {"schema": SCHEMA, "determination": tql, "documents": DOCUMENTS, "identifiers": IDENTIFIERS,
         "coverage_criteria": list(COVERAGE_CRITERIA[level]), "tool_qualification": tool_qualification,
         "verdict": verdict, "known_problems": [{k: p[k] for k in ("id", "title", "affects")} for p in problems]},
        indent=1, sort_keys=True) + "\n")  # the workarounds are in known-problems.md
    return [f"{FOLDER}/{name}" for name in [*DOCUMENTS, "kit.json"]]


def control(name: str, sci: dict) -> str:
    """The document's control block: identifier, revision (the Assay commit that wrote it, and whether its tree had
    changes) and date (that commit's, so that the same Assay writes the same bytes: a build's own date would make
    two builds differ)."""
    assay = sci.get("assay", {})
    commit = assay.get("commit")
    revision = (f"{assay.get('version')}+{commit[:12]}" if commit else f"{assay.get('version')}+sources "
                f"{str(assay.get('sources_sha256'))[:12]}") + (" (with changes)" if assay.get("dirty") else "")
    return (f"| document | revision | date |\n|---|---|---|\n"
            f"| {IDENTIFIERS[name]} | {revision} | {commit_date(commit) or 'no commit'} |")


def commit_date(commit: str | None) -> str | None:
    """The committer date (ISO 8601) of ``commit`` in Assay's tree, or None without git or the commit."""
    if not commit:
        return None
    done = subprocess.run(["git", "-C", str(tor.REPO), "show", "-s", "--format=%cI", commit], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or None if done.returncode == 0 else None


def review_record(name: str) -> str:
    """The checklist of the document's review and the record the applicant fills: who reviewed, checked it under
    quality assurance and placed it under configuration management, when, with what outcome."""
    checks = "\n".join(f"- [ ] {item}" for item in CHECKLISTS[name])
    rows = "\n".join(f"| {role} | | | |" for role in ROLES)
    return (f"## Review record of {IDENTIFIERS[name]}\n\nTo be filled by the applicant (the kit records no review it "
            f"did not see).\n\n{checks}\n\n| activity | by | date | outcome |\n|---|---|---|---|\n{rows}")


def _identity(sci: dict) -> str:
    assay = sci.get("assay", {})
    return (f"Assay {assay.get('version')}, commit {assay.get('commit') or 'none'}"
            + (" with changes" if assay.get("dirty") else "")
            + (f", sources SHA-256 {assay['sources_sha256']}" if assay.get("sources_sha256") else "")
            + f", lock SHA-256 {assay.get('requirements_lock_sha256')}")


def _plan(tql: dict, sci: dict) -> str:
    level = tql["level"]
    rows = "\n".join(f"| {c} | {CRITERIA[c]} | TQL-{TQL[c][level]} |" for c in (1, 2, 3))
    return f"""Tool: {_identity(sci)}.

## Intended use and TQL determination

Assay verifies C code generated from neural networks (semantic preservation against reference runtimes, memory,
measured and bounded execution time, structural coverage) and packages the evidence. Its output is not part of the
airborne software. Software level of the verified software (`--level`): **{level}**.

| criterion | the tool ... | TQL at level {level} |
|---|---|---|
{rows}

Intended use: criterion {tql['intended_criterion']}, hence **{tql['tql']}**. When the applicant uses a package's
results to eliminate or reduce another verification process (e.g. a WCET bound instead of timing tests on the
hardware, or the coverage figures as structural-coverage credit without another analysis), criterion 2 applies:
{tql['by_criterion']['2']} at level {level}{"; this kit does not claim the objectives beyond TQL-5" if
TQL[2][level] < 5 else ""}.

## Qualification approach

- Tool Operational Requirements: `tool-operational-requirements.md` (docs/tor.md, one requirement per
  `TOR-<AREA>-<NNN>`), with the operational environment this package was built in.
- Verification: Assay's own test suite, each test carrying the requirements it verifies
  (`@pytest.mark.tor`); run by the build itself from a folder outside Assay's tree; the JUnit XML, its SHA-256 and
  the TOR matrix are in `tool-qualification/` (`tool-verification-cases-and-procedures.md`,
  `tool-verification-results.md`).
- Pass criterion: a requirement passes only when every test carrying it ran and passed; the tool qualification is
  complete only when every requirement passes, and a package's verdict is `pass` only then.
- Configuration management: `tool-configuration-index.md` (Assay's commit or source digest, lock digest, packages,
  tools), the package digest (`DIR.sha256`, recorded by the user) and optionally an Ed25519 signature (`DIR.sig`).
- Problem reporting: `known-problems.md` (docs/known-problems.md, each with its workaround).

## Structural coverage criteria at level {level}

The package's `coverage` part passes only when every generated code meets the criteria DO-178C Table A-7 sets for
level {level}: {", ".join(COVERAGE_NAMES[c] for c in COVERAGE_CRITERIA[level]) or "none (reported only)"}. Decisions
are gcov's branch outcomes; MC/DC is clang's `-fcoverage-mcdc` (masking MC/DC over decisions of two or more
conditions); where the code has no such decision, the summary says so and MC/DC is the decision coverage above.
Activation-state coverage (each neuron seen both active and inactive by the test inputs, per layer) is reported
beside them as a criterion of test adequacy for neural networks; it decides no verdict.
"""


def _requirements(document: str, sci: dict, problems: list[dict]) -> str:
    body = document.split("\n", 1)[1] if document.startswith("# ") else document
    targets = "\n".join(f"- {t['target']}: {t.get('compiler_version')}" + (f"; {t['emulator_version']}"
                                                                              if t.get("emulator_version") else "")
                        + (f"; C library {t['c_library_package']} {t.get('c_library_version')}"
                           if t.get("c_library_package") else "") for t in sci.get("targets", []))
    tools = sci.get("tools", {})
    return f"""{body.strip()}

## Operational environment (this package)

- Host: Python {tools.get('python')} on {tools.get('platform')}.
- Targets:
{targets}
- Python packages: see `tool-configuration-index.md`; the tested configuration is the lock `requirements.lock` and
  `toolchains/tested.toml`, compared by `assay doctor` (this build: {sci.get('configuration', {}).get('verdict')}).

## Limitations (docs/known-problems.md)

{chr(10).join(f"- {p['id']} {p['title']}" for p in problems) or "None known."}
"""


def _procedures(matrix: dict) -> str:
    run = matrix.get("run", {})
    lines = [f"Procedure: from a folder outside Assay's tree, `{run.get('command') or 'pytest ...'}` with "
             f"`--rootdir` Assay's tree and `--junitxml FILE`; then `assay evidence tor-matrix --junit FILE`. "
             f"Expected result of every case: `passed` (no failure, no error, no skip).", "",
             "| requirement | title | test (procedure: pytest NODE) | expected |", "|---|---|---|---|"]
    for row in matrix.get("rows", []):
        for test in row.get("tests_in_source", []) or ["(no test)"]:
            lines.append(f"| {row['id']} | {row['title']} | `{test}` | passed |")
    return "\n".join(lines)


def _results(matrix: dict) -> str:
    if not matrix:
        return "Assay's own tests were not run for this package (`--tor-tests none`): no results."
    run = matrix.get("run", {})
    assay = run.get("assay", {})
    lines = [f"Run: `{run.get('command') or 'given JUnit XML'}`" + (f", exit {run['returncode']}"
                                                                    if run.get("returncode") is not None else ""),
             f"JUnit XML: `tool-qualification/junit.xml`, SHA-256 {run.get('junit_sha256')}",
             f"Assay verified: {assay.get('version')} commit {assay.get('commit')}"
             + (f", sources SHA-256 {assay.get('sources_sha256')}" if assay.get("sources_sha256") else ""),
             f"Configuration: {run.get('configuration', {}).get('verdict', 'not recorded')}",
             f"Verdict: **{matrix.get('verdict')}** ({', '.join(f'{k} {v}' for k, v in matrix.get('counts', {}).items())})",
             "", "| requirement | status | passed/failed/skipped | not run |", "|---|---|---|---|"]
    for row in matrix.get("rows", []):
        outcomes = [r["outcome"] for r in row["results"]]
        lines.append(f"| {row['id']} | {row['status']} | {outcomes.count('passed')}/{outcomes.count('failed')}/"
                     f"{outcomes.count('skipped')} | {len(row['not_run'])} |")
    lines += ["", "Each test's outcome: `tool-qualification/tor-matrix.md`."]
    return "\n".join(lines)


def _configuration(sci: dict) -> str:
    lines = [f"Tool: {_identity(sci)}.", "",
             f"Configuration (assay doctor): {sci.get('configuration', {}).get('verdict')}"
             + "".join(f"\n- difference: {d}" for d in sci.get("configuration", {}).get("differences", [])), "",
             f"Command: `{sci.get('command_line')}`", "", "## Python packages", "", "| package | version |",
             "|---|---|"]
    lines += [f"| {name} | {version} |" for name, version in sorted(sci.get("python_packages", {}).items())]
    lines += ["", "## Targets", "", "| target | compiler | package version | linker script | SHA-256 | emulator |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {t['target']} | {t.get('compiler_version')} | {t.get('compiler_package_version')} | "
              f"{t.get('linker_script_file')} | {t.get('linker_script_sha256')} | {t.get('emulator_version', '-')} |"
              for t in sci.get("targets", [])]
    lines += ["", "## Archived configuration items", "", "| file | what | SHA-256 |", "|---|---|---|"]
    lines += [f"| `{a['file']}` | {a['what']} | {a['sha256']} |" for a in sci.get("archived", [])]
    return "\n".join(lines)


def _summary(tql: dict, sci: dict, matrix: dict, verdicts: dict[str, str], tool_qualification: str, verdict: str,
             notes: list[str], problems: list[dict]) -> str:
    deviations = [f"{row['id']} {row['status']}" for row in matrix.get("rows", []) if row["status"] != "pass"]
    parts = "\n".join(f"| {part} | {value} |" for part, value in sorted(verdicts.items()))
    return f"""Tool: {_identity(sci)}; software level {tql['level']}, {tql['tql']} (criterion
{tql['intended_criterion']}, `tool-qualification-plan.md`).

Tool qualification: **{tool_qualification}**. Package verdict: **{verdict}** (`pass` only when every part passes
and the tool qualification is complete).

| part | verdict |
|---|---|
{parts}

Deviations from the plan (requirements not passed in this build's run): {', '.join(deviations) or 'none'}.

Notes: {'; '.join(notes) or 'none'}.

Open problems: {', '.join(p['id'] for p in problems) or 'none'} (`known-problems.md`).
"""


def _problems(problems: list[dict]) -> str:
    lines = ["From docs/known-problems.md of the Assay that built this package.", ""]
    for p in problems:
        lines += [f"## {p['id']} {p['title']}", "", p["text"], ""]
        if p["affects"]:
            lines += [f"Affects: {p['affects']}", ""]
        lines += [f"Workaround: {p['workaround']}", ""]
    return "\n".join(lines)
