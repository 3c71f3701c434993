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
