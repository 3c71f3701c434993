"""The strict reader of a package's zip (``ziparchive``, issue 39 item 4). Each crafted archive below is one that
Python's ``zipfile`` (or Info-ZIP ``unzip``) accepts, as ``verify``'s old path did, and that ``verify`` now refuses
in one line naming the archive, the entry and the cause; the archive ``package.archive`` writes is read whole."""

from __future__ import annotations

import io
import os
import shutil
import stat
import struct
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from harness.errors import AssayError
from harness.stages.evidence import integrity, package, ziparchive

UNZIP = shutil.which("unzip")
ZIP = shutil.which("zip")
BOMB_SIZE = 300 << 20  # bytes of zeros in the bomb: over MAX_ENTRY_SIZE, some 300 KB deflated
PARAMS = "code/x/acas_reg50_params.c"


@dataclass(frozen=True)
class Member:
    """One entry as ``raw_zip`` writes it, field by field: by default as ``package.archive`` writes it."""

    name: bytes
    data: bytes  # as in the archive: the deflate stream when deflated
    size: int
    crc: int
    method: int = ziparchive.DEFLATED
    mode: int = 0o644
    extra: bytes = b""
    local_name: bytes | None = None  # the local header's name when it differs from the central directory's


def deflated(name: str, data: bytes) -> Member:
    squeeze = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    return Member(name.encode(), squeeze.compress(data) + squeeze.flush(), len(data), zlib.crc32(data))


def stored(name: str, data: bytes) -> Member:
    return Member(name.encode(), data, len(data), zlib.crc32(data), method=ziparchive.STORED)


def raw_zip(members: list[Member]) -> bytes:
    """The archive of ``members``: local headers and data, central directory, end record."""
    body, directory = bytearray(), bytearray()
    time, date = ziparchive.DOS_STAMP
    for m in members:
        flags = 0 if m.name.isascii() else ziparchive.UTF8_FLAG
        local_name = m.name if m.local_name is None else m.local_name
        offset = len(body)
        body += ziparchive.LOCAL.pack(ziparchive.LOCAL_SIGNATURE, ziparchive.NEEDED, flags, m.method, time, date,
                                      m.crc, len(m.data), m.size, len(local_name), len(m.extra))
        body += local_name + m.extra + m.data
        directory += ziparchive.CENTRAL.pack(ziparchive.CENTRAL_SIGNATURE, ziparchive.MADE_BY, ziparchive.NEEDED,
                                             flags, m.method, time, date, m.crc, len(m.data), m.size, len(m.name),
                                             len(m.extra), 0, 0, 0, m.mode << 16, offset)
        directory += m.name + m.extra
    return bytes(body + directory + ziparchive.END.pack(ziparchive.END_SIGNATURE, 0, 0, len(members), len(members),
                                                        len(directory), len(body), 0))


@pytest.fixture
def built(tmp_path) -> Path:
    """A package folder sealed by ``package.seal`` (so also its zip): a text file, a non-ASCII name, an empty file,
    a 3 MB image of random bytes and zeros (inflated in many chunks)."""
    root = tmp_path / "pkg"
    files = {"results/table1.md": b"| a | b |\n", "results/r\u00e9sum\u00e9.md": "caf\u00e9\n".encode(),
             "results/empty.txt": b"", PARAMS: b"const float w[] = {0.25f, -1.5f};\n",
             "images/x/host.elf": os.urandom(3 << 19) + bytes(3 << 19)}
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / package.VOLATILE).write_text('{"started_at": "now"}\n')
    package.seal(root, {"verdict": "pass"})
    return root


def members(root: Path) -> list[Member]:
    """The package folder's entries as ``package.archive`` writes them (in its order, the volatile file left out)."""
    return [deflated(f"{root.name}/{path.relative_to(root).as_posix()}", path.read_bytes())
            for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != package.VOLATILE)]


def write(tmp_path: Path, data: bytes, name: str = "crafted.zip") -> Path:
    (tmp_path / name).write_bytes(data)
    return tmp_path / name


