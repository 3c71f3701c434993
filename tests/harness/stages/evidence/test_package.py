"""Integrity of an evidence package: every hash rechecked, and each kind of damage named (folder and zip)."""

from __future__ import annotations

import json
import zipfile

import pytest

from harness.errors import AssayError
from harness.stages.evidence import package


@pytest.fixture
def built(tmp_path):
    root = tmp_path / "pkg"
    (root / "results").mkdir(parents=True)
    (root / "results" / "table1.md").write_text("| a | b |\n")
    (root / "sci.json").write_text(json.dumps({"schema": "assay-sci/1"}))
    (root / package.VOLATILE).write_text('{"started_at": "now"}\n')
    package.write_index(root, {"verdict": "pass"})
    package.archive(root)
    return root


@pytest.mark.tor("TOR-EVD-001")
def test_an_intact_package_and_its_zip_verify(built):
    for location in (built, built.with_name("pkg.zip")):
        result = package.verify(location)
        assert result.intact and result.checked == 3 and result.lines() == []


@pytest.mark.tor("TOR-EVD-001")
def test_tampering_deleting_and_adding_are_each_reported(built):
    table = built / "results" / "table1.md"
    table.write_bytes(table.read_bytes().replace(b"a", b"c", 1))
    (built / "sci.json").unlink()
    (built / "extra.txt").write_text("not listed")
    (built / package.VOLATILE).write_text('{"started_at": "later, and longer"}\n')  # volatile: not checked
    result = package.verify(built)
    assert not result.intact
    assert result.lines() == ["missing: sci.json", "extra: extra.txt", "modified: results/table1.md"]


@pytest.mark.tor("TOR-EVD-001")
def test_a_tampered_zip_is_reported(built, tmp_path):
    original = built.with_name("pkg.zip")
    tampered = tmp_path / "tampered.zip"
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(tampered, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            target.writestr(info, data + b" " if info.filename.endswith("table1.md") else data)
    assert package.verify(tampered).modified == ["results/table1.md"]


@pytest.mark.tor("TOR-EVD-002")
def test_the_same_folder_gives_the_same_zip(built):
    first = built.with_name("pkg.zip").read_bytes()
    package.archive(built)
    assert built.with_name("pkg.zip").read_bytes() == first


def test_what_is_not_a_package_is_one_line(tmp_path):
    with pytest.raises(AssayError, match="no such evidence package"):
        package.verify(tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssayError, match="not an Assay evidence package"):
        package.verify(tmp_path / "empty")
    (tmp_path / "bad.zip").write_text("PK?")
    with pytest.raises(AssayError, match="not a zip archive"):
        package.verify(tmp_path / "bad.zip")
