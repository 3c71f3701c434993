"""``assay evidence qualify``: run Assay's tool-qualification tests on this machine and, when they pass, record
the configuration they passed on (``harness.core.qualification``), so that ``assay doctor`` and the evidence
package accept that configuration as tested by that run.

Why a run and not an override: DO-330 (tool qualification data) asks that the verification of the tool was done in
the configuration the tool is used in. When Debian moves a compiler, a C library or QEMU on, the only honest way to
say "tested" again is to run the qualification tests on what is now installed; the record keeps that run's JUnit
XML and TOR matrix, and the package built on that configuration carries them.
"""

from __future__ import annotations

import platform
import shutil
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

from harness.core import configuration, qualification
from harness.core import tested as tested_file
from harness.errors import AssayError
from harness.stages.evidence import tor


class QualificationFailed(AssayError):
    """The tests ran and some did not pass: the configuration is not qualified (exit 1, not a user error)."""


def qualify(selection: str = qualification.SELECTION, lock: Path = configuration.LOCK,
            tested: Path = configuration.TESTED_FILE, timeout: float | None = None, progress=print) -> dict:
    """Run ``selection`` of Assay's tests; on a pass, write the record of this configuration and return it
    (``qualification.accepted``'s view of it). An AssayError when the tests do not pass: nothing is recorded."""
    description = tested_file.load(tested)
    where = tested_file.distribution()
    installed = tested_file.machine_versions(description, where)
    if installed is None:
        raise AssayError("no dpkg-query on PATH: the Debian packages a qualification record names cannot be read")
    fingerprint = configuration.current_fingerprint(description, installed, where, lock)
    moved = ", ".join(f"{name} {version or 'not installed'}" for name, version in fingerprint["debian"].items()
                      if version != description.versions.get(where, {}).get(name)) or "none"
    progress(f"qualify: {where}, Python {fingerprint['python']}, results packages other than "
             f"{description.source}'s: {moved}")
    progress(f"qualify: running Assay's tool-qualification tests (pytest {selection}); several minutes")
    started = datetime.now(timezone.utc)
    start = time.perf_counter()
    directory = qualification.directory()
    directory.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="run-", dir=directory))  # a fresh run: nothing reused
    junit, run, _ = tor.run_suite(selection, scratch, timeout)
    counts = qualification.junit_counts(junit)
    if run["returncode"] != 0 or counts.failed or counts.errors or not counts.passed:
        raise QualificationFailed(f"the tool-qualification tests did not pass on this configuration (pytest exit "
                         f"{run['returncode']}: {counts.passed} passed, {counts.failed} failed, {counts.errors} "
                         f"errors): nothing recorded; the JUnit XML is {junit}")
    folder = qualification.write(
        fingerprint, selection, junit, run["returncode"],
        {"started_at": started.isoformat(timespec="seconds"),
         "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
         "duration_s": round(time.perf_counter() - start, 1), "command": run["command"], "assay": run["assay"],
         "python_version": platform.python_version(),
         # the run as tor.run_suite describes it (its content key, the suite's cases): an evidence package built on
         # this configuration reuses it when its key is the package's own (tor.run_suite)
         "suite_run": {k: v for k, v in run.items() if k != "seal"}},
        directory)
    tor.write(folder / qualification.JUNIT, folder, run)
    shutil.rmtree(scratch, ignore_errors=True)  # kept when the run failed: the error names its JUnit XML
    record, refused = qualification.accepted(fingerprint, selection, directory)
    if record is None:
        raise AssayError(f"the record just written is not accepted: {refused}")
    return record