def refusal(location: Path) -> str:
    """``verify``'s one-line refusal of ``location``."""
    with pytest.raises(AssayError) as caught:
        integrity.verify(location)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{location}: "), message
    return message


def peak_bytes(action) -> int:
    """The most Python-allocated memory (zlib's buffers included) held at once while ``action()`` runs."""
    tracemalloc.start()
    try:
        action()
    except AssayError:
        pass
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak


@pytest.fixture(scope="module")
def bomb() -> tuple[bytes, int]:
    """``BOMB_SIZE`` zeros deflated, and their CRC-32."""
    squeeze, stream, crc, zeros = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS), bytearray(), 0, bytes(1 << 20)
    for _ in range(BOMB_SIZE >> 20):
        stream += squeeze.compress(zeros)
        crc = zlib.crc32(zeros, crc)
    return bytes(stream + squeeze.flush()), crc


def test_the_archive_package_py_writes_is_read_whole_and_as_the_folder(built):
    archive = built.with_name("pkg.zip")
    assert raw_zip(members(built)) == archive.read_bytes()  # the crafted archives below differ only by the attack
    with ziparchive.Archive(archive) as zipped:
        assert {entry.name: zipped.read(entry) for entry in zipped.entries} == {
            f"pkg/{path.relative_to(built).as_posix()}": path.read_bytes() for path in built.rglob("*")
            if path.is_file() and path.name != package.VOLATILE}
    from_zip, from_folder = integrity.verify(archive), integrity.verify(built)
    assert from_zip.checked == from_folder.checked == 5
    assert from_zip.lines() == [line for line in from_folder.lines() if not line.startswith(package.VOLATILE)]


