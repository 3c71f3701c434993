"""How a package is written: ``evidence.json`` lists every other file with its size and SHA-256 but the declared
volatile file; the archive is a deterministic zip; the package digest (``DIR.sha256`` beside ``DIR/`` and
``DIR.zip``) is the SHA-256 of ``evidence.json``'s canonical bytes, which list every other file's hash, so that one
digest binds the whole package. What ``assay evidence verify`` checks is ``integrity.py``.

Timestamps and durations live in the volatile file (``volatile.json``), not hashed but restricted by its schema to
them (``integrity.check_volatile``), so that rebuilding the package from the same inputs gives byte-identical files
elsewhere.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

from harness.digests import file_digest
from harness.stages.evidence.spec import SPEC

SCHEMA = SPEC.schema
INDEX = SPEC.result_file
VOLATILE = "volatile.json"
VOLATILE_SCHEMA = "assay-evidence-volatile/2"
# the fields of a stage's records that change from run to run: moved to volatile.json (run.py)
VOLATILE_KEYS = frozenset({"timings", "seconds", "finished_at", "analysis_s", "c_seconds", "wall_seconds"})
DIGEST_SUFFIX = ".sha256"
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold: no build time leaks into the archive


sha256 = file_digest  # the SHA-256 of a file's bytes (harness.digests), as the package's index names it


def canonical(data: object) -> bytes:
    """A JSON document's canonical bytes: sorted keys, one-space indentation, a final newline (every JSON file of
    the package is written so; the package digest is the SHA-256 of ``evidence.json``'s)."""
    return (json.dumps(data, indent=1, sort_keys=True) + "\n").encode()


class Places:
    """The folders of this machine a package must not name (the work folder, Assay's source tree, the package's own
    folder), each written as its placeholder (``$WORK``, ``$ASSAY``, ``$OUT``): paths in the package are relative to
    them or to the package itself, so that the same inputs in another ``--work`` or ``--out`` folder, or on another
    machine, give the same bytes."""

    def __init__(self, work: Path, assay: Path, out: Path | None = None) -> None:
        self.given = {str(work): "$WORK", **({str(out): "$OUT"} if out is not None else {})}
        folders = {str(Path(work).resolve()): "$WORK", str(Path(assay).resolve()): "$ASSAY",
                   **({str(Path(out).resolve()): "$OUT"} if out is not None else {})}
        # the longest first: a work folder inside Assay's tree is the work folder
        self._pattern = re.compile("|".join(re.escape(old) + r"(?![\w.-])" for old in sorted(folders, key=len,
                                                                                              reverse=True)))
        self._folders = folders

    def text(self, text: str) -> str:
        return self._pattern.sub(lambda match: self._folders[match[0]], text)

    def data(self, value):
        """``value`` (JSON data) with the folders replaced in every string."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.data(item) for item in value]
        if isinstance(value, dict):
            return {key: self.data(item) for key, item in value.items()}
        return value

    def command(self, words: list[str]) -> str:
        """A command line as one string, the folders replaced (also when given relative, as ``--work generated``)."""
        def word(text: str) -> str:
            for given, name in self.given.items():
                if text == given or text.startswith(given + "/"):
                    return name + text[len(given):]
            return self.text(text)
        return " ".join(word(w) for w in words)

    def file(self, path: Path) -> None:
        """Rewrite a text file (a report, a manifest) with the folders replaced; a binary one (a figure) is left."""
        try:
            text = path.read_bytes().decode()
        except UnicodeDecodeError:
            return
        if self.text(text) != text:
            path.write_text(self.text(text))


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
    """``root.zip`` with the files in name order, a fixed date and mode, and without ``volatile.json`` (its dates and
    timings differ from build to build, and nothing in it is a claim): two builds of the same inputs give the same
    zip, byte for byte."""
    target = root.with_name(root.name + ".zip")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p != root / VOLATILE):
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
