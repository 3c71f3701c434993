"""What bounding one ELF imports: not ``dataclasses``, whose ``inspect`` (with ``ast``, ``dis``, ``tokenize``)
costs about 1 MB of every ``python -m wcet`` process, nor ``typing``, nor, unless a loop needs a library
annotation, ``tomllib`` (issue 45: per ELF, at most 1.2x OTAWA's peak memory; ``wcet/__init__.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from recordings import OTAWA, needs_recordings

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"dataclasses", "inspect", "typing", "tomllib"}


def imported(*args: str) -> tuple[set[str], str]:
    """The modules ``python -X importtime ARGS`` imports beyond those ``python -c pass`` does, run on this
    checkout; and its standard output."""

    def run(*arguments: str) -> subprocess.CompletedProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        process = subprocess.run([sys.executable, "-X", "importtime", *arguments], capture_output=True, text=True,
                                 env=env, cwd=ROOT, timeout=300)
        assert process.returncode == 0, process.stderr[-3000:]
        return process

    def modules(process: subprocess.CompletedProcess) -> set[str]:
        return {line.rpartition("|")[2].strip() for line in process.stderr.splitlines()
                if line.startswith("import time:") and not line.rstrip().endswith("package")}

    process = run(*args)
    return modules(process) - modules(run("-c", "pass")), process.stdout


@needs_recordings
def test_python_m_wcet_does_not_import_dataclasses():
    found, out = imported("-m", "wcet", str(OTAWA / "arm7tdmi/dense.elf"), "main", "--flow-facts",
                          str(OTAWA / "arm7tdmi/dense.ff"))
    assert out.splitlines() == ["WCET[main] = 22715 cycles"]
    assert "wcet.analyzer" in found and "wcet.fflocate" in found  # its .ff bounds every loop: no annotation read
    assert not found & HEAVY


def test_the_modules_of_a_bound_do_not_import_dataclasses():
    """``wcet.bound`` (what ``assay wcet --elf`` and ``python -m wcet`` call) and every module a bound of an ELF
    with an F4 or FFX file may import."""
    found, _ = imported("-c", "import wcet.bound, wcet.analyzer, wcet.fflocate, wcet.ffformat, wcet.timing")
    assert "wcet.program" in found and not found & HEAVY
