"""Input shards: an item's input set cut into slices that run as separate units, on any worker or host.

A shard is the slice ``start .. stop`` of the item's ``n_inputs`` seeded inputs
(``harness.core.inputs.make_inputs(..., start=)`` draws it alone, equal to the
same slice of the whole set), so a sharded run sees exactly the inputs of an
unsharded one. Each finished shard is kept in a ``ShardStore``: one ``.npz``
file per shard holding its arrays (the C outputs, the counts...) and a JSON
``meta`` (schema ``assay-shard/1``, docs/schemas.md), named by the item, the
content key (``harness.core.fingerprint``) and the slice, so a killed campaign
keeps its finished shards and a changed model, option or toolchain is
recomputed. A stage merges the shards' arrays in input order and computes its
record from them with the same code as an unsharded run: the record is the
same (``max_abs_error``, the median, the worst input's global index...),
which per-shard summaries could not give (a median of medians is not the median).

Shards computed on another host come back as ``payload``s (the file's bytes,
base64, in the pytest report xdist sends to the controller) and are written
into the controller's store by ``receive``.
"""

from __future__ import annotations

import base64
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

from harness import seal
from harness.core.fingerprint import components_of
from harness.core.pipeline import slug
from harness.errors import AssayError, ConfigError

SCHEMA = "assay-shard/1"
META = "meta"  # the npz member that holds the JSON meta data


@dataclass(frozen=True)
class Shard:
    """Inputs ``start`` (included) to ``stop`` (excluded) of an item's input set; ``index`` counts from 0."""

    index: int
    start: int
    stop: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    @property
    def id(self) -> str:
        return f"shard{self.index}[{self.start}:{self.stop}]"

    def as_list(self) -> list[int]:
        return [self.index, self.start, self.stop]


def split(n_inputs: int, size: int) -> list[Shard]:
    """Consecutive shards of ``size`` inputs (the last may be shorter) covering ``0 .. n_inputs``."""
    if size < 1 or n_inputs < 1:
        raise ConfigError(f"a shard size and an input count must be at least 1 (got {size} and {n_inputs})")
    return [Shard(index, start, min(start + size, n_inputs))
            for index, start in enumerate(range(0, n_inputs, size))]


@dataclass(frozen=True)
class StoredShard:
    """One shard's arrays and meta data as a stage stored them."""

    arrays: dict[str, np.ndarray]
    meta: dict


class ShardStore:
    """Finished shards under ``directory``: ``<item slug>/<content key[:16]>-<start>-<stop>.npz``."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)

    def path(self, item_id: str, fingerprint: str, shard: Shard) -> Path:
        return self.directory / slug(item_id) / f"{fingerprint[:16]}-{shard.start:07d}-{shard.stop:07d}.npz"

    def put(self, item_id: str, fingerprint: str, shard: Shard, arrays: dict[str, np.ndarray],
            meta: dict) -> Path:
        """Store a finished shard (atomically: a killed writer leaves no partial file); return its path.

        The key's components go into the meta (``key``; None for a key this process did not compute): a host
        whose own key differs names from them the component that does (``harness.core.fingerprint``)."""
        meta = {"schema": SCHEMA, "item": item_id, "fingerprint": fingerprint, "key": components_of(fingerprint),
                "shard": shard.as_list(), **meta}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays, **{META: np.array(json.dumps(meta, sort_keys=True))})
        path = self.path(item_id, fingerprint, shard)
        _write_atomically(path, buffer.getvalue())
        return path

    def get(self, item_id: str, fingerprint: str, shard: Shard) -> StoredShard | None:
        """The stored shard, or None when it was never finished with this content key, or its file is not sealed
        by this user (``harness.seal``: C outputs planted in a shared work folder are not taken for a run)."""
        path = self.path(item_id, fingerprint, shard)
        data = seal.read_sealed(path)
        return None if data is None else read(data, str(path))

    def name(self, item_id: str, fingerprint: str, shard: Shard) -> str:
        """The shard file's name relative to the store: the same on every host."""
        return self.path(item_id, fingerprint, shard).relative_to(self.directory).as_posix()

    def payload(self, item_id: str, fingerprint: str, shard: Shard) -> dict:
        """The stored shard as plain data another process can send (JSON-able: relative name and base64)."""
        return {"name": self.name(item_id, fingerprint, shard),
                "data": base64.b64encode(self.path(item_id, fingerprint, shard).read_bytes()).decode("ascii")}

    def held(self) -> dict[str, dict]:
        """Every stored shard's name and meta data."""
        return {path.relative_to(self.directory).as_posix(): read(path.read_bytes(), str(path)).meta
                for path in sorted(self.directory.glob("*/*.npz"))}

    def receive(self, payload: dict) -> StoredShard:
        """Write a shard sent by another process or host into this store (unless the same bytes are there)."""
        name = PurePosixPath(payload["name"])
        if name.is_absolute() or len(name.parts) != 2 or ".." in name.parts or name.suffix != ".npz":
            raise AssayError(f"a worker sent a shard with an unexpected name {payload['name']!r}")
        data = base64.b64decode(payload["data"])
        stored = read(data, str(name))
        path = self.directory.joinpath(*name.parts)
        if seal.read_sealed(path) != data:
            _write_atomically(path, data)
        return stored


def read(data: bytes, where: str) -> StoredShard:
    """Parse a shard file's bytes; an AssayError naming ``where`` when they are not an Assay shard."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        meta = json.loads(str(arrays.pop(META)))
    except (OSError, ValueError, KeyError) as exc:
        raise AssayError(f"{where}: not a readable shard file ({exc})") from None
    if meta.get("schema") != SCHEMA:
        raise AssayError(f"{where}: not an Assay {SCHEMA} file (schema {meta.get('schema')!r})")
    return StoredShard(arrays, meta)


def concatenate(stored: list[StoredShard], name: str) -> np.ndarray:
    """Array ``name`` of every shard, in input order (the shards are given in order)."""
    return np.concatenate([shard.arrays[name] for shard in stored])


def _write_atomically(path: Path, data: bytes) -> None:
    """Write and seal a shard: what this store wrote, or received from its own workers' channel."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    seal.seal_file(path, data)
