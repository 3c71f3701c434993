"""The same zoo model and seed give byte-identical .keras and .onnx files (no save times in them)."""

from __future__ import annotations

import time
import zipfile

import pytest

from harness.models import zoo
from harness.models.tf_runtime import FIXED_DATE_SAVED, FIXED_ZIP_TIME

from test_nnet import SMALL


@pytest.mark.parametrize("name", ["acas-reg50", "lenet5"])
def test_same_seed_same_bytes(name, tmp_path):
    first = zoo.load(name, cache_dir=tmp_path / "a", seed=0)
    time.sleep(2.1)  # zip times have a 2 s resolution: a later build must still give the same bytes
    second = zoo.load(name, cache_dir=tmp_path / "b", seed=0)
    for fmt in ("keras", "onnx"):
        assert first.file(fmt).read_bytes() == second.file(fmt).read_bytes(), fmt
    with zipfile.ZipFile(first.file("keras")) as archive:
        infos = archive.infolist()
        assert [info.filename for info in infos] == sorted(info.filename for info in infos)
        assert all(info.date_time == FIXED_ZIP_TIME for info in infos)
        assert FIXED_DATE_SAVED in archive.read("metadata.json").decode()
    other_seed = zoo.load(name, cache_dir=tmp_path / "a", seed=1)
    assert other_seed.file("keras").read_bytes() != first.file("keras").read_bytes()


def test_converted_user_files_are_reproducible(tmp_path):
    path = tmp_path / "small.nnet"
    path.write_text(SMALL)
    first = zoo.load(path, cache_dir=tmp_path / "a")
    time.sleep(2.1)
    second = zoo.load(path, cache_dir=tmp_path / "b")
    for fmt in ("keras", "onnx"):
        assert first.file(fmt).read_bytes() == second.file(fmt).read_bytes(), fmt
