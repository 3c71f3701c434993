"""The one reader of an evidence package's zip (``assay evidence verify DIR.zip``): it accepts only an archive laid
out as ``package.archive`` writes one, and refuses anything else with one line naming the archive, the entry and
the cause.

Python's ``zipfile`` alone is not enough: it reads what other tools read differently, and reads without bounds.
It ignores the Info-ZIP Unicode Path extra field (0x7075), which Info-ZIP ``unzip`` obeys, so an entry ``zipfile``
sees as a directory (its data unread) is extracted by ``unzip`` as a forged file; it accepts data prepended or
appended to the archive, a comment, any mode (``unzip`` restores a world-writable one) and date, a name cut at a
NUL; it returns an entry shorter than its declared size without a word, stops at a declared size shorter than
the stream without noticing, and finds a local header that names another file only when that entry is read
(``BadZipFile``: a traceback); and it inflates an entry whole into memory, however large its header says it is.
Each is a way for what ``verify`` checked to differ from what the user unpacks, or to exhaust the machine.

Refused, for every entry before any is inflated: an extra field in a local or central header (``package.archive``
writes none: no Unicode Path, no zip64, no timestamps); an archive or entry comment; bytes before the first local
header, between entries, between the last entry and the central directory, or after the end-of-central-directory
record (which must end the file); a zip64 record (the builder writes one only past the caps below); a local
header whose name, versions, flags, method, date, CRC or sizes differ from its central entry (the builder writes
no data descriptor, so the local header holds them all); encryption, a data descriptor, or the UTF-8 flag other
than on a non-ASCII name; versions but ``zipfile``'s (made by Unix, so that the mode means what it says, zip 2.0);
a method but stored (0) and deflate (8); a directory entry (the builder writes none); a name that is not a plain
relative POSIX path (``path_fault``), given twice, or equal to another on a case-insensitive disk or to a folder
of another; more than ``MAX_ENTRIES`` entries, an entry declaring more than ``MAX_ENTRY_SIZE`` bytes (compressed
or not), entries declaring more than ``MAX_TOTAL_SIZE`` together, an archive larger than that.

Refused when an entry is read (``Archive.read``; ``integrity.py`` reads every entry inside the package's folder,
and one outside it is a finding of its own, never read, whatever its mode or date): a mode but a regular file's
0o644 or 0o755 (no set-id, sticky, group- or world-writable bit, no link), a date but ``package.ZIP_DATE``.
Inflation is done ``CHUNK`` bytes at a time and stops as soon as the output exceeds the declared size; the output
must then be exactly that size, the deflate stream end exactly at the entry's compressed size, and the CRC-32
match.
"""

from __future__ import annotations

import os
import stat
import struct
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Iterator, NoReturn

from harness.errors import AssayError
from harness.stages.evidence.package import ZIP_DATE

# Caps on what a package may declare, far above a real one (acas-reg50 on the host: 152 entries, 8.9 MB in all, its
# largest entry 1.5 MB), so that a hostile header cannot make ``verify`` hold gigabytes.
MAX_ENTRIES = 10_000
MAX_ENTRY_SIZE = 256 << 20
MAX_TOTAL_SIZE = 1 << 30
MAX_NAME_BYTES = 1024
CHUNK = 1 << 18  # bytes read or inflated at a time

LOCAL = struct.Struct("<4s5H3L2H")  # signature, needed, flags, method, time, date, CRC, sizes, name and extra lengths
CENTRAL = struct.Struct("<4s6H3L5H2L")  # the same after "made by", then comment length, disk, attributes, offset
END = struct.Struct("<4s4H2LH")  # signature, disks, entries here and in all, directory size and offset, comment
LOCAL_SIGNATURE, CENTRAL_SIGNATURE, END_SIGNATURE = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"

# what ``zipfile`` writes for ``package.archive`` on a POSIX system: made by Unix (3), zip 2.0, needing 2.0
MADE_BY, NEEDED = 3 << 8 | 20, 20
UTF8_FLAG = 0x800
STORED, DEFLATED = 0, 8
# 0o644 is what ``package.archive`` writes (no file type: a regular file to ``unzip``); the others are a regular
# file as other zip writers give one
MODES = frozenset({0o644, 0o100644, 0o100755})
EXTRA_FIELDS = {0x0001: "zip64", 0x5455: "extended timestamp", 0x6375: "Info-ZIP Unicode Comment",
                0x7075: "Info-ZIP Unicode Path", 0x7875: "Info-ZIP Unix UID/GID"}


