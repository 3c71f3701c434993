"""Content digests shared by the registries and the core: the hash of a JSON-able value, of a source tree."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path


def digest(data: object) -> str:
    """SHA-256 of a JSON rendering of ``data`` (keys sorted; paths and other objects as strings)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


@functools.cache
def tree_digest(directory: Path, suffixes: tuple[str, ...] = (".py", ".c", ".h", ".toml")) -> str:
    """SHA-256 over the names and bytes of the files with these suffixes below ``directory``."""
    hasher = hashlib.sha256()
    for path in sorted(p for p in Path(directory).rglob("*") if p.is_file() and p.suffix in suffixes):
        hasher.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (a large JUnit XML or archive is never held whole)."""
    hasher = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            hasher.update(block)
    return hasher.hexdigest()
