"""``results.json``: one record per (model, generator, variant, target, opt, reference).

Records are written as they are computed, under a file lock (several pytest-xdist
workers may write at once), by atomic replacement, so a killed campaign loses
nothing already finished, and a re-run can skip what is done.

A file of an earlier version of the store's schema (``assay-memory/1`` for an
``assay-memory/2`` store) is never served as the new one: reading it is refused
with one line, nothing in it is reused, and the first record written moves it
aside (``memory.assay-memory-1.json``) and starts a new file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness.core.locks import exclusive
from harness.errors import AssayError

SCHEMA = "assay-results/1"
KEY_FIELDS = ("model", "generator", "variant", "target", "opt", "reference", "n_inputs", "seed")


def record_key(record: dict) -> tuple:
    return tuple(record[field] for field in KEY_FIELDS)


class ResultStore:
    """A JSON file of records, safe for concurrent writers on one machine.

    Each stage has its own file, ``schema`` and key (``results.json`` here,
    ``met.json``, ``memory.json``...): a record replaces the one with the same key.
    """

    def __init__(self, path: Path, schema: str = SCHEMA, key_fields: tuple[str, ...] = KEY_FIELDS):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.key_fields = key_fields
        self._lock = self.path.with_name(self.path.name + ".lock")

    @classmethod
    def of(cls, stage, path: Path) -> ResultStore:
        """The record store of a stage's contract (``harness.contract.StageSpec``: its schema and key fields) in
        the file ``path`` (``stage.path(out)`` in the stage's output folder)."""
        return cls(path, stage.schema, stage.key_fields)

    def key(self, record: dict) -> tuple:
        return tuple(record[field] for field in self.key_fields)

    def records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        data = json.loads(self.path.read_text())
        if data.get("schema") != self.schema:
            earlier = ("; written by an earlier Assay: run the stage again to recompute its records"
                       if self._earlier(data.get("schema")) else "")
            raise AssayError(f"{self.path}: not an Assay {self.schema} file (schema {data.get('schema')!r}){earlier}")
        return data["records"]

    def _earlier(self, schema: object) -> bool:
        """``schema`` names an earlier version of this store's schema."""
        name, _, version = self.schema.rpartition("/")
        other, _, other_version = str(schema).rpartition("/")
        return other == name and other_version.isdigit() and version.isdigit() and int(other_version) < int(version)

    def _stored_schema(self) -> object:
        try:
            return json.loads(self.path.read_text()).get("schema")
        except (OSError, ValueError, AttributeError):
            return None

    def _retire_earlier(self) -> None:
        """Move a file of an earlier schema version aside (``<stem>.<its schema><suffix>``): a new one starts."""
        schema = self._stored_schema()
        if self._earlier(schema):
            os.replace(self.path, self.path.with_name(f"{self.path.stem}.{str(schema).replace('/', '-')}"
                                                      f"{self.path.suffix}"))

    def get(self, key: tuple) -> dict | None:
        return next((r for r in self.records() if self.key(r) == key), None)

    def find_all(self, wanted: list[dict], fingerprint: str) -> list[dict] | None:
        """The stored records with the keys of ``wanted`` if every one is there and was computed from the
        same content (``fingerprint``, harness.core.fingerprint): a finished item. Else None (also when the file is
        of an earlier schema version: nothing in it is reused)."""
        if self.path.is_file() and self._earlier(self._stored_schema()):
            return None
        done = {self.key(r): r for r in self.records()}
        found = [done.get(self.key(w)) for w in wanted]
        if found and all(r is not None and r.get("fingerprint") == fingerprint for r in found):
            return found
        return None

    def put(self, record: dict) -> None:
        """Add ``record``, replacing any earlier record with the same key."""
        with exclusive(self._lock):
            self._retire_earlier()
            kept = [r for r in self.records() if self.key(r) != self.key(record)]
            kept.append(record)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"schema": self.schema, "records": kept}, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
