"""What ``assay evidence verify DIR|DIR.zip`` checks: one line per finding, each naming the file or the part and the
effect; the package is intact only when there is none.

- The contents: every file listed in ``evidence.json`` is there with its listed size and SHA-256 (a null or missing
  hash is itself a finding); nothing else is there, in the folder or in the zip: no unlisted file, no symbolic
  link, no folder without a listed file, no zip entry outside the package's top folder. The zip is read by
  ``ziparchive.Archive``, which refuses (an ``AssayError``) any archive but one laid out as the build writes it.
- ``evidence.json`` itself: in its canonical bytes (``package.canonical``), and, when the package digest is known
  (``DIR.sha256`` beside the package, or ``--digest HEX`` from the user's configuration management), of that
  SHA-256: as ``evidence.json`` lists every other file's hash, the digest binds the whole package.
- ``volatile.json``, the one file not hashed: only the fields that may change from build to build (dates, timings,
  the doctor's notes), of their types (``check_volatile``).
- The verdicts: recomputed from the packaged files by the build's own computation (``verdicts.of_package``) and
  compared with ``verdict``, ``verdicts`` and ``tool_qualification``; a stage whose verdict part or command is
  there but whose results are not is named; the TOR matrix is recomputed from the packaged JUnit XML.
- ``sci/sci.json``: every generated code file and target image it names has its hash, and every file of a code
  folder is named.

- The signature, with ``--public-key PUB.pem``: ``DIR.sig`` beside the package verifies over ``evidence.json``'s
  bytes with that Ed25519 key (``signature.py``); a package or digest changed after signing does not.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from harness.errors import AssayError
from harness.core import configuration
from harness.stages.evidence import html, meaning, signature, tor, verdicts, ziparchive
from harness.stages.evidence.package import (INDEX, SCHEMA, VOLATILE, VOLATILE_KEYS, VOLATILE_SCHEMA, canonical,
                                             digest_file)

HEX64 = re.compile(r"[0-9a-f]{64}")
JUNIT = "tool-qualification/junit.xml"
TOR_DOCUMENT = "tool-qualification/tor.md"


@dataclass
class Verification:
    """What ``verify`` found: ``failures`` (one line each), the files whose hash was rechecked, and one line saying
    whether and against what the package digest was checked. Intact only when there is no failure."""

    location: Path
    failures: list[str] = field(default_factory=list)
    checked: int = 0
    digest: str = ""
    signature: str = "signature not checked: no --public-key"
    verdict: str = "unknown"  # the package's own verdict (evidence.json), as its files give it when intact
    built_by: str = ""  # which Assay built the package, and whether it is the one verifying it
    beside_only: bool = False  # the digest was checked only against DIR.sha256, which travels with the package

    @property
    def intact(self) -> bool:
        return not self.failures

    def lines(self) -> list[str]:
        return list(self.failures)


@dataclass
class Contents:
    """A package's files (path relative to its root -> bytes), its folders, and what its layout alone shows."""

    files: dict[str, bytes] = field(default_factory=dict)
    folders: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)


