"""What a generator hands to the build stage: a directory of C plus its manifest.

Two manifest forms are read: the full ``manifest.json`` every Assay generator
writes (docs/manifest.md), and the small ``assay.json`` that lets C from any
other generator, or hand-written C, be checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError

FULL_MANIFEST = "manifest.json"
SMALL_MANIFEST = "assay.json"
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
HASHED_SUFFIXES = {".c", ".h", ".S", ".s", ".bin", ".cpp", ".hpp"}  # C++: Aidge's export (docs/peers.md)


@dataclass(frozen=True)
class GeneratedCode:
    """Generated sources and the facts about them that later stages need."""

    directory: Path
    entry: str
    input_size: int
    output_size: int
    input_layout: str | None  # None: the model's canonical layout
    output_layout: str | None
    sources: tuple[Path, ...]
    manifest: dict = field(repr=False)

    @classmethod
    def from_directory(cls, directory: Path) -> "GeneratedCode":
        """Read ``manifest.json`` or, failing that, ``assay.json`` in ``directory``."""
        directory = Path(directory).resolve()
        if (directory / FULL_MANIFEST).is_file():
            return cls._from_full(directory, _read_json(directory / FULL_MANIFEST))
        if (directory / SMALL_MANIFEST).is_file():
            return cls._from_small(directory, _read_json(directory / SMALL_MANIFEST))
        raise ConfigError(f"{directory}: no {FULL_MANIFEST} or {SMALL_MANIFEST} manifest")

    @classmethod
    def _from_full(cls, directory: Path, data: dict) -> "GeneratedCode":
        try:
            (inp,), (out,) = data["inputs"], data["outputs"]
            entry, sources = data["entry"]["symbol"], data["sources"]
            input_size, output_size = int(inp["size"]), int(out["size"])
            layouts = inp["layout"], out["layout"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{directory / FULL_MANIFEST}: malformed manifest ({exc!r})") from None
        path = directory / FULL_MANIFEST
        return cls(directory=directory, entry=_entry(entry, path, "entry.symbol"), input_size=input_size,
                   output_size=output_size, input_layout=layouts[0], output_layout=layouts[1],
                   sources=_sources(directory, sources, path), manifest=data)

    @classmethod
    def _from_small(cls, directory: Path, data: dict) -> "GeneratedCode":
        path = directory / SMALL_MANIFEST
        for key in ("entry", "input_size", "output_size"):
            if key not in data:
                raise ConfigError(f"{path}: missing key '{key}'")
        sources = data.get("sources") or sorted(p.name for p in directory.glob("*.c"))
        if not sources:
            raise ConfigError(f"{path}: no sources listed and no .c file in {directory}")
        try:
            sizes = int(data["input_size"]), int(data["output_size"])
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: 'input_size' and 'output_size' must be integers") from None
        if min(sizes) <= 0:
            raise ConfigError(f"{path}: 'input_size' and 'output_size' must be positive")
        _check_layers(data, sources, path)
        return cls(directory=directory, entry=_entry(data["entry"], path, "entry"),
                   input_size=sizes[0], output_size=sizes[1],
                   input_layout=data.get("input_layout"), output_layout=data.get("output_layout"),
                   sources=_sources(directory, sources, path), manifest=data)

    def source_hashes(self) -> dict[str, str]:
        """SHA-256 of every file in the directory and its subfolders that the build reads (sources, headers,
        blobs), keyed by its relative path: a generator may lay its headers out in folders (Aidge's
        ``kernels/cpp/*.hpp``), and a changed header there must rebuild too. Never through a link: a linked file
        is refused (``_regular``) and a linked folder is not entered, so no file outside the folder is read or
        hashed."""
        hashes = {}
        for folder, subfolders, files in os.walk(self.directory):  # os.walk does not follow linked folders
            subfolders.sort()
            for name in sorted(files):
                path = Path(folder) / name
                if path.suffix in HASHED_SUFFIXES:
                    hashes[path.relative_to(self.directory).as_posix()] = \
                        hashlib.sha256(_regular(path, self.directory)).hexdigest()
        return dict(sorted(hashes.items()))


def _entry(value: object, path: Path, key: str) -> str:
    """The entry symbol: a C identifier, nothing else (it becomes a ``-D`` flag of the build's command)."""
    if not isinstance(value, str) or not _IDENTIFIER.match(value):
        raise ConfigError(f"{path}: '{key}' must be a C identifier, not {str(value)[:80]!r}")
    return value


def _sources(directory: Path, names: object, path: Path) -> tuple[Path, ...]:
    """The listed sources as paths inside ``directory``: each a relative path that stays inside the folder, to a
    regular file reached through no link (a link or ``..`` could make the build read, and Assay hash, a file
    outside)."""
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ConfigError(f"{path}: 'sources' must be a list of file names")
    found = []
    for name in names:
        relative = Path(name)
        if not name or relative.is_absolute() or ".." in relative.parts or "\\" in name or "\0" in name:
            raise ConfigError(f"{path}: source {name[:80]!r} must be a relative path inside {directory.name}/")
        os.close(_open_regular(directory / relative, directory))
        found.append(directory / relative)
    return tuple(found)


def _regular(path: Path, directory: Path) -> bytes:
    """The bytes of ``path`` (``_open_regular``)."""
    with os.fdopen(_open_regular(path, directory), "rb") as stream:
        return stream.read()


def _open_regular(path: Path, directory: Path) -> int:
    """A descriptor of ``path``, a regular file under ``directory`` reached through no symbolic link (each
    folder on the way, and the file, opened with ``O_NOFOLLOW``); a ConfigError naming it otherwise."""
    relative = path.relative_to(directory)
    descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(relative.parts):
            last = index == len(relative.parts) - 1
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | (0 if last else os.O_DIRECTORY)
            try:
                following = os.open(part, flags, dir_fd=descriptor)
            except OSError as exc:
                kind = "a symbolic link" if os.path.islink(directory / Path(*relative.parts[:index + 1])) \
                    else exc.strerror
                raise ConfigError(f"{directory / relative}: refused as a source: {kind}") from None
            os.close(descriptor)
            descriptor = following
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ConfigError(f"{directory / relative}: refused as a source: not a regular file")
        return os.dup(descriptor)
    finally:
        os.close(descriptor)


def _check_layers(data: dict, sources: list, path: Path) -> None:
    """The optional keys of ``assay.json`` that name places in the code (docs/manifest.md), checked as data: the
    layer-local verdict copies ``layers[*].output.symbol`` into C and reads ``layers[*].file`` at ``lines``, so a
    symbol is a C identifier, a file one of the listed sources, every figure an integer in range; ``model.format``
    (which naming the layers' ``tensor`` follows) ``onnx`` or ``keras``. ``accumulation`` is checked where the
    bound reads it (``harness.references.bounds.Order.from_manifest``)."""
    model = data.get("model", {})
    if not isinstance(model, dict) or model.get("format", "onnx") not in ("onnx", "keras"):
        raise ConfigError(f"{path}: 'model' must be an object whose 'format' is onnx or keras, not {model!r:.80}")
    layers = data.get("layers", [])
    if not isinstance(layers, list) or not all(isinstance(layer, dict) for layer in layers):
        raise ConfigError(f"{path}: 'layers' must be a list of objects")
    for number, layer in enumerate(layers):
        where, out = f"{path}: layers[{number}]", layer.get("output")
        if out is None:
            continue
        lines = layer.get("lines")
        if not (isinstance(layer.get("index"), int) and isinstance(layer.get("name"), str)
                and layer.get("file") in sources and isinstance(lines, list) and len(lines) == 2
                and all(_count(v, 1) for v in lines) and lines[0] <= lines[1]):
            raise ConfigError(f"{where} must give 'index' (an integer), 'name', 'file' (one of the sources) and "
                              f"'lines' [first, last] (line numbers) beside its 'output'")
        if not (isinstance(out, dict) and isinstance(out.get("tensor"), str)
                and isinstance(out.get("symbol"), str) and _IDENTIFIER.match(out["symbol"])
                and _count(out.get("offset"), 0) and _count(out.get("size"), 1)):
            raise ConfigError(f"{where}.output must give 'tensor', 'symbol' (a C identifier), 'offset' (>= 0) and "
                              f"'size' (> 0), not {str(out)[:80]!r}")
        shape, layout = out.get("shape", [out["size"]]), out.get("layout", "C")
        if not (isinstance(shape, list) and all(_count(v, 1) for v in shape) and math.prod(shape) == out["size"]
                and isinstance(layout, str) and layout.isalpha() and len(layout) == len(shape)):
            raise ConfigError(f"{where}.output: 'shape' must be positive integers whose product is its size, "
                              f"'layout' one letter per axis")


def _count(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: manifest must be a JSON object")
    return data
