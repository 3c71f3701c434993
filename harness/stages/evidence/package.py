"""How a package is written: ``evidence.json`` lists every other file with its size and SHA-256 but the declared
volatile file; the archive is a deterministic zip; the package digest (``DIR.sha256`` beside ``DIR/`` and
``DIR.zip``) is the SHA-256 of ``evidence.json``'s canonical bytes, which list every other file's hash, so that one
digest binds the whole package. What ``assay evidence verify`` checks is ``integrity.py``.

Timestamps and durations live in the volatile file (``volatile.json``), not hashed but restricted by its schema to
them (``integrity.check_volatile``), so that rebuilding the package from the same inputs gives byte-identical files
elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

from harness.stages.evidence.spec import SPEC

SCHEMA = SPEC.schema
INDEX = SPEC.result_file
VOLATILE = "volatile.json"
VOLATILE_SCHEMA = "assay-evidence-volatile/1"
# the fields of a stage's records that change from run to run: moved to volatile.json (run.py)
VOLATILE_KEYS = frozenset({"timings", "seconds", "finished_at", "analysis_s", "c_seconds", "wall_seconds"})
DIGEST_SUFFIX = ".sha256"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: no build time leaks into the archive


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def canonical(data: object) -> bytes:
    """A JSON document's canonical bytes: sorted keys, one-space indentation, a final newline (every JSON file of
    the package is written so; the package digest is the SHA-256 of ``evidence.json``'s)."""
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


def write_json(path: Path, data: object) -> Path:
    """Deterministic JSON: its canonical bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canonical(data))
    return path


def file_list(root: Path) -> list[dict]:
    """Every file below ``root`` but the index and the volatile file: path, size and SHA-256."""
    return [{"path": name, "size": path.stat().st_size, "sha256": sha256(path)}
            for path, name in ((p, p.relative_to(root).as_posix()) for p in sorted(root.rglob("*")) if p.is_file())
            if name not in (INDEX, VOLATILE)]


def write_index(root: Path, summary: dict) -> Path:
    """``evidence.json``: the schema, ``summary`` (what was run, the verdicts), the volatile file's name and the
    file list."""
    return write_json(root / INDEX, {"schema": SCHEMA, **summary, "volatile": VOLATILE, "files": file_list(root)})


def digest_file(location: Path) -> Path:
    """``DIR.sha256`` of the package ``DIR/`` or ``DIR.zip``."""
    location = Path(location)
    return location.with_name((location.stem if location.suffix == ".zip" else location.name) + DIGEST_SUFFIX)


def write_digest(root: Path) -> str:
    """Write ``DIR.sha256`` beside the package (``sha256sum -c`` reads it in the folder holding ``DIR/``); return
    the digest: the SHA-256 of ``DIR/evidence.json``, which lists every other file's."""
    digest = sha256(root / INDEX)
    digest_file(root).write_text(f"{digest}  {root.name}/{INDEX}\n")
    return digest


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


def seal(root: Path, summary: dict) -> str:
    """Finish a package whose files are written: ``evidence.json`` (``summary`` and the file list), ``DIR.zip`` and
    ``DIR.sha256``; return the package digest."""
    write_index(root, summary)
    archive(root)
    return write_digest(root)