@pytest.mark.skipif(UNZIP is None, reason="Info-ZIP unzip not installed")
def test_a_directory_entry_with_a_unicode_path_is_a_forged_file_to_unzip_and_is_refused(built, tmp_path):
    forged = b"const float w[] = {9.0f, 9.0f}; /* forged */\n"
    header = b"pkg/code/x/"  # a folder holding a listed file: the old verify saw nothing wrong with it
    unicode_path = b"\x01" + struct.pack("<L", zlib.crc32(header)) + f"pkg/{PARAMS}".encode()
    entry = replace(stored("pkg/code/x/", forged), mode=0o40755,
                    extra=struct.pack("<2H", 0x7075, len(unicode_path)) + unicode_path)
    crafted = write(tmp_path, raw_zip(members(built) + [entry]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.getinfo("pkg/code/x/").is_dir() and zf.read(f"pkg/{PARAMS}") == (built / PARAMS).read_bytes()
    subprocess.run([UNZIP, "-o", "-q", str(crafted), "-d", str(tmp_path / "out")], check=True)
    assert (tmp_path / "out" / "pkg" / PARAMS).read_bytes() == forged
    assert refusal(crafted) == (f"{crafted}: pkg/code/x/: extra field 0x7075 (Info-ZIP Unicode Path) in its "
                                f"central header (the package's zip has none)")


def test_a_local_header_naming_another_file_is_one_line_not_a_traceback(built, tmp_path):
    entries = members(built)
    entries[0] = replace(entries[0], local_name=entries[0].name.replace(b"/", b"_", 1))
    crafted = write(tmp_path, raw_zip(entries))
    with zipfile.ZipFile(crafted) as zf, pytest.raises(zipfile.BadZipFile, match="differ"):
        zf.read(entries[0].name.decode())  # the old verify let this out as a traceback
    assert refusal(crafted) == (f"{crafted}: {entries[0].name.decode()}: its local header differs from its central "
                                f"directory entry: name {entries[0].local_name.decode()}")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "verify", str(crafted)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.splitlines() == [f"assay: error: {refusal(crafted)}"]


@pytest.mark.parametrize("attack, cause", [
    ("prepended", "100 bytes before its first local header (data prepended to the archive)"),
    ("appended", "100 bytes after the end-of-central-directory record (data appended to the archive)"),
    ("comment", "an archive comment (7 bytes)")], ids=["prepended", "appended", "comment"])
def test_bytes_around_the_archive_or_a_comment_are_refused(built, tmp_path, attack, cause):
    good = built.with_name("pkg.zip").read_bytes()
    data = {"prepended": b"#" * 100 + good, "appended": good + b"#" * 100,
            "comment": good[:-2] + struct.pack("<H", 7) + b"hidden!"}[attack]
    crafted = write(tmp_path, data)
    with zipfile.ZipFile(crafted) as zf, zipfile.ZipFile(built.with_name("pkg.zip")) as original:
        assert zf.testzip() is None and {n: zf.read(n) for n in zf.namelist()} == {
            n: original.read(n) for n in original.namelist()}
    assert refusal(crafted) == f"{crafted}: {cause}"


@pytest.mark.parametrize("mode", [0o6777, 0o100666, 0o104755, 0o120777], ids=oct)
def test_a_mode_other_than_a_plain_file_s_is_refused(built, tmp_path, mode):
    crafted = write(tmp_path, raw_zip(members(built) + [replace(deflated("pkg/bin/tool", b"#!/bin/sh\n"),
                                                                mode=mode)]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.testzip() is None and zf.getinfo("pkg/bin/tool").external_attr >> 16 == mode
    if UNZIP is not None and mode & stat.S_IWOTH:
        subprocess.run([UNZIP, "-o", "-q", str(crafted), "-d", str(tmp_path / "out")], check=True)
        assert (tmp_path / "out" / "pkg" / "bin" / "tool").lstat().st_mode & stat.S_IWOTH  # world-writable
    kind = "a symbolic link" if mode == 0o120777 else "not a regular file of mode 0o644 or 0o755"
    assert refusal(crafted) == (f"{crafted}: pkg/bin/tool: mode {mode:#o} (external attributes {mode << 16:#010x}):"
                                f" {kind} (set-id, sticky, group- and world-writable bits are refused)")


def test_a_zip_bomb_declaring_more_than_the_cap_is_refused_before_anything_is_inflated(built, tmp_path, bomb):
    stream, crc = bomb
    assert len(stream) < 400_000
    crafted = write(tmp_path, raw_zip(members(built) + [Member(b"pkg/bomb.bin", stream, BOMB_SIZE, crc)]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.testzip() is None  # zipfile inflates all 300 MB and finds them good: the old verify held them
    assert refusal(crafted) == (f"{crafted}: pkg/bomb.bin: declares {BOMB_SIZE} bytes, over the cap of "
                                f"{ziparchive.MAX_ENTRY_SIZE} per entry")
    assert peak_bytes(lambda: integrity.verify(crafted)) < 1 << 20


def test_more_than_the_caps_declared_in_all_is_refused_before_anything_is_inflated(built, tmp_path):
    tiny = deflated("x", b"x")
    many = [replace(tiny, name=f"pkg/part{n}.bin".encode(), size=250 << 20) for n in range(5)]
    crafted = write(tmp_path, raw_zip(members(built) + many))
    with zipfile.ZipFile(crafted) as zf:
        assert sum(info.file_size for info in zf.infolist()) > ziparchive.MAX_TOTAL_SIZE
    assert refusal(crafted) == (f"{crafted}: pkg/part4.bin: its entries declare more than the cap of "
                                f"{ziparchive.MAX_TOTAL_SIZE} bytes together")
    assert peak_bytes(lambda: integrity.verify(crafted)) < 1 << 20
    crowd = write(tmp_path, raw_zip(members(built) + [stored(f"pkg/n/{n}", b"") for n in range(
        ziparchive.MAX_ENTRIES)]), "crowd.zip")
    with zipfile.ZipFile(crowd) as zf:
        assert len(zf.namelist()) == ziparchive.MAX_ENTRIES + len(members(built))
    assert refusal(crowd) == f"{crowd}: {ziparchive.MAX_ENTRIES + len(members(built))} entries, over the cap of " \
                             f"{ziparchive.MAX_ENTRIES}"


def test_a_header_declaring_less_than_its_stream_gives_is_refused_while_inflating_in_bounded_memory(built, tmp_path,
                                                                                                   bomb):
    stream, _ = bomb
    declared = 1 << 20
    lying = Member(b"pkg/bomb.bin", stream, declared, zlib.crc32(bytes(declared)))
    crafted = write(tmp_path, raw_zip(members(built) + [lying]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.read("pkg/bomb.bin") == bytes(declared)  # zipfile stops at the declared size: the lie goes unseen
    assert refusal(crafted) == (f"{crafted}: pkg/bomb.bin: inflates to more than the {declared} bytes its header "
                                f"declares (stopped at {declared + ziparchive.CHUNK})")
    with ziparchive.Archive(crafted) as archive:  # the bomb alone (verify holds the package's other files too)
        peak = peak_bytes(lambda: archive.read(archive.entries[-1]))
    assert peak < 4 << 20, peak  # a few MB (the declared MB, a few chunks), not the 300 MB the stream inflates to


def test_a_header_declaring_more_than_its_stream_gives_is_refused(built, tmp_path):
    data = os.urandom(1 << 20)
    crafted = write(tmp_path, raw_zip(members(built) + [replace(deflated("pkg/short.bin", data), size=2 << 20)]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.read("pkg/short.bin") == data  # zipfile returns the shorter file without a word
    assert refusal(crafted) == f"{crafted}: pkg/short.bin: {1 << 20} bytes, {2 << 20} declared"


@pytest.mark.parametrize("method", [ziparchive.DEFLATED, ziparchive.STORED])
def test_a_crc_mismatch_is_refused_in_the_chunked_path(built, tmp_path, method):
    data = os.urandom(3 * ziparchive.CHUNK + 5)
    good = (deflated if method == ziparchive.DEFLATED else stored)("pkg/image.bin", data)
    crafted = write(tmp_path, raw_zip(members(built) + [replace(good, crc=good.crc ^ 1)]))
    with zipfile.ZipFile(crafted) as zf, pytest.raises(zipfile.BadZipFile, match="Bad CRC-32"):
        zf.read("pkg/image.bin")  # a traceback on the old path
    assert refusal(crafted) == (f"{crafted}: pkg/image.bin: CRC-32 {good.crc:#010x} differs from its header's "
                                f"{good.crc ^ 1:#010x}")


@pytest.mark.parametrize("first, second, cause", [
    ("pkg/notes/a.md", "pkg/notes/a.md", "in the zip twice"),
    ("pkg/notes/A.md", "pkg/notes/a.md", "the same name as pkg/notes/A.md on a case-insensitive disk"),
    ("pkg/notes", "pkg/notes/a.md", "both a file and a folder of other entries")],
    ids=["twice", "case", "file-and-folder"])
def test_a_name_given_twice_or_colliding_on_disk_is_refused(built, tmp_path, first, second, cause):
    entries = [deflated(first, b"one\n"), deflated(second, b"two\n")]
    crafted = write(tmp_path, raw_zip(members(built) + entries))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.testzip() is None and {first, second} <= set(zf.namelist())
    shown = first if cause == "both a file and a folder of other entries" else second
    assert refusal(crafted) == f"{crafted}: {shown}: {cause}"


@pytest.mark.parametrize("name, cause", [
    ("pkg/../evil.c", "an empty, '.' or '..' part in its name"),
    ("pkg/./evil.c", "an empty, '.' or '..' part in its name"),
    ("pkg//evil.c", "an empty, '.' or '..' part in its name"),
    ("/pkg/evil.c", "an absolute path"),
    ("pkg\\evil.c", "a backslash in its name (a folder separator on Windows)"),
    ("pkg/evil\x00.c", "a control character (NUL, newline, ...) in its name"),
    ("pkg/evil\n.c", "a control character (NUL, newline, ...) in its name")],
    ids=["dot-dot", "dot", "empty-part", "absolute", "backslash", "nul", "newline"])
def test_a_name_that_is_not_a_plain_relative_path_is_refused(built, tmp_path, name, cause):
    crafted = write(tmp_path, raw_zip(members(built) + [deflated(name, b"int evil;\n")]))
    with zipfile.ZipFile(crafted) as zf:
        assert zf.testzip() is None and zf.infolist()[-1].filename == name.split("\x00")[0]  # NUL: zipfile cuts
    shown = name if name.isprintable() else ascii(name)
    assert refusal(crafted) == f"{crafted}: {shown}: {cause}"


class Unseekable(io.BytesIO):
    """A pipe as ``zipfile`` sees it: it then writes each entry's sizes and CRC in a data descriptor."""

    def seekable(self) -> bool:
        return False

    def seek(self, *args) -> int:
        raise OSError("unseekable")


def another_writer(kind: str, good: Path, tmp_path: Path) -> Path:
    """``good`` as another zip writer gives it: through a pipe (a data descriptor per entry), or with one more entry
    ``pkg/more.c`` written by Info-ZIP ``zip`` or by ``zipfile`` with a zip64 header, bzip2, as a folder or dated."""
    crafted = tmp_path / "crafted.zip"
    if kind == "data descriptor":
        pipe = Unseekable()
        with zipfile.ZipFile(good) as source, zipfile.ZipFile(pipe, "w") as zf:
            for info in source.infolist():
                zf.writestr(info, source.read(info))
        crafted.write_bytes(pipe.getvalue())
        return crafted
    if kind == "Info-ZIP zip":
        (tmp_path / "zip" / "pkg").mkdir(parents=True)
        (tmp_path / "zip" / "pkg" / "more.c").write_text("int more;\n")
        subprocess.run([ZIP, "-q", str(crafted), "pkg/more.c"], cwd=tmp_path / "zip", check=True)
        with zipfile.ZipFile(good) as source, zipfile.ZipFile(crafted, "a") as zf:
            for info in source.infolist():
                zf.writestr(info, source.read(info))
        return crafted
    shutil.copyfile(good, crafted)
    info = zipfile.ZipInfo("pkg/more.c" + ("/" if kind == "directory" else ""),
                           (2024, 5, 1, 12, 0, 0) if kind == "date" else package.ZIP_DATE)
    info.external_attr = 0o644 << 16
    info.compress_type = zipfile.ZIP_BZIP2 if kind == "bzip2" else zipfile.ZIP_STORED
    with zipfile.ZipFile(crafted, "a") as zf:
        if kind == "zip64":
            with zf.open(info, "w", force_zip64=True) as entry:
                entry.write(b"int more;\n")
        else:
            zf.writestr(info, b"" if kind == "directory" else b"int more;\n")
    return crafted


OTHER_WRITERS = {  # the refusal of what each writer adds
    "Info-ZIP zip": "pkg/more.c: extra field 0x5455 (extended timestamp), 0x7875 (Info-ZIP Unix UID/GID) in its "
                    "central header (the package's zip has none)",
    "zip64": "pkg/more.c: extra field 0x0001 (zip64) in its local header (the package's zip has none)",
    "bzip2": "pkg/more.c: compression method 12 (only stored, 0, and deflate, 8)",
    "data descriptor": f"pkg/{PARAMS}: general-purpose flags 0x0008, not 0x0000 (no encryption, no data descriptor, "
                       "the UTF-8 flag on a non-ASCII name only)",
    "directory": "pkg/more.c/: a directory entry (the package's zip holds files only)",
    "date": "pkg/more.c: dated 2024-05-01 12:00:00, not 1980-01-01 00:00:00 as every entry of the package's zip"}


@pytest.mark.parametrize("kind", OTHER_WRITERS)
def test_what_another_zip_writer_adds_is_refused(built, tmp_path, kind):
    if kind == "Info-ZIP zip" and ZIP is None:
        pytest.skip("Info-ZIP zip not installed")
    crafted = another_writer(kind, built.with_name("pkg.zip"), tmp_path)
    with zipfile.ZipFile(crafted) as zf:
        assert zf.testzip() is None and "pkg/evidence.json" in zf.namelist()
    assert refusal(crafted) == f"{crafted}: {OTHER_WRITERS[kind]}"