def verify(location: Path, digest: str | None = None, public_key: Path | None = None) -> Verification:
    """Check the package folder or zip at ``location`` (module docstring); ``digest``: the package digest the
    user recorded (``DIR.sha256`` beside the package is checked too when it is there); ``public_key``: the PEM file
    of the Ed25519 key the package must be signed with (``DIR.sig`` beside it)."""
    location = Path(location)
    if location.is_dir():
        contents = _folder(location)
    elif location.is_file():
        contents = _zip(location)
    else:
        raise AssayError(f"{location}: no such evidence package (a folder or a .zip)")
    if INDEX not in contents.files:
        raise AssayError(f"{location}: no {INDEX}: not an Assay evidence package")
    try:
        index = json.loads(contents.files[INDEX])
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AssayError(f"{location}/{INDEX}: not JSON ({exc})") from None
    if not isinstance(index, dict) or index.get("schema") != SCHEMA:
        found = index.get("schema") if isinstance(index, dict) else None
        raise AssayError(f"{location}/{INDEX}: schema {found!r}, expected {SCHEMA}"
                         + (" (a package of an earlier Assay: rebuild it)" if str(found).startswith("assay-evidence/")
                            else ""))
    result = Verification(location=location, failures=list(contents.failures))
    result.digest = _check_digest(contents.files[INDEX], index, location, digest, result.failures)
    if public_key is not None:
        found, result.signature = signature.check(location, contents.files[INDEX], public_key)
        result.failures += found
    result.failures += _check_volatile_file(index, contents.files, location.is_file())
    result.checked, lines = _check_files(index, contents)
    result.failures += lines
    sci = verdicts.json_or_none(contents.files.get(verdicts.SCI))
    result.failures += _check_sci(sci, index, contents.files)
    result.failures += _check_verdicts(index, sci, contents.files)
    if isinstance(sci, dict):
        result.failures += meaning.check(contents.files, sci)
    result.verdict = str(index.get("verdict"))
    result.built_by = built_by((sci or {}).get("assay") if isinstance(sci, dict) else None, configuration.identity())
    result.beside_only = digest is None and digest_file(location).is_file()
    return result


def built_by(package: dict | None, running: dict) -> str:
    """One line: the Assay (version, commit, lock) that built the package and whether the running one is the same;
    a package built by another commit or lock verifies, but its figures are that Assay's (B4 of issue 39)."""
    if not isinstance(package, dict):
        return f"built by: unknown ({verdicts.SCI} names no Assay)"
    def named(assay: dict) -> str:
        return (f"Assay {assay.get('version')} commit {assay.get('commit') or 'none'}"
                f"{' with changes' if assay.get('dirty') else ''}, lock "
                f"{str(assay.get('requirements_lock_sha256'))[:12]}")
    fields = ("version", "commit", "dirty", "requirements_lock_sha256", "sources_sha256")
    same = all(package.get(k) == running.get(k) for k in fields)
    return (f"built by: {named(package)}; " + ("the same Assay as this one" if same else
                                               f"NOT this Assay ({named(running)}): its figures are that Assay's"))


def _folder(root: Path) -> Contents:
    """The files of a package folder, under the zip reader's caps (``ziparchive``): a file, or all of them together,
    larger than a package's is a finding and is not read (a 2 GiB unlisted file used to be read whole)."""
    contents, total = Contents(), 0
    for here, folders, names in os.walk(root, followlinks=False):
        for name in list(folders):
            path = Path(here) / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                contents.failures.append(f"{relative}: a symbolic link (a package holds plain files and folders only)")
                folders.remove(name)
            else:
                contents.folders.add(relative)
        for name in names:
            path = Path(here) / name
            relative = path.relative_to(root).as_posix()
            if path.is_symlink():
                contents.failures.append(f"{relative}: a symbolic link (a package holds plain files and folders only)")
            elif not stat.S_ISREG(path.lstat().st_mode):
                contents.failures.append(f"{relative}: not a regular file")
            elif path.lstat().st_size > ziparchive.MAX_ENTRY_SIZE or \
                    total + path.lstat().st_size > ziparchive.MAX_TOTAL_SIZE:
                contents.failures.append(f"{relative}: {path.lstat().st_size} bytes, over what a package file may hold "
                                         f"({ziparchive.MAX_ENTRY_SIZE}, {ziparchive.MAX_TOTAL_SIZE} in all): not read")
            else:
                total += path.lstat().st_size
                contents.files[relative] = path.read_bytes()
    return contents


def _zip(location: Path) -> Contents:
    """The files of the zip's one package folder; an entry outside it is a finding, and never read."""
    contents = Contents()
    with ziparchive.Archive(location) as archive:
        tops = sorted({entry.name.split("/")[0] for entry in archive.entries
                       if entry.name.count("/") == 1 and entry.name.endswith("/" + INDEX)})
        if not tops:
            raise AssayError(f"{location}: no FOLDER/{INDEX}: not an Assay evidence package")
        if len(tops) > 1:
            raise AssayError(f"{location}: several packages in one zip ({', '.join(tops)})")
        top = tops[0] + "/"
        for entry in archive.entries:
            if entry.name.startswith(top):
                contents.files[entry.name[len(top):]] = archive.read(entry)
            else:
                contents.failures.append(f"{entry.name}: outside the package's folder {top} in the zip")
    return contents


