"""The verdict of each part of a package, its tool qualification and its overall verdict, computed from the
package's own files: ``of_package`` is the one computation, run by the build over the files it has just written
(run.py) and by ``assay evidence verify`` over the packaged files (integrity.py), so the verdicts ``evidence.json``
states are by construction those its files give, and a changed verdict or a removed stage is found.

The stages' result files are read through their contracts (``spec.py``: file, schema, passing verdicts).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from harness.contract import FAIL, PASS
from harness.core import oracle
from harness.errors import AssayError
from harness.stages.evidence import sci
from harness.stages.memory import spec as memory_spec
from harness.stages.met import spec as met_spec
from harness.stages.mutate import spec as mutate_spec
from harness.stages.semantic import spec as semantic_spec
from harness.stages.wcet import spec as wcet_spec

# the stages a package runs, by name: their result file, schema, passing verdicts and report files are in their
# contracts
STAGES = {spec.name: spec for spec in (semantic_spec.SPEC, memory_spec.SPEC, met_spec.SPEC, wcet_spec.SPEC,
                                       mutate_spec.SPEC)}
SCI = "sci/sci.json"
INPUT_SETS = "inputs/input-sets.json"
COVERAGE = "coverage/coverage-summary.json"
TOR_MATRIX = "tool-qualification/tor-matrix.json"
INCOMPLETE = "incomplete"
NOT_RUN = "not run"


def stage_folder(name: str) -> str:
    """Where a stage's result file and tables are in a package."""
    return f"results/{name}"


def stage_result(name: str) -> str:
    """A stage's result file in a package (its contract's file name)."""
    return f"{stage_folder(name)}/{STAGES[name].result_file}"


@dataclass(frozen=True)
class Verdicts:
    """Each part's verdict, the tool qualification's (the TOR matrix's verdict, or ``not run``) and the overall one."""

    parts: dict[str, str]
    tool_qualification: str

    @property
    def verdict(self) -> str:
        return overall(self.parts, self.tool_qualification)


def overall(parts: dict[str, str], tool_qualification: str) -> str:
    """``pass`` only when every part about the code passes and Assay's tool qualification is complete (every
    requirement of docs/tor.md verified by tests this build ran, all passed); ``fail`` when a part fails or one of
    Assay's own tests failed; ``incomplete`` when the code's parts pass but the tool qualification is incomplete (a
    subset of the tests), unverified (a JUnit XML given, not run) or not run: the code's evidence stands, the tool
    that produced it is not yet qualified by this package."""
    if not parts or any(v != PASS for v in parts.values()) or tool_qualification == FAIL:
        return FAIL
    return PASS if tool_qualification == PASS else INCOMPLETE


def of_package(read: Callable[[str], bytes | None]) -> Verdicts:
    """The verdicts of the package whose file ``path`` (relative to its root) has the bytes ``read(path)`` (None:
    absent). An AssayError naming the file when one it needs is missing or not what its schema says.

    ``tested-configuration``: ``assay doctor``'s report in ``sci/sci.json``; each stage whose result file is in
    ``results/<stage>/``: ``pass`` when it has records and every one passes (its contract); ``configuration``,
    present only when it fails: some archived code is not the code the semantic stage verified (sci.json); ``inputs``:
    every input set's verdict (``inputs/input-sets.json``); ``coverage``: ``pass`` when every code meets the
    structural coverage criteria of the package's software level (sci.json's ``level``; ``coverage_shortfall``), else
    ``incomplete``; the tool qualification: the TOR matrix's verdict.
    """
    index = _document(read, SCI, required=True)
    configuration = index.get("configuration")
    if not isinstance(configuration, dict) or not isinstance(configuration.get("differences"), list):
        raise AssayError(f"{SCI}: no configuration (assay doctor's verdict and differences)")
    parts = {sci.TESTED_CONFIGURATION: sci.tested_configuration(configuration, read)[0]}
    for name, spec in STAGES.items():
        result = _document(read, stage_result(name))
        if result is not None:
            if result.get("schema") != spec.schema or not isinstance(result.get("records"), list):
                raise AssayError(f"{stage_result(name)}: not a {spec.schema} result file")
            records = result["records"]
            parts[name] = PASS if records and all(passed(name, r) for r in records) else FAIL
    if any(code.get("same_as_verified") is not True for code in index.get("generated_code", [])):
        parts["configuration"] = FAIL
    sets = _document(read, INPUT_SETS)
    if sets is not None and sets.get("codes"):
        parts["inputs"] = FAIL if any(record.get("verdict") == FAIL for records in sets["codes"].values()
                                      for record in records.values()) else PASS
    coverage = _document(read, COVERAGE)
    if coverage is not None:
        level = index.get("level") or "C"
        parts["coverage"] = PASS if all(not coverage_shortfall(code, level)
                                        for code in coverage.get("codes", {}).values()) else INCOMPLETE
    matrix = _document(read, TOR_MATRIX)
    return Verdicts(parts=parts, tool_qualification=NOT_RUN if matrix is None else str(matrix.get("verdict")))


