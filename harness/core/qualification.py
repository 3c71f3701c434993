"""Local qualification records: a configuration that ``assay evidence qualify`` qualified on this machine.

Why: DO-330 asks that the tool-qualification data were produced with the configuration the tool is used in. The
shipped ``toolchains/tested.toml`` says which Debian versions Assay's own suite passed with; when Debian moves a
results tool on (a security update of gcc, libc or QEMU; apt cannot install the old revision any more), or on a
distribution the file has no versions for, the user re-runs the tool-qualification tests on the configuration
they have. That run, not a promise, is what then makes the configuration tested: ``assay doctor`` and the
evidence package accept it, say which run did it, and the package carries that run's JUnit XML and matrix.

A record is keyed by the configuration it ran on (``fingerprint``: the distribution, the platform, the
interpreter, the installed version of every results package, the lock's SHA-256 and the SHA-256 of Assay's
sources and tests): another gcc, another lock or another commit's sources find no record. ``accepted`` reads a
record as untrusted data: it must be the current user's and writable by no one else, sealed by this user's Assay
(``harness.seal``: a record written or edited by hand is refused), name this fingerprint and the required
selection of tests, and its JUnit XML must match the SHA-256 it names and hold only passed or skipped cases; the
counts are recomputed from the XML, not read from the record.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree

from harness import seal
from harness.core import tested as tested_file
from harness.digests import digest, file_digest, tree_digest

SCHEMA = "assay-qualification/1"
# The tool-qualification tests (docs/tor.md): every test tagged with a TOR requirement but the slow ones and the
# evidence package's own end-to-end build (which runs this selection inside it). The evidence package runs the same.
SELECTION = ("tests -m 'tor and not slow' -n 2 --deselect "
             "tests/harness/stages/evidence/test_evidence_command.py::"
             "test_evidence_package_for_acas_reg50_on_cortex_m4f")
# What the record's source digest covers: Assay's code, its tests and the requirements they verify.
SOURCES = ("harness", "codegen", "wcet", "tests", "toolchains")
TOR_DOCUMENT = tested_file.ROOT / "docs" / "tor.md"
RECORD, JUNIT = "record.json", "junit.xml"


def directory() -> Path:
    """Where records live: ``$ASSAY_QUALIFIED_DIR``, else ``$XDG_CACHE_HOME/assay/qualified`` (``~/.cache``)."""
    if os.environ.get("ASSAY_QUALIFIED_DIR"):
        return Path(os.environ["ASSAY_QUALIFIED_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "assay" / "qualified"


def sources_digest(root: Path = tested_file.ROOT) -> str:
    """SHA-256 of Assay's sources, tests, toolchains and TOR document: the Assay a record qualified."""
    document = root / "docs" / "tor.md"
    return digest([[tree_digest(root / part) if (root / part).is_dir() else None for part in SOURCES],
                   file_digest(document) if document.is_file() else None])


def fingerprint(tested: tested_file.Tested, installed: dict[str, str], where: str, python: str, system: str,
                lock_sha256: str | None, sources_sha256: str) -> dict:
    """The configuration a record is about: what can change a result, nothing else (test-only packages left out)."""
    return {"distribution": where, "platform": system, "python": python,
            "debian": {p.name: installed.get(p.name) for p in sorted(tested.role(tested_file.RESULTS),
                                                                      key=lambda p: p.name)},
            "requirements_lock_sha256": lock_sha256, "assay_sources_sha256": sources_sha256}


def key(configuration: dict) -> str:
    return digest(configuration)[:16]


@dataclass(frozen=True)
class Counts:
    """Test cases of a JUnit XML file by outcome."""

    passed: int
    failed: int
    errors: int
    skipped: int

    def as_dict(self) -> dict:
        return {"passed": self.passed, "failed": self.failed, "errors": self.errors, "skipped": self.skipped}


