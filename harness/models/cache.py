"""The model cache: ``<directory>/model.json`` holds a ``Model`` and the fingerprint of what built it.

A zoo benchmark (``zoo``) and a converted user file (``user_files``) are both
built once into a directory of the cache and described there; a later load
reads ``model.json`` alone, and reuses it only while the fingerprint (the
builder's inputs) is unchanged. ``locked`` serialises builds of one entry
across processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path

from harness.models.model import Model, Tensor, bound_from_json

CACHE_SCHEMA = "assay-zoo/3"  # 2: models carry rtol; 3: input domain bounds per element ([low, high], nested lists)


def read_cached(directory: Path, fingerprint: str) -> Model | None:
    """The Model recorded in ``directory/model.json`` if it was built from ``fingerprint`` and its files exist."""
    try:
        record = json.loads((directory / "model.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("schema") != CACHE_SCHEMA or record.get("fingerprint") != fingerprint:
        return None
    try:
        model = model_from_dict(record["model"], directory)
    except (KeyError, TypeError, ValueError):
        return None
    if not all(path.exists() for path in model.files.values()):  # a file, or a folder (NNEF)
        return None
    return model


def read_record(directory: Path) -> dict:
    """The whole ``model.json`` record of a cache directory (e.g. its parameter count)."""
    return json.loads((Path(directory) / "model.json").read_text())


def write_cached(directory: Path, model: Model, fingerprint: str, extra: dict | None = None) -> None:
    record = {"schema": CACHE_SCHEMA, "fingerprint": fingerprint, **(extra or {}),
              "model": model_to_dict(model, directory)}
    temporary = directory / f".model.json.{os.getpid()}"
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(temporary, directory / "model.json")


def model_to_dict(model: Model, directory: Path) -> dict:
    """JSON-ready fields of ``model``; files inside ``directory`` are stored relative to it."""

    def relative(path: Path) -> str:
        path = Path(path)
        try:
            return str(path.resolve().relative_to(Path(directory).resolve()))
        except ValueError:
            return str(path.resolve())

    fields = {
        "name": model.name,
        "files": {fmt: relative(path) for fmt, path in sorted(model.files.items())},
        "input_shape": list(model.input_shape),
        "output_shape": list(model.output_shape),
        "layout": model.layout,
        "output_layout": model.output_layout,
        "file_layouts": {fmt: list(layouts) for fmt, layouts in sorted(model.file_layouts.items())},
        "input_domain": model.domain_json(),
        "tolerance": model.tolerance,
        "rtol": model.rtol,
        "tier": model.tier,
        "description": model.description,
    }
    if model.is_packed:  # only then, so that a single-input model's record keeps its bytes
        fields["inputs"] = [{"name": t.name, "shape": list(t.shape)} for t in model.inputs]
        fields["outputs"] = [{"name": t.name, "shape": list(t.shape)} for t in model.outputs]
    return fields


def model_from_dict(fields: dict, directory: Path) -> Model:
    return Model(
        name=fields["name"],
        files={fmt: Path(directory) / path for fmt, path in fields["files"].items()},
        input_shape=tuple(int(d) for d in fields["input_shape"]),
        output_shape=tuple(int(d) for d in fields["output_shape"]),
        layout=fields["layout"],
        output_layout=fields["output_layout"],
        file_layouts={fmt: (pair[0], pair[1]) for fmt, pair in fields["file_layouts"].items()},
        input_domain=_domain_from_json(fields["input_domain"]),
        tolerance=float(fields["tolerance"]),
        rtol=float(fields["rtol"]),
        tier=fields["tier"],
        description=fields.get("description", ""),
        inputs=_tensors(fields.get("inputs", [])),
        outputs=_tensors(fields.get("outputs", [])),
    )


def _tensors(records: list) -> tuple[Tensor, ...]:
    return tuple(Tensor(str(r["name"]), tuple(int(d) for d in r["shape"])) for r in records)


def _domain_from_json(value) -> tuple:
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"input_domain must be [low, high], got {value!r}")
    return bound_from_json(value[0]), bound_from_json(value[1])


@contextlib.contextmanager
def locked(cache_dir: Path, key: str):
    """Serialise builds of one cache entry across processes (pytest-xdist workers, parallel campaigns)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f".{key}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
