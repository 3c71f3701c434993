"""The package's integrity: ``evidence.json`` lists every file with its size and SHA-256; ``verify``
recomputes them; the archive is a deterministic zip.

Timestamps and durations live in one declared volatile file (``volatile.json``) which is listed but
not hashed, so that rebuilding the package from the same inputs gives byte-identical files elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import AssayError
from harness.stages.evidence.spec import SPEC

SCHEMA = SPEC.schema
INDEX = SPEC.result_file
VOLATILE = "volatile.json"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: no build time leaks into the archive


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_json(path: Path, data: object) -> Path:
    """Deterministic JSON: sorted keys, fixed indentation, a final newline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path


def file_list(root: Path) -> list[dict]:
    """Every file below ``root`` except the index itself: path, size and SHA-256 (volatile: no hash)."""
    files = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        if name == INDEX:
            continue
        volatile = name == VOLATILE  # listed, but neither sized nor hashed: it changes with every build
        files.append({"path": name, "size": None if volatile else path.stat().st_size,
                      "sha256": None if volatile else sha256(path)})
    return files


def write_index(root: Path, summary: dict) -> Path:
    """``evidence.json``: the schema, ``summary`` (what was run, the verdict) and the file list."""
    return write_json(root / INDEX, {"schema": SCHEMA, **summary, "volatile": VOLATILE, "files": file_list(root)})


def archive(root: Path) -> Path:
    """``root.zip`` with the files in name order and a fixed date: the same folder gives the same bytes."""
    target = root.with_name(root.name + ".zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(f"{root.name}/{path.relative_to(root).as_posix()}", ZIP_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, path.read_bytes())
    return target


@dataclass
class Verification:
    """What ``verify`` found; intact only when every list is empty."""

    checked: int = 0
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not (self.missing or self.extra or self.modified)

    def lines(self) -> list[str]:
        return ([f"missing: {p}" for p in self.missing] + [f"extra: {p}" for p in self.extra]
                + [f"modified: {p}" for p in self.modified])


def verify(location: Path) -> Verification:
    """Recompute every hash of a package folder or its zip against its ``evidence.json``."""
    location = Path(location)
    if location.is_dir():
        files = {p.relative_to(location).as_posix(): p.read_bytes
                 for p in location.rglob("*") if p.is_file()}
        return _check(files, str(location))
    if not location.is_file():
        raise AssayError(f"{location}: no such evidence package (a folder or a .zip)")
    try:
        zf = zipfile.ZipFile(location)
    except zipfile.BadZipFile:
        raise AssayError(f"{location}: not a zip archive") from None
    with zf:
        names = [n for n in zf.namelist() if not n.endswith("/")]
        prefix = names[0].split("/", 1)[0] + "/" if names else ""
        files = {n[len(prefix):]: (lambda n=n: zf.read(n)) for n in names if n.startswith(prefix)}
        return _check(files, str(location))


def _check(files: dict, where: str) -> Verification:
    if INDEX not in files:
        raise AssayError(f"{where}: no {INDEX}: not an Assay evidence package")
    try:
        index = json.loads(files[INDEX]())
    except json.JSONDecodeError as exc:
        raise AssayError(f"{where}/{INDEX}: not JSON ({exc})") from None
    if index.get("schema") != SCHEMA:
        raise AssayError(f"{where}/{INDEX}: schema {index.get('schema')!r}, expected {SCHEMA}")
    result = Verification()
    listed = {entry["path"]: entry for entry in index.get("files", [])}
    for name, entry in sorted(listed.items()):
        if name not in files:
            result.missing.append(name)
            continue
        result.checked += 1
        data = files[name]()
        if entry["sha256"] is not None and (len(data) != entry["size"]
                                             or hashlib.sha256(data).hexdigest() != entry["sha256"]):
            result.modified.append(name)
    result.extra = sorted(set(files) - set(listed) - {INDEX})
    return result