def _check_digest(data: bytes, index: dict, location: Path, given: str | None, failures: list[str]) -> str:
    """Check ``evidence.json``'s bytes (canonical, of the package digest); return the line saying what was
    checked."""
    if data != canonical(index):
        failures.append(f"{INDEX}: not in its canonical form (sorted keys, one-space indentation), so not as "
                        f"written by assay evidence")
    actual = hashlib.sha256(data).hexdigest()
    beside = digest_file(location)
    sources = ([("--digest", given.strip().lower())] if given is not None else []) + \
        ([(beside.name, (beside.read_text().split() or [""])[0].lower())] if beside.is_file() else [])
    if not sources:
        return f"package digest not checked: no {beside.name} and no --digest"
    good = True
    for where, expected in sources:
        if not HEX64.fullmatch(expected):
            failures.append(f"{where}: not a SHA-256 digest")
            good = False
        elif expected != actual:
            failures.append(f"{INDEX}: package digest {actual} differs from {where} ({expected})")
            good = False
    return f"package digest {'checked' if good else 'DIFFERS'}: {actual} against {' and '.join(w for w, _ in sources)}"


def _check_volatile_file(index: dict, files: dict[str, bytes], zipped: bool) -> list[str]:
    """The volatile file against its schema; a folder has one, a zip none (``package.archive`` leaves it out, so
    that the zip is reproducible), but one added to a zip is checked all the same."""
    if index.get("volatile") != VOLATILE:
        return [f"{INDEX}: volatile names {index.get('volatile')!r}: the volatile file is {VOLATILE}"]
    if VOLATILE not in files:
        return [] if zipped else [f"{VOLATILE}: missing from the package"]
    return check_volatile(files[VOLATILE])


def _is_date(value) -> bool:
    try:
        return isinstance(value, str) and datetime.fromisoformat(value) is not None
    except ValueError:
        return False


