"""Seals on Assay's own cache entries: a MAC under a key only this user can read; another key, an edited entry or
a key others can read fail."""

from __future__ import annotations

import os

import pytest

from harness.core import seal
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
