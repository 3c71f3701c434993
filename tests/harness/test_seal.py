"""Seals on Assay's own cache entries: a MAC under a key only this user can read; another key, an edited entry or
a key others can read fail."""

from __future__ import annotations

import json
import os

import pytest

from harness import seal
from harness.errors import ConfigError


def test_a_seal_holds_for_its_parts_only_and_under_its_key_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "a.key"))
    mac = seal.seal(b"junit", {"returncode": 0})
    assert seal.sealed(mac, b"junit", {"returncode": 0})
    assert not seal.sealed(mac, b"junit", {"returncode": 1}) and not seal.sealed(mac, b"junit!", {"returncode": 0})
    assert not seal.sealed(None, b"junit", {"returncode": 0})
    assert os.stat(tmp_path / "a.key").st_mode & 0o777 == 0o600
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "b.key"))  # another user's Assay: another key
    assert not seal.sealed(mac, b"junit", {"returncode": 0})


def test_a_key_others_can_read_is_refused(tmp_path, monkeypatch):
    key = tmp_path / "open.key"
    key.write_bytes(os.urandom(32))
    os.chmod(key, 0o644)
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(key))
    with pytest.raises(ConfigError, match="no one else can read"):
        seal.seal(b"x")


@pytest.mark.tor("TOR-RES-003")
def test_a_sealed_file_is_read_back_only_unchanged_under_its_name_and_key(tmp_path, monkeypatch):
    """A cache file (reference outputs, a shard) is served only as Assay wrote it: an edited, unsealed, moved or
    foreign-sealed file reads as absent, and the caller computes it again."""
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "a.key"))
    path = tmp_path / "keras-n10-abc.npy"
    path.write_bytes(b"outputs")
    assert seal.read_sealed(path) is None  # written, not sealed: planted
    seal.seal_file(path, b"outputs")
    assert seal.read_sealed(path) == b"outputs"
    moved = tmp_path / "keras-n10-def.npy"  # under another content key, with its seal
    moved.write_bytes(b"outputs")
    seal.seal_path(moved).write_text(seal.seal_path(path).read_text())
    assert seal.read_sealed(moved) is None
    path.write_bytes(b"0utputs")
    assert seal.read_sealed(path) is None
    path.write_bytes(b"outputs")
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "b.key"))
    assert seal.read_sealed(path) is None


def test_a_record_is_sealed_over_every_field_but_its_seal(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "a.key"))
    record = seal.record_sealed({"model": "m", "max_abs_error": 2.68e-7, "verdict": "pass"})
    assert seal.is_sealed_record(record) and seal.is_sealed_record(json.loads(json.dumps(record)))
    assert not seal.is_sealed_record({**record, "max_abs_error": 1.234e-12})
    assert not seal.is_sealed_record({k: v for k, v in record.items() if k != "seal"})
