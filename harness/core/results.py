"""``results.json``: one record per (model, generator, variant, target, opt, reference).

Records are written as they are computed, under a file lock (several pytest-xdist
workers may write at once), by atomic replacement, so a killed campaign loses
nothing already finished, and a re-run can skip what is done.
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

    def key(self, record: dict) -> tuple:
        return tuple(record[field] for field in self.key_fields)

    def records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        data = json.loads(self.path.read_text())
        if data.get("schema") != self.schema:
            raise AssayError(f"{self.path}: not an Assay {self.schema} file (schema {data.get('schema')!r})")
        return data["records"]

    def get(self, key: tuple) -> dict | None:
        return next((r for r in self.records() if self.key(r) == key), None)

    def find_all(self, wanted: list[dict], fingerprint: str) -> list[dict] | None:
        """The stored records with the keys of ``wanted`` if every one is there and was computed from the
        same content (``fingerprint``, harness.core.fingerprint): a finished item. Else None."""
        done = {self.key(r): r for r in self.records()}
        found = [done.get(self.key(w)) for w in wanted]
        if found and all(r is not None and r.get("fingerprint") == fingerprint for r in found):
            return found
        return None

    def put(self, record: dict) -> None:
        """Add ``record``, replacing any earlier record with the same key."""
        with exclusive(self._lock):
            kept = [r for r in self.records() if self.key(r) != self.key(record)]
            kept.append(record)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"schema": self.schema, "records": kept}, indent=1, sort_keys=True))
            os.replace(tmp, self.path)