def _dos(date_time: tuple[int, ...]) -> tuple[int, int]:
    """(time, date) of a zip header."""
    year, month, day, hour, minute, second = date_time
    return hour << 11 | minute << 5 | second // 2, (year - 1980) << 9 | month << 5 | day


def _date(stamp: tuple[int, int]) -> str:
    time, date = stamp
    return (f"{(date >> 9) + 1980:04d}-{date >> 5 & 15:02d}-{date & 31:02d} "
            f"{time >> 11:02d}:{time >> 5 & 63:02d}:{(time & 31) * 2:02d}")


DOS_STAMP = _dos(ZIP_DATE)


@dataclass(frozen=True)
class Entry:
    """One entry as its central header declares it (its local header found equal), and where its data starts."""

    name: str
    method: int
    crc: int
    compressed: int
    size: int
    external: int
    stamp: tuple[int, int]
    data_offset: int

    @property
    def mode(self) -> int:
        return self.external >> 16


def path_fault(path: str) -> str | None:
    """Why ``path`` is not a plain relative POSIX path inside a package (None when it is): the one rule for the
    zip's entry names and ``evidence.json``'s file paths."""
    if any(character < " " or character == "\x7f" for character in path):
        return "a control character (NUL, newline, ...) in its name"
    if path.startswith("/"):
        return "an absolute path"
    if "\\" in path:
        return "a backslash in its name (a folder separator on Windows)"
    if any(part in ("", ".", "..") for part in path.split("/")):
        return "an empty, '.' or '..' part in its name"
    return None


def _shown(name: str) -> str:
    """``name`` as a message can hold it on one line."""
    return name if name.isprintable() else ascii(name)


def _extra_fields(extra: bytes) -> str:
    ids = []
    while len(extra) >= 4:
        field, length = struct.unpack_from("<2H", extra)
        ids.append(f"{field:#06x}" + (f" ({EXTRA_FIELDS[field]})" if field in EXTRA_FIELDS else ""))
        extra = extra[4 + length:]
    return ", ".join(ids) or f"{len(extra)} bytes"


