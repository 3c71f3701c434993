"""``results.json``: one record per (model, generator, variant, target, opt, reference).

Records are written as they are computed, under a file lock (several pytest-xdist
workers may write at once), by atomic replacement, so a killed campaign loses
nothing already finished, and a re-run can skip what is done.

A file of an earlier version of the store's schema (``assay-memory/1`` for an
``assay-memory/2`` store) is never served as the new one: reading it is refused
with one line, nothing in it is reused, and the first record written moves it
aside (``memory.assay-memory-1.json``) and starts a new file.

A record keyed by a model's path says which content of the file it judged
(``SOURCE``, its SHA-256, null for a zoo name). A record of another content at
that path supersedes the stored ones: a replaced file (a broken export, then the
fixed one) leaves no verdict about bytes that are gone among the current records.
They leave ``records`` for the file's ``superseded`` list, one entry per content
(its hash, the hash that superseded it, when, how many records and their verdicts),
which keeps the records themselves when the store keeps history (``keep_history``,
``--keep-history``) and only that tally otherwise.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from harness import seal
from harness.core.locks import exclusive
from harness.errors import AssayError

SCHEMA = "assay-results/2"  # 2: a record says which content of its model file it judged (SOURCE); "superseded"
SOURCE = "source_sha256"
KEY_FIELDS = ("model", "generator", "variant", "target", "opt", "reference", "n_inputs", "seed")


def record_key(record: dict) -> tuple:
    return tuple(record[field] for field in KEY_FIELDS)


class ResultStore:
    """A JSON file of records, safe for concurrent writers on one machine.

    Each stage has its own file, ``schema`` and key (``results.json`` here,
    ``met.json``, ``memory.json``...): a record replaces the one with the same key.
    """

    def __init__(self, path: Path, schema: str = SCHEMA, key_fields: tuple[str, ...] = KEY_FIELDS,
                 keep_history: bool = False):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.key_fields = key_fields
        self.keep_history = keep_history  # superseded records are kept whole, not only counted (module docstring)
        self._lock = self.path.with_name(self.path.name + ".lock")

    @classmethod
    def of(cls, stage, path: Path, keep_history: bool = False) -> ResultStore:
        """The record store of a stage's contract (``harness.contract.StageSpec``: its schema and key fields) in
        the file ``path`` (``stage.path(out)`` in the stage's output folder)."""
        return cls(path, stage.schema, stage.key_fields, keep_history)

    def key(self, record: dict) -> tuple:
        return tuple(record[field] for field in self.key_fields)

    def records(self) -> list[dict]:
        """The current records: none superseded (module docstring)."""
        return self._document()["records"]

    def superseded(self) -> list[dict]:
        """The entries of the records superseded by another content of their model file, oldest first (none in a
        file of an earlier schema version, which the first record written moves aside)."""
        if self.path.is_file() and self._earlier(self._stored_schema()):
            return []
        return self._document().get("superseded", [])

    def _document(self) -> dict:
        if not self.path.is_file():
            return {"records": []}
        data = json.loads(self.path.read_text())
        if data.get("schema") != self.schema:
            earlier = ("; written by an earlier Assay: run the stage again to recompute its records"
                       if self._earlier(data.get("schema")) else "")
            raise AssayError(f"{self.path}: not an Assay {self.schema} file (schema {data.get('schema')!r}){earlier}")
        return data

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
        done = {self.key(r): r for r in self.sealed_records()}
        found = [done.get(self.key(w)) for w in wanted]
        if found and all(r is not None and r.get("fingerprint") == fingerprint for r in found):
            return [{k: v for k, v in r.items() if k != "seal"} for r in found]  # as the stage computed them
        return None

    def sealed_records(self) -> list[dict]:
        """The records Assay wrote for this user (``harness.seal``): a record edited or planted in a work folder
        (say a max error of 1e-12 where the C's is 2.7e-7) is never reused, nor read into an evidence package."""
        return [r for r in self.records() if seal.is_sealed_record(r)]

    def put(self, record: dict) -> None:
        """Add ``record``, replacing any earlier record with the same key; one that says which content of its
        model file it judged (``SOURCE``) supersedes the records of any other content of that file."""
        with exclusive(self._lock):
            self._retire_earlier()
            document = self._document()
            stale, kept = [], []
            for stored in document["records"]:
                if _other_content(stored, record):
                    stale.append(stored)
                elif self.key(stored) != self.key(record):
                    kept.append(stored)
            kept.append(seal.record_sealed(record))
            # in key order, not in the order items finished: a campaign of parallel items (``--workers``, an
            # evidence build's jobs) writes the same file on every run, so two cold builds of a package are equal
            kept.sort(key=lambda r: json.dumps(self.key(r), default=str))
            superseded = document.get("superseded", []) + self._entries(stale, record)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"schema": self.schema, "records": kept,
                                       **({"superseded": superseded} if superseded else {})},
                                      indent=1, sort_keys=True))
            os.replace(tmp, self.path)

    def _entries(self, stale: list[dict], by: dict) -> list[dict]:
        """One ``superseded`` entry per content of the model file among ``stale``, superseded by ``by``."""
        contents: dict[str | None, list[dict]] = {}
        for record in stale:
            contents.setdefault(record.get(SOURCE), []).append(record)
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return [{"model": by["model"], SOURCE: content, "superseded_by": by[SOURCE], "superseded_at": at,
                 "count": len(records), "verdicts": dict(Counter(r.get("verdict") for r in records)),
                 **({"records": records} if self.keep_history else {})} for content, records in contents.items()]


def _other_content(stored: dict, record: dict) -> bool:
    """``stored`` is about the model file of ``record`` as it was before: ``record`` says which content it judged
    (``SOURCE``), and ``stored`` another one, or none."""
    return SOURCE in record and stored.get("model") == record["model"] and stored.get(SOURCE) != record[SOURCE]