def junit_counts(junit: Path | bytes) -> Counts:
    """Count the cases of a JUnit XML file (a path, or its bytes): a case with a ``failure`` child failed, with
    ``error`` erred, with ``skipped`` was skipped, else passed. Raises ValueError for what is not JUnit XML."""
    try:
        root = (ElementTree.fromstring(junit) if isinstance(junit, bytes)
                else ElementTree.parse(junit).getroot())
    except (OSError, ElementTree.ParseError) as exc:
        where = "the JUnit XML" if isinstance(junit, bytes) else junit.name
        raise ValueError(f"{where} is not readable JUnit XML ({exc})") from None
    passed = failed = errors = skipped = 0
    for case in root.iter("testcase"):
        tags = {child.tag for child in case}
        if "failure" in tags:
            failed += 1
        elif "error" in tags:
            errors += 1
        elif "skipped" in tags:
            skipped += 1
        else:
            passed += 1
    return Counts(passed, failed, errors, skipped)


def write(configuration: dict, selection: str, junit: Path, returncode: int, run: dict, folder: Path | None = None,
          ) -> Path:
    """Store the record of a passing run (the JUnit XML copied beside it); returns the record's folder. The caller
    has checked that the run passed; the record says what was run and how it ended, and ``accepted`` rechecks."""
    counts = junit_counts(junit)
    target = (folder or directory()) / key(configuration)
    target.mkdir(parents=True, exist_ok=True, mode=0o755)
    os.chmod(target, 0o755)
    data = Path(junit).read_bytes()
    (target / JUNIT).write_bytes(data)
    record = {"schema": SCHEMA, "configuration": configuration, "key": key(configuration), "selection": selection,
              "returncode": returncode, "counts": counts.as_dict(), "junit_sha256": file_digest(target / JUNIT),
              **run}
    record["seal"] = seal.seal(data, record)
    (target / RECORD).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    for name in (JUNIT, RECORD):
        os.chmod(target / name, 0o644)
    return target


def accepted(configuration: dict, selection: str, folder: Path | None = None) -> tuple[dict | None, str | None]:
    """(the record, None) when a record qualifies ``configuration`` by a passing run of ``selection``; (None, why
    not) when a record is there but refused; (None, None) when there is none."""
    place = (folder or directory()) / key(configuration)
    if not (place / RECORD).exists():
        return None, None
    for path in (place, place / RECORD, place / JUNIT):
        reason = _untrusted(path)
        if reason:
            return None, f"{path}: {reason}"
    try:
        record = json.loads((place / RECORD).read_text())
    except (OSError, ValueError) as exc:
        return None, f"{place / RECORD}: not readable JSON ({exc})"
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        return None, f"{place / RECORD}: not an {SCHEMA} record"
    if record.get("configuration") != configuration:
        return None, f"{place / RECORD}: made on another configuration"
    if shlex.split(str(record.get("selection"))) != shlex.split(selection):
        return None, f"{place / RECORD}: ran '{record.get('selection')}', not the qualification tests '{selection}'"
    if record.get("junit_sha256") != file_digest(place / JUNIT):
        return None, f"{place / JUNIT}: does not match the SHA-256 its record names"
    if not seal.sealed(record.get("seal"), (place / JUNIT).read_bytes(),
                       {k: v for k, v in record.items() if k != "seal"}):
        return None, f"{place / RECORD}: not sealed by this user's Assay (written or edited by hand?)"
    try:
        counts = junit_counts(place / JUNIT)
    except ValueError as exc:
        return None, f"{place}: {exc}"
    if record.get("returncode") != 0 or counts.failed or counts.errors or not counts.passed:
        return None, (f"{place / RECORD}: the run did not pass (exit {record.get('returncode')}, "
                      f"{counts.passed} passed, {counts.failed} failed, {counts.errors} errors)")
    return {**record, "counts": counts.as_dict(), "folder": str(place)}, None


def _untrusted(path: Path) -> str | None:
    """Why ``path`` cannot be trusted as the current user's own record (None when it can)."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if info.st_uid != os.getuid():
        return f"owned by user {info.st_uid}, not by the user running Assay"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    return None


def summary(record: dict) -> str:
    """One line naming the run that qualified the configuration."""
    counts = record["counts"]
    return (f"qualified by 'assay evidence qualify' on {record.get('finished_at', '?')} (record {record['key']}: "
            f"{counts['passed']} passed, {counts['skipped']} skipped, JUnit sha256 {record['junit_sha256'][:12]})")
