"""Running a stage from another stage: as a user would, ``python -m harness.cli STAGE ... --out DIR``, in a
subprocess, then reading the result file it wrote, through the called stage's contract (``harness.contract``:
file name, schema and key from its ``spec`` module; schema checked).

Why a subprocess and not an import: a stage never imports another (docs/architecture.md), a crash or a
memory blow-up in the called stage cannot take the caller down, and what the caller records as the command
line is exactly what reproduces the result. Results are content-keyed, so calling a stage again with the
same inputs reuses its records instead of recomputing them.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.contract import StageSpec
from harness.core.results import ResultStore
from harness.errors import AssayError


@dataclass(frozen=True)
class StageRun:
    """What a called stage did: its command line, exit status, the last lines it printed, its records."""

    command: list[str]
    returncode: int
    stderr_tail: list[str]
    records: list[dict]  # those sealed by this user's Assay (harness.seal): what the stage computed or rightly reused
    unsealed: int = 0  # records in the result file without a valid seal: planted or edited, left out of ``records``


def call(stage: StageSpec, arguments: list[str], out: Path, timeout: float | None = None) -> StageRun:
    """Run ``assay STAGE ARGUMENTS --out OUT --quiet`` and read its result file in OUT (its contract's file name,
    schema and key: ``stage`` is the called stage's ``SPEC``, from its ``spec`` module).

    Exit status 1 (some item failed) is a result like any other; a missing result file is an AssayError
    naming the stage and its last line of output. Only sealed records are read: the stage ran again whatever was
    not sealed in its own cache, so a record left unsealed there is one it did not ask for.
    """
    command, returncode, tail, path = run_stage(stage, arguments, out, timeout)
    store = ResultStore.of(stage, path)
    records = store.sealed_records()
    return StageRun(command=command, returncode=returncode, stderr_tail=tail, records=records,
                    unsealed=len(store.records()) - len(records))


def run_stage(stage: StageSpec, arguments: list[str], out: Path,
              timeout: float | None = None) -> tuple[list[str], int, list[str], Path]:
    """Run ``assay STAGE ARGUMENTS --out OUT --quiet``: (command, exit status, last lines, the result file).

    For stages whose result is one document rather than a record store (``assay schedule``'s
    schedule.json: read it with ``stage.read``); an AssayError when the file was not written.
    """
    command = [sys.executable, "-m", "harness.cli", stage.name, *arguments, "--out", str(out), "--quiet"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise AssayError(f"assay {stage.name} did not finish within {timeout:g} s") from None
    tail = done.stderr.strip().splitlines()[-20:]
    path = stage.path(out)
    if not path.is_file():
        raise AssayError(f"assay {stage.name} wrote no {path.name} (exit {done.returncode}): "
                         f"{tail[-1] if tail else 'no output'}")
    return ["assay", *command[3:]], done.returncode, tail, path