class Archive:
    """An evidence package's zip, open and checked (module docstring): ``entries`` in the archive's order, and
    ``read``. One open file serves the checks and the reads, so the bytes checked are the bytes read."""

    def __init__(self, location: Path) -> None:
        self.location = Path(location)
        try:
            self._stream = open(self.location, "rb")
        except OSError as exc:
            raise AssayError(f"{self.location}: cannot be read ({exc.strerror})") from None
        try:
            self.entries = self._entries()
        except BaseException:
            self._stream.close()
            raise

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._stream.close()

    def _refuse(self, cause: str, entry: str | None = None) -> NoReturn:
        raise AssayError(f"{self.location}: " + (f"{_shown(entry)}: " if entry is not None else "") + cause)

    def _read_at(self, offset: int, size: int) -> bytes:
        self._stream.seek(offset)
        return self._stream.read(size)

    def _end(self, size: int) -> tuple[int, int, int]:
        """The end-of-central-directory record, the file's last ``END.size`` bytes: (entries, directory size,
        directory offset)."""
        if size > MAX_TOTAL_SIZE:
            self._refuse(f"{size} bytes, over the cap of {MAX_TOTAL_SIZE} for a package's zip")
        tail = self._read_at(max(0, size - END.size - 0xFFFF), END.size + 0xFFFF)  # room for a comment
        found = tail.rfind(END_SIGNATURE)
        if found < 0 or len(tail) - found < END.size:
            self._refuse("not a zip archive (no end-of-central-directory record)")
        if found != len(tail) - END.size:
            after = len(tail) - found - END.size
            comment = END.unpack_from(tail, found)[-1]
            self._refuse(f"an archive comment ({comment} bytes)" if comment == after else
                         f"{after} bytes after the end-of-central-directory record (data appended to the archive)")
        _, disk, directory_disk, here, count, directory_size, directory_offset, comment = END.unpack_from(tail, found)
        if comment:
            self._refuse(f"its end-of-central-directory record declares a comment of {comment} bytes past the end")
        if (found >= 20 and tail[found - 20:found - 16] == ZIP64_LOCATOR or 0xFFFF in (here, count)
                or 0xFFFFFFFF in (directory_size, directory_offset)):
            self._refuse("a zip64 record (the package's zip has none)")
        if disk or directory_disk or here != count:
            self._refuse("spans several disks")
        if count > MAX_ENTRIES:
            self._refuse(f"{count} entries, over the cap of {MAX_ENTRIES}")
        start = size - END.size - directory_size - directory_offset
        if start > 0:
            self._refuse(f"{start} bytes before its first local header (data prepended to the archive)")
        if start < 0:
            self._refuse("its central directory overlaps its end-of-central-directory record")
        return count, directory_size, directory_offset

    def _entries(self) -> list[Entry]:
        count, directory_size, directory_offset = self._end(os.fstat(self._stream.fileno()).st_size)
        if directory_size > count * (CENTRAL.size + MAX_NAME_BYTES):
            self._refuse(f"a central directory of {directory_size} bytes for {count} entries")
        directory = self._read_at(directory_offset, directory_size)
        entries: list[Entry] = []
        at, offset, total, keys = 0, 0, 0, {}
        for _ in range(count):
            if len(directory) - at < CENTRAL.size or directory[at:at + 4] != CENTRAL_SIGNATURE:
                self._refuse(f"its central directory ends inside entry {len(entries) + 1} of {count}")
            header = CENTRAL.unpack_from(directory, at)
            name_length, extra_length, comment_length = header[10:13]
            raw = directory[at + CENTRAL.size:at + CENTRAL.size + name_length]
            extra = directory[at + CENTRAL.size + name_length:at + CENTRAL.size + name_length + extra_length]
            at += CENTRAL.size + name_length + extra_length + comment_length
            entry = self._entry(header, raw, extra, offset, keys)
            total += entry.size
            if total > MAX_TOTAL_SIZE:
                self._refuse(f"its entries declare more than the cap of {MAX_TOTAL_SIZE} bytes together", entry.name)
            entries.append(entry)
            offset = entry.data_offset + entry.compressed
        if at != directory_size:
            self._refuse(f"{directory_size - at} bytes in its central directory after its last entry")
        if offset != directory_offset:
            self._refuse(f"{directory_offset - offset} bytes between its last entry's data and its central directory")
        folders = {"/".join(key.split("/")[:n]) for key in keys for n in range(1, key.count("/") + 1)}
        for clash in sorted(set(keys) & folders):
            self._refuse("both a file and a folder of other entries", keys[clash])
        return entries

    def _entry(self, header: tuple, raw: bytes, extra: bytes, offset: int, keys: dict[str, str]) -> Entry:
        """Check one central header and its local header (at ``offset``, where the previous entry's data ended);
        ``keys``: the names so far, by their case-folded form."""
        (_, made_by, needed, flags, method, time, date, crc, compressed, size, name_length, extra_length,
         comment_length, disk, internal, external, local_offset) = header
        name = raw.decode("utf-8", "backslashreplace")
        if extra:
            self._refuse(f"extra field {_extra_fields(extra)} in its central header (the package's zip has none)", name)
        if comment_length:
            self._refuse("an entry comment (the package's zip has none)", name)
        if name.endswith("/"):
            self._refuse("a directory entry" + (f" carrying {max(size, compressed)} bytes" if size or compressed
                                                else "") + " (the package's zip holds files only)", name)
        if len(raw) > MAX_NAME_BYTES:
            self._refuse(f"a name of {len(raw)} bytes, over the cap of {MAX_NAME_BYTES}", name)
        expected = 0 if raw.isascii() else UTF8_FLAG
        if flags != expected:
            self._refuse(f"general-purpose flags {flags:#06x}, not {expected:#06x} (no encryption, no data "
                         f"descriptor, the UTF-8 flag on a non-ASCII name only)", name)
        if not raw.isascii():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                self._refuse("a name flagged UTF-8 that is not", name)
        fault = path_fault(name)
        if fault:
            self._refuse(fault, name)
        key = unicodedata.normalize("NFC", name).casefold()
        if key in keys:
            self._refuse("in the zip twice" if keys[key] == name else
                         f"the same name as {_shown(keys[key])} on a case-insensitive disk", name)
        keys[key] = name
        if method not in (STORED, DEFLATED):
            self._refuse(f"compression method {method} (only stored, 0, and deflate, 8)", name)
        if method == STORED and compressed != size:
            self._refuse(f"stored, but {compressed} bytes in the archive for {size} declared", name)
        if max(size, compressed) > MAX_ENTRY_SIZE:
            self._refuse(f"declares {max(size, compressed)} bytes, over the cap of {MAX_ENTRY_SIZE} per entry", name)
        if local_offset != offset:
            self._refuse(f"its local header is at {local_offset}, not at {offset} where the previous entry ends "
                         f"(entries overlap or have bytes between them)", name)
        local = self._read_at(offset, LOCAL.size + name_length)
        if len(local) < LOCAL.size or local[:4] != LOCAL_SIGNATURE:
            self._refuse(f"no local header at {offset}", name)
        fields = LOCAL.unpack_from(local)
        if fields[-1]:
            self._refuse(f"extra field {_extra_fields(self._read_at(offset + LOCAL.size + fields[-2], fields[-1]))} "
                         f"in its local header (the package's zip has none)", name)
        declared = (needed, flags, method, time, date, crc, compressed, size, name_length)
        if fields[1:-1] != declared or local[LOCAL.size:LOCAL.size + name_length] != raw:
            local_name = self._read_at(offset + LOCAL.size, fields[-2]).decode("utf-8", "backslashreplace")
            differing = [label for label, there, here in zip(
                ("version needed", "flags", "method", "time", "date", "CRC-32", "compressed size", "size",
                 "name length"), fields[1:-1], declared) if there != here]
            if local_name != name:
                differing.append(f"name {_shown(local_name)}")
            self._refuse(f"its local header differs from its central directory entry: {', '.join(differing)}", name)
        if (made_by, needed, disk, internal) != (MADE_BY, NEEDED, 0, 0):
            self._refuse(f"made by {made_by:#06x}, needing version {needed}, on disk {disk}, internal attributes "
                         f"{internal:#x}: not {MADE_BY:#06x}, {NEEDED}, 0, 0 as the package's zip", name)
        return Entry(name=name, method=method, crc=crc, compressed=compressed, size=size, external=external,
                     stamp=(time, date), data_offset=offset + LOCAL.size + name_length)

    def read(self, entry: Entry) -> bytes:
        """``entry``'s bytes, its mode and date checked first, inflated ``CHUNK`` at a time (module docstring)."""
        if entry.mode not in MODES or entry.external & 0xFFFF:
            kind = "a symbolic link" if stat.S_ISLNK(entry.mode) else "not a regular file of mode 0o644 or 0o755"
            self._refuse(f"mode {entry.mode:#o} (external attributes {entry.external:#010x}): {kind} (set-id, "
                         f"sticky, group- and world-writable bits are refused)", entry.name)
        if entry.stamp != DOS_STAMP:
            self._refuse(f"dated {_date(entry.stamp)}, not {_date(DOS_STAMP)} as every entry of the package's zip",
                         entry.name)
        data, crc = bytearray(), 0
        for piece in self._pieces(entry):
            data += piece
            crc = zlib.crc32(piece, crc)
        if len(data) != entry.size:
            self._refuse(f"{len(data)} bytes, {entry.size} declared", entry.name)
        if crc != entry.crc:
            self._refuse(f"CRC-32 {crc:#010x} differs from its header's {entry.crc:#010x}", entry.name)
        return bytes(data)

    def _pieces(self, entry: Entry) -> Iterator[bytes]:
        """The entry's bytes, at most ``CHUNK`` at a time, never more in all than it declares."""
        self._stream.seek(entry.data_offset)
        left = entry.compressed
        inflater = zlib.decompressobj(-zlib.MAX_WBITS) if entry.method == DEFLATED else None
        pending, produced = b"", 0
        while True:
            if not pending and left:
                pending = self._stream.read(min(CHUNK, left))
                if not pending:
                    self._refuse("its data runs past the end of the archive", entry.name)
                left -= len(pending)
            if inflater is None:
                piece, pending = pending, b""
            else:
                try:
                    piece = inflater.decompress(pending, CHUNK)
                except zlib.error as exc:
                    self._refuse(f"not a valid deflate stream ({exc})", entry.name)
                pending = inflater.unconsumed_tail
            produced += len(piece)
            if produced > entry.size:
                self._refuse(f"inflates to more than the {entry.size} bytes its header declares (stopped at "
                             f"{produced})", entry.name)
            if piece:
                yield piece
            if (inflater is None and not left) or (inflater is not None and inflater.eof):
                break
            if not piece and not pending and not left:
                self._refuse("its deflate stream ends before its end-of-stream block", entry.name)
        if inflater is not None and (pending or left or inflater.unused_data):
            self._refuse("bytes after the end of its deflate stream, within its compressed size", entry.name)
