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
    every input set's verdict (``inputs/input-sets.json``); ``coverage``: ``pass`` at 100 % of the lines of every
    code, else ``incomplete``; the tool qualification: the TOR matrix's verdict.
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
            parts[name] = PASS if records and all(spec.passed(r) for r in records) else FAIL
    if any(code.get("same_as_verified") is not True for code in index.get("generated_code", [])):
        parts["configuration"] = FAIL
    sets = _document(read, INPUT_SETS)
    if sets is not None and sets.get("codes"):
        parts["inputs"] = FAIL if any(record.get("verdict") == FAIL for records in sets["codes"].values()
                                      for record in records.values()) else PASS
    coverage = _document(read, COVERAGE)
    if coverage is not None:
        parts["coverage"] = PASS if all(code.get("line_percent") == 100.0
                                        for code in coverage.get("codes", {}).values()) else INCOMPLETE
    matrix = _document(read, TOR_MATRIX)
    return Verdicts(parts=parts, tool_qualification=NOT_RUN if matrix is None else str(matrix.get("verdict")))


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
