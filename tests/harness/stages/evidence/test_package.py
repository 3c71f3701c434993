"""How a package is written (the index, the zip, the digest file) and what is not a package; what ``verify`` finds
in a real package is in test_verify.py."""

from __future__ import annotations

import json

import pytest

from harness.errors import AssayError
from harness.stages.evidence import integrity, package


@pytest.fixture
def built(tmp_path):
    root = tmp_path / "pkg"
    (root / "results").mkdir(parents=True)
    (root / "results" / "table1.md").write_text("| a | b |\n")
    (root / package.VOLATILE).write_text('{"started_at": "now"}\n')
    package.seal(root, {"verdict": "pass"})
    return root


def test_the_index_lists_every_file_but_itself_and_the_volatile_file_and_the_digest_is_its_hash(built):
    index = json.loads((built / package.INDEX).read_text())
    assert index["schema"] == "assay-evidence/2" and index["volatile"] == package.VOLATILE
    assert index["files"] == [{"path": "results/table1.md", "size": 10, "sha256": package.sha256(
        built / "results" / "table1.md")}]
    assert (built / package.INDEX).read_bytes() == package.canonical(index)
    assert package.digest_file(built) == package.digest_file(built.with_name("pkg.zip")) == \
        built.with_name("pkg.sha256")
    assert built.with_name("pkg.sha256").read_text() == f"{package.sha256(built / package.INDEX)}  pkg/evidence.json\n"


@pytest.mark.tor("TOR-EVD-002")
def test_the_same_folder_gives_the_same_zip(built):
    first = built.with_name("pkg.zip").read_bytes()
    package.archive(built)
    assert built.with_name("pkg.zip").read_bytes() == first


def test_what_is_not_a_package_is_one_line(tmp_path, built):
    with pytest.raises(AssayError, match="no such evidence package"):
        integrity.verify(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssayError, match="not an Assay evidence package"):
        integrity.verify(tmp_path / "empty")
    (tmp_path / "bad.zip").write_text("PK?")
    with pytest.raises(AssayError, match="not a zip archive"):
        integrity.verify(tmp_path / "bad.zip")
    package.write_json(built / package.INDEX, {"schema": "assay-evidence/1", "files": []})
    with pytest.raises(AssayError, match="expected assay-evidence/2 .a package of an earlier Assay: rebuild it"):
        integrity.verify(built)


def test_the_recorded_command_names_files_by_content_not_by_path(tmp_path):
    """Issue 39: sci.json recorded ``--sign-key`` with the key's absolute path, so the same build with the key
    elsewhere differed in 6 files and named a folder of the machine."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from harness.stages.evidence.run import recorded_command

    pem = Ed25519PrivateKey.generate().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption())
    junit = tmp_path / "junit.xml"
    junit.write_text("<testsuites/>")
    recorded = []
    for place in ("a", "b/c"):
        key = tmp_path / place / "signer.pem"
        key.parent.mkdir(parents=True)
        key.write_bytes(pem)
        words = ("assay", "evidence", "--models", "acas-reg50", "--sign-key", str(key), f"--tor-junit={junit}")
        recorded.append(recorded_command(words))
    assert recorded[0] == recorded[1] and str(tmp_path) not in " ".join(recorded[0])
    assert recorded[0][5].startswith("ed25519:") and recorded[0][6].startswith("--tor-junit=sha256:")