def _is_seconds(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _is_timing(value) -> bool:
    """Seconds, or named seconds (a record's ``timings``)."""
    return _is_seconds(value) or (isinstance(value, dict) and all(
        isinstance(k, str) and _is_seconds(v) for k, v in value.items()))


def _is_stage_fields(value) -> bool:
    """``stages``: per stage of the package, one object per record with the fields run.py moved out of it."""
    return isinstance(value, dict) and all(
        name in verdicts.STAGES and isinstance(records, list) and all(
            isinstance(r, dict) and set(r) <= VOLATILE_KEYS
            and all(_is_date(v) if k == "finished_at" else _is_timing(v) for k, v in r.items()) for r in records)
        for name, records in value.items())


# The fields volatile.json may hold, with their types: dates and timings; no text (a note there, outside the digest
# and the signature, could be read as a claim: "... approved"), and no fact a verdict rests on (whether the test run
# was reused is in the signed TOR matrix), nothing else.
VOLATILE_FIELDS = {
    "schema": lambda v: v == VOLATILE_SCHEMA,
    "started_at": _is_date,
    "finished_at": _is_date,
    "stages": _is_stage_fields,
    "parts_s": lambda v: isinstance(v, dict) and all(isinstance(k, str) and _is_seconds(s) for k, s in v.items()),
    "tool_qualification_s": lambda v: v is None or _is_seconds(v),
}
VOLATILE_REQUIRED = ("schema", "started_at", "finished_at", "stages", "parts_s")
VOLATILE_LIMIT = 1 << 20  # bytes: a volatile file of a package with thousands of records is tens of kilobytes


def check_volatile(data: bytes) -> list[str]:
    """``volatile.json`` against its schema (``VOLATILE_FIELDS``): one line per unknown field, field of the wrong
    type or required field missing; a file over ``VOLATILE_LIMIT`` bytes is refused unread, and the build's end
    must not come before its start."""
    if len(data) > VOLATILE_LIMIT:
        return [f"{VOLATILE}: {len(data)} bytes, more than the {VOLATILE_LIMIT} a volatile file may hold"]
    document = verdicts.json_or_none(data)
    if not isinstance(document, dict):
        return [f"{VOLATILE}: not a JSON object"]
    lines = [f"{VOLATILE}: {key}: not a field the volatile file may hold (dates, timings)"
             for key in sorted(set(document) - set(VOLATILE_FIELDS))]
    lines += [f"{VOLATILE}: {key}: {json.dumps(document[key])[:60]} is not what the field holds"
              for key in sorted(set(document) & set(VOLATILE_FIELDS)) if not VOLATILE_FIELDS[key](document[key])]
    lines += [f"{VOLATILE}: {key}: missing" for key in VOLATILE_REQUIRED if key not in document]
    if not lines:
        try:
            backwards = datetime.fromisoformat(document["finished_at"]) < datetime.fromisoformat(document["started_at"])
        except TypeError:  # one with a time zone, one without
            backwards = True
        if backwards:
            lines.append(f"{VOLATILE}: finished_at is not after started_at")
    return lines


def _check_files(index: dict, contents: Contents) -> tuple[int, list[str]]:
    """Every listed file there with its size and SHA-256; nothing unlisted; no folder without a listed file."""
    lines, listed, checked = [], {}, 0
    entries = index.get("files")
    if not isinstance(entries, list):
        lines.append(f"{INDEX}: no file list")
        entries = []
    for entry in entries:
        path = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(path, str) or ziparchive.path_fault(path) is not None:
            lines.append(f"{INDEX}: a file entry names no path inside the package: {json.dumps(entry)[:80]}")
            continue
        if path in listed:
            lines.append(f"{path}: listed twice in {INDEX}")
            continue
        listed[path] = entry
        if path in (INDEX, VOLATILE):
            lines.append(f"{path}: listed in {INDEX}, which lists neither itself nor the volatile file")
            continue
        if path not in contents.files:
            lines.append(f"{path}: listed in {INDEX}, missing from the package")
            continue
        data, digest, size = contents.files[path], entry.get("sha256"), entry.get("size")
        checked += 1
        if not (isinstance(digest, str) and HEX64.fullmatch(digest)):
            lines.append(f"{path}: no sha256 in {INDEX} (every file but {VOLATILE} has one)")
        elif hashlib.sha256(data).hexdigest() != digest:
            lines.append(f"{path}: sha256 differs from {INDEX}")
        if not isinstance(size, int) or isinstance(size, bool):
            lines.append(f"{path}: no size in {INDEX}")
        elif len(data) != size:
            lines.append(f"{path}: size {len(data)} differs from {INDEX} ({size})")
    lines += [f"{path}: in the package, not listed in {INDEX}"
              for path in sorted(set(contents.files) - set(listed) - {INDEX, VOLATILE})]
    holding = {"/".join(path.split("/")[:n]) for path in listed for n in range(1, path.count("/") + 1)}
    lines += [f"{folder}/: a folder with no listed file" for folder in sorted(contents.folders - holding)]
    return checked, lines


def _check_sci(sci: dict | None, index: dict, files: dict[str, bytes]) -> list[str]:
    """The hashes ``sci/sci.json`` gives the generated code, the images and the archived files against the packaged
    files; every file of a code folder named (or the page rendering a named one); the commands run those of
    ``evidence.json``."""
    if not isinstance(sci, dict):
        return [f"{verdicts.SCI}: missing or not JSON"]
    lines = []
    named: dict[str, str] = {}
    try:
        for code in sci.get("generated_code", []):
            folder = code["directory"]
            named.update({f"{folder}/{name}": digest for name, digest in code["files"].items()})
            # a page rendering a named file (``html.py``: x.c -> x.c.html) is the package's, not the generator's
            lines += [f"{path}: in {folder}/, not in {verdicts.SCI}" for path in sorted(files)
                      if path.startswith(folder + "/") and path[len(folder) + 1:] not in code["files"]
                      and path[len(folder) + 1:].removesuffix(html.SUFFIX) not in code["files"]]
        named.update({image["file"]: image["sha256"] for image in sci.get("images", [])})
        named.update({copy["file"]: copy["sha256"] for copy in sci.get("archived", [])})
    except (KeyError, TypeError, AttributeError):
        return [f"{verdicts.SCI}: its generated code or images are not as its schema says"]
    for path, digest in sorted(named.items()):
        if path not in files:
            lines.append(f"{path}: named by {verdicts.SCI}, missing from the package")
        elif hashlib.sha256(files[path]).hexdigest() != digest:
            lines.append(f"{path}: sha256 differs from {verdicts.SCI}")
    if index.get("command") != sci.get("commands"):
        lines.append(f"{INDEX}: command differs from the commands of {verdicts.SCI}")
    return lines


def _check_verdicts(index: dict, sci: dict | None, files: dict[str, bytes]) -> list[str]:
    """``verdict``, ``verdicts`` and ``tool_qualification`` against what the packaged files give; every stage whose
    command was run has its results; the TOR matrix against its JUnit XML."""
    try:
        found = verdicts.of_package(files.get)
    except AssayError as exc:
        return [f"the verdicts cannot be recomputed: {exc}"]
    except (AttributeError, TypeError, KeyError, ValueError) as exc:
        return [f"the verdicts cannot be recomputed: a packaged result is not as its schema says ({exc!r:.80})"]
    stated = index.get("verdicts") if isinstance(index.get("verdicts"), dict) else {}
    lines = []
    run = {command.split()[1] for command in (sci or {}).get("commands", [])
           if isinstance(command, str) and len(command.split()) > 1} & set(verdicts.STAGES)
    for part in sorted(set(stated) | set(found.parts) | run):
        said, given = stated.get(part), found.parts.get(part)
        where = verdicts.stage_folder(part)
        if part in verdicts.STAGES and given is None:
            lines.append(f"{where}: stage missing from the package ("
                         + (f"its verdict part says {said}" if said is not None else
                            f"{verdicts.SCI} lists its command") + ")")
        elif said == given:
            continue
        elif part in verdicts.STAGES and said is None:
            lines.append(f"{where}: in the package, but {INDEX} has no verdict part for it (its results give {given})")
        elif given is None:
            lines.append(f"verdicts.{part}: {INDEX} says {said}, nothing in the package gives it")
        else:
            lines.append(f"verdicts.{part}: {INDEX} says {said}, the packaged files give {given}")
    if index.get("tool_qualification") != found.tool_qualification:
        lines.append(f"tool_qualification: {INDEX} says {index.get('tool_qualification')}, "
                     f"{verdicts.TOR_MATRIX if verdicts.TOR_MATRIX in files else 'the package (no TOR matrix)'} "
                     f"gives {found.tool_qualification}")
    if index.get("verdict") != found.verdict:
        lines.append(f"verdict: {INDEX} says {index.get('verdict')}, the packaged verdicts give {found.verdict}")
    if verdicts.TOR_MATRIX in files:
        matrix = verdicts.json_or_none(files[verdicts.TOR_MATRIX])
        if not isinstance(matrix, dict) or JUNIT not in files or TOR_DOCUMENT not in files:
            lines.append(f"{verdicts.TOR_MATRIX}: not JSON, or its {JUNIT} or {TOR_DOCUMENT} missing")
        else:
            try:
                lines += tor.recheck(matrix, files[JUNIT], files[TOR_DOCUMENT].decode())
            except (AssayError, AttributeError, TypeError, KeyError, UnicodeDecodeError) as exc:
                lines.append(f"{verdicts.TOR_MATRIX}: cannot be recomputed from {JUNIT} ({exc})")
    return lines
