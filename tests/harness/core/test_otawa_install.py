"""OTAWA from ``../shared/otawa-bin`` (``harness.core.otawa_install``): unpacked once per archive into the cache,
checked that it loads, and described by ``assay doctor``; on archives made here (a stand-in ``owcet`` script), and
on the real one where it is there."""

import io
import json
import tarfile

import pytest

from harness.cli import main
from harness.core import configuration, otawa_install

FAKE_OWCET = "#!/bin/sh\necho 'owcet 9.9.9'\nexit 1\n"  # as OTAWA's: the version, exit status 1
BROKEN_OWCET = "#!/bin/sh\necho 'owcet: error while loading shared libraries: libelm.so: cannot open' >&2\nexit 127\n"


def make_archive(folder, owcet=FAKE_OWCET, name="otawa-2.0-test-x86_64.tar.xz"):
    """A tar.xz laid out as the real one: otawa-2.0/bin/owcet and an empty plugin folder."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with tarfile.open(path, "w:xz") as archive:
        for member, text, mode in (("otawa-2.0/bin/owcet", owcet, 0o755), ("otawa-2.0/lib/otawa/README", "", 0o644)):
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size, info.mode = len(data), mode
            archive.addfile(info, io.BytesIO(data))
    return path


def test_unpacked_once_per_archive_then_reused(tmp_path):
    archives, cache = tmp_path / "otawa-bin", tmp_path / "cache"
    assert otawa_install.install(archives, cache) is None and otawa_install.installed(archives, cache) is None
    path = make_archive(archives)
    assert otawa_install.installed(archives, cache) is None  # not unpacked yet
    found = otawa_install.install(archives, cache)
    assert (found.version, found.problem, found.loads) == ("owcet 9.9.9", None, True)
    assert found.home == cache / found.sha256[:16] / "otawa-2.0" and (found.bin / "owcet").is_file()
    assert found.archive == path and len(found.sha256) == 64
    assert found.describe().startswith(f"OTAWA: owcet 9.9.9 ({path.name} sha256 {found.sha256[:16]}, unpacked in ")
    marker = found.home / "touched"
    marker.write_text("")
    assert otawa_install.install(archives, cache) == found and marker.is_file()  # reused, not unpacked again
    assert otawa_install.installed(archives, cache) == found
    assert not [p for p in cache.iterdir() if p.name.startswith(f".{found.sha256[:16]}-")]  # no scratch left


def test_a_partial_unpacking_is_redone_and_two_archives_are_refused(tmp_path):
    archives, cache = tmp_path / "otawa-bin", tmp_path / "cache"
    make_archive(archives)
    found = otawa_install.install(archives, cache)
    (found.home.parent / otawa_install.STAMP).unlink()  # as if interrupted before the stamp
    assert otawa_install.installed(archives, cache) is None
    assert otawa_install.install(archives, cache).loads
    make_archive(archives, name="otawa-2.1-test-x86_64.tar.xz")
    with pytest.raises(RuntimeError, match="2 OTAWA archives"):
        otawa_install.install(archives, cache)


def test_the_loaders_one_line_message_is_the_problem(tmp_path, monkeypatch):
    archives, cache = tmp_path / "otawa-bin", tmp_path / "cache"
    make_archive(archives, BROKEN_OWCET)
    found = otawa_install.install(archives, cache)
    assert not found.loads and found.version is None
    assert found.problem == "owcet: error while loading shared libraries: libelm.so: cannot open"
    assert found.describe().endswith(": owcet: error while loading shared libraries: libelm.so: cannot open")
    monkeypatch.setenv("ASSAY_OTAWA_ARCHIVE_DIR", str(archives))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert otawa_install.usable() == (None, f"OTAWA cannot load here: {found.problem}")  # what the tests skip with
    assert otawa_install.main([]) == 1


def test_assay_doctor_reports_otawa_its_version_and_the_archives_hash(tmp_path, monkeypatch, capsys):
    archives = tmp_path / "otawa-bin"
    monkeypatch.setenv("ASSAY_OTAWA_ARCHIVE_DIR", str(archives))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("OTAWA_HOME", raising=False)
    configuration.otawa.cache_clear()
    assert configuration.otawa()["summary"].startswith(f"OTAWA: no archive in {archives}")
    make_archive(archives)
    configuration.otawa.cache_clear()
    state = configuration.otawa()
    assert not state["unpacked"] and f"sha256 {state['archive_sha256'][:16]} not unpacked" in state["summary"]
    found = otawa_install.install()
    configuration.otawa.cache_clear()
    assert configuration.otawa()["summary"] == found.describe()
    configuration.report.cache_clear()
    try:
        main(["doctor", "--json"])
        report = json.loads(capsys.readouterr().out)
        assert report["otawa"]["version"] == "owcet 9.9.9" and report["otawa"]["archive_sha256"] == found.sha256
        assert found.describe() in report["notes"]
    finally:
        configuration.otawa.cache_clear()
        configuration.report.cache_clear()


@pytest.mark.otawa
def test_the_real_archive_unpacks_and_loads_or_says_why():
    found, reason = otawa_install.usable()
    if found is None:
        pytest.skip(reason)
    assert found.version == "owcet 1.2.0"
    for tool in ("owcet", "mkff", "odisasm"):
        assert (found.bin / tool).is_file()
    assert (found.home / "lib" / "otawa" / "ilp" / "lp_solve5.so").is_file()
