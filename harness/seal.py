"""Seals on what Assay caches for itself: an HMAC-SHA256 under a key only this user can read, so that an entry
reused later is one Assay wrote, not one planted in a work folder.

Why: a cache entry is reused to save minutes (the run of Assay's own tests for the evidence package, a
qualification record). A work folder is often shared, copied or restored from an archive, and a JUnit XML placed
there by hand used to be sealed into an evidence package as if Assay had run the tests (issue 39, B1). A content
key does not help, since whoever writes the entry can compute it; a MAC under a secret key the writer does not
have does. The key lives beside the user's other private state (``$XDG_CACHE_HOME/assay/seal.key``, mode 0600,
made on first use; ``$ASSAY_SEAL_KEY`` names another file); a key of another user, or readable by others, is
refused. The standard library's ``hmac`` does the work; this module only keeps the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

from harness.errors import ConfigError

KEY_BYTES = 32


def key_path() -> Path:
    if os.environ.get("ASSAY_SEAL_KEY"):
        return Path(os.environ["ASSAY_SEAL_KEY"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "assay" / "seal.key"


def _key() -> bytes:
    path = key_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except FileExistsError:
            pass  # another process made it first
        else:
            with os.fdopen(descriptor, "wb") as stream:
                stream.write(secrets.token_bytes(KEY_BYTES))
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ConfigError(f"{path}: Assay's sealing key must be a file of this user that no one else can read "
                          f"(mode {stat.S_IMODE(info.st_mode):o}); remove it and Assay makes a new one")
    data = path.read_bytes()
    if len(data) < KEY_BYTES:
        raise ConfigError(f"{path}: Assay's sealing key is too short; remove it and Assay makes a new one")
    return data


def seal(*parts: bytes | str | dict) -> str:
    """The HMAC-SHA256 (hex) of ``parts`` (bytes as they are, text as UTF-8, a dict as canonical JSON)."""
    mac = hmac.new(_key(), digestmod=hashlib.sha256)
    for part in parts:
        data = (part if isinstance(part, bytes) else part.encode() if isinstance(part, str)
                else json.dumps(part, sort_keys=True, separators=(",", ":")).encode())
        mac.update(len(data).to_bytes(8, "big") + data)
    return mac.hexdigest()


def sealed(mac: object, *parts: bytes | str | dict) -> bool:
    """Whether ``mac`` is this user's seal of ``parts``."""
    return isinstance(mac, str) and hmac.compare_digest(mac, seal(*parts))


SUFFIX = ".seal"  # beside a sealed cache file: the seal of its name and bytes


def seal_path(path: Path) -> Path:
    return path.with_name(path.name + SUFFIX)


def seal_file(path: Path, data: bytes) -> None:
    """Seal ``data``, just written to ``path`` by Assay, in ``path.seal`` (its name is sealed too: an entry moved
    under another cache key is not taken for it)."""
    seal_path(path).write_text(seal(path.name, data))


def read_sealed(path: Path) -> bytes | None:
    """The bytes of a cache file Assay wrote and sealed (``seal_file``), or None when it is absent, unsealed or
    changed since: the caller computes the entry again, as for a miss."""
    try:
        data, mac = path.read_bytes(), seal_path(path).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return data if sealed(mac, path.name, data) else None


def record_sealed(record: dict) -> dict:
    """``record`` with its seal (field ``seal``): the seal of every other field."""
    return {**record, "seal": seal({k: v for k, v in record.items() if k != "seal"})}


def is_sealed_record(record: dict) -> bool:
    return sealed(record.get("seal"), {k: v for k, v in record.items() if k != "seal"})
