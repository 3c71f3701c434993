"""Peer environments: pin files, cache location, stamps (no venv is built here)."""

from __future__ import annotations

import json

from harness.digests import digest
from harness import generators
from harness.generators import peers


def test_every_peer_pins_its_own_package_exactly():
    assert peers.names() == ["acetone-nnet", "aidge", "emlearn", "emx-onnx-cgen", "keras2c"]
    for name in peers.names():
        peer = generators.get(name).peer  # the adapter's environment names the package of its release
        assert peer.name == name and (peer.package or name) in peer.pins()
        assert all(version for version in peer.pins().values())
    assert generators.get("aidge").version() == "0.10.1"


def test_cache_root_follows_xdg_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("ASSAY_PEERS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert peers.PeerEnv("emlearn").directory == tmp_path / "assay" / "peers" / "emlearn"
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path / "x"))
    assert peers.PeerEnv("emlearn").directory == tmp_path / "x" / "emlearn"


def test_stamp_of_other_pins_means_rebuild(monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path))
    env = peers.PeerEnv("emlearn")
    (env.directory / "bin").mkdir(parents=True)
    env.python.write_text("")
    stamp = {"schema": peers.STAMP_SCHEMA, "pins_sha256": digest(env.pins())}
    (env.directory / peers.STAMP).write_text(json.dumps(stamp))
    assert env.stamp() == stamp
    (env.directory / peers.STAMP).write_text(json.dumps({**stamp, "pins_sha256": "other"}))
    assert env.stamp() is None


def test_identity_changes_with_the_driver_and_pins():
    identity = peers.PeerEnv("acetone-nnet").identity()
    assert identity["pins"]["acetone-nnet"] == "1.0.post1" and len(identity["driver"]) == 64
