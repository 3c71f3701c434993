"""results.json keeps every record, replaces by key, and survives concurrent writers."""

import json
import multiprocessing

import pytest

from harness.errors import AssayError
from harness.core.results import KEY_FIELDS, ResultStore, record_key


def record(model="m", reference="keras", **extra):
    base = dict(model=model, generator="g", variant="v", target="host", opt="-O0", reference=reference,
                n_inputs=10, seed=0, verdict="pass")
    base.update(extra)
    return base


def test_put_appends_and_replaces_by_key(tmp_path):
    store = ResultStore(tmp_path / "results.json")
    store.put(record(max_abs_error=1.0))
    store.put(record(reference="onnxruntime"))
    store.put(record(max_abs_error=2.0))
    records = store.records()
    assert len(records) == 2
    assert store.get(record_key(record()))["max_abs_error"] == 2.0
    assert set(KEY_FIELDS) <= set(records[0])


def _writer(path, index):
    ResultStore(path).put(record(model=f"m{index}"))


@pytest.mark.tor("TOR-RES-002")
def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "results.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.starmap(_writer, [(path, i) for i in range(40)])
    assert sorted(r["model"] for r in ResultStore(path).records()) == sorted(f"m{i}" for i in range(40))


def test_a_foreign_json_file_is_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"records": []}))
    with pytest.raises(AssayError, match="not an Assay assay-results/1 file"):
        ResultStore(path).records()


@pytest.mark.tor("TOR-RES-001")
def test_find_all_returns_records_only_when_every_key_is_stored_from_the_same_content(tmp_path):
    store = ResultStore(tmp_path / "results.json")
    store.put(record(reference="keras", max_abs_error=1.0, fingerprint="a"))
    wanted = [record(reference="keras"), record(reference="onnxruntime")]
    assert store.find_all(wanted, "a") is None
    store.put(record(reference="onnxruntime", max_abs_error=2.0, fingerprint="a"))
    assert [r["max_abs_error"] for r in store.find_all(wanted, "a")] == [1.0, 2.0]
    assert store.find_all(wanted, "b") is None  # same keys, other content: computed again
    store.put(record(reference="onnxruntime", max_abs_error=3.0, fingerprint="b"))
    assert store.find_all(wanted, "a") is None and store.find_all(wanted, "b") is None
    assert store.find_all([], "a") is None


def test_a_store_of_an_earlier_schema_version_is_never_served_as_the_new_one(tmp_path):
    """``memory.json`` of ``assay-memory/1`` (records with ``status``) read by an ``assay-memory/2`` store: refused with
    one line, nothing reused, moved aside by the first record written."""
    path = tmp_path / "memory.json"
    old = {"model": "m", "generator": "g", "variant": "v", "target": "t", "opt": "-O0", "status": "pass",
           "fingerprint": "a"}
    path.write_text(json.dumps({"schema": "assay-memory/1", "records": [old]}))
    store = ResultStore(path, "assay-memory/2", ("model", "generator", "variant", "target", "opt"))
    with pytest.raises(AssayError, match="schema 'assay-memory/1'.*earlier Assay: run the stage again"):
        store.records()
    assert store.find_all([old], "a") is None
    store.put({**{k: old[k] for k in store.key_fields}, "verdict": "pass"})
    assert store.records() == [{**{k: old[k] for k in store.key_fields}, "verdict": "pass"}]
    kept = json.loads((tmp_path / "memory.assay-memory-1.json").read_text())
    assert kept["records"] == [old]


def test_a_store_of_another_or_later_schema_is_left_alone(tmp_path):
    path = tmp_path / "met.json"
    path.write_text(json.dumps({"schema": "assay-met/3", "records": []}))
    store = ResultStore(path, "assay-met/2", ("model",))
    with pytest.raises(AssayError, match="not an Assay assay-met/2 file"):
        store.put({"model": "m"})
    assert json.loads(path.read_text())["schema"] == "assay-met/3"