def passed(stage: str, record: dict) -> bool:
    """A record counts as passed when its stage's contract says so and, for the semantic stage, its verdict follows
    from its own figures (``oracle.recheck``): a record edited to ``pass`` over its tolerance does not."""
    return STAGES[stage].passed(record) and (stage != semantic_spec.SPEC.name or oracle.recheck(record) is None)


# DO-178C Table A-7 (objectives 5 to 7): the structural coverage each software level requires of the code.
COVERAGE_CRITERIA = {"A": ("statement", "decision", "mcdc"), "B": ("statement", "decision"), "C": ("statement",),
                     "D": ()}


def coverage_shortfall(code: dict, level: str) -> list[str]:
    """What a code's coverage summary (``coverage.measure``, with ``mcdc`` from ``measure_mcdc``) lacks for the
    criteria of software ``level``, one phrase each; [] when it meets them all.

    Statements: every line reached. Decisions: every branch outcome taken (gcov's branches; a code with no branch
    has no decision to cover). MC/DC (masking, as clang's ``-fcoverage-mcdc`` measures it): every condition of
    every decision of two or more conditions shown to act independently; with no such decision, MC/DC is decision
    coverage (each single condition both ways), which the decision criterion already requires, and the summary says
    why (its ``note``). Not measured (no clang with MC/DC) is a shortfall, never a pass."""
    lacking = []
    criteria = COVERAGE_CRITERIA.get(level, COVERAGE_CRITERIA["A"])
    if "statement" in criteria and code.get("line_percent") != 100.0:
        lacking.append(f"statements {code.get('line_percent')} %")
    if "decision" in criteria and code.get("branch_percent") not in (100.0, None):
        lacking.append(f"decisions (branch outcomes) {code.get('branch_percent')} %")
    if "mcdc" in criteria:
        mcdc = code.get("mcdc") or {}
        if not mcdc.get("available"):
            lacking.append("MC/DC not measured")
        elif mcdc.get("decisions") and mcdc.get("mcdc_percent") != 100.0:
            lacking.append(f"MC/DC {mcdc.get('mcdc_percent')} % of conditions")
        elif not mcdc.get("decisions") and not mcdc.get("note"):
            lacking.append("MC/DC: 0 decisions and no reason given")
    return lacking


def _document(read: Callable[[str], bytes | None], path: str, required: bool = False) -> dict | None:
    data = read(path)
    if data is None:
        if required:
            raise AssayError(f"{path}: missing, the verdicts cannot be computed")
        return None
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AssayError(f"{path}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise AssayError(f"{path}: not a JSON object")
    return document


def json_or_none(data: bytes | None):
    """A packaged file's JSON, or None when it is absent or not JSON (the caller names what is missing)."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
