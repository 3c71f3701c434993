"""results.json keeps every current record, replaces by key, supersedes the records of a replaced model file, and
survives concurrent writers."""

import json
import multiprocessing

import pytest

from harness.errors import AssayError
from harness.core.results import KEY_FIELDS, SOURCE, ResultStore, record_key


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


def test_the_file_does_not_depend_on_the_order_items_finished(tmp_path):
    """Parallel items (``--workers``, an evidence build's jobs) finish in any order; the file is the same, or two
    cold builds of one evidence package differ (its reproducibility test, TOR-EVD-008)."""
    first, second = ResultStore(tmp_path / "a.json"), ResultStore(tmp_path / "b.json")
    for model in ("m2", "m0", "m1"):
        first.put(record(model=model))
    for model in ("m1", "m2", "m0"):
        second.put(record(model=model))
    assert first.path.read_bytes() == second.path.read_bytes()
    assert [r["model"] for r in first.records()] == ["m0", "m1", "m2"]


def _writer(path, index):
    ResultStore(path).put(record(model=f"m{index}"))


@pytest.mark.tor("TOR-RES-002")
def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "results.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        pool.starmap(_writer, [(path, i) for i in range(40)])
    assert sorted(r["model"] for r in ResultStore(path).records()) == sorted(f"m{i}" for i in range(40))


@pytest.mark.tor("TOR-RES-003")
def test_a_record_edited_or_planted_in_the_store_is_never_reused(tmp_path):
    """Issue 39, B2: a cached record whose figures were edited (1.234e-12 where the C's error was 2.68e-7), or one
    written by hand with its fingerprint copied, is not this user's sealed record: not reused, not read into a
    package; the stage computes it again."""
    store = ResultStore(tmp_path / "results.json")
    store.put(record(max_abs_error=2.68e-7, fingerprint="a"))
    assert store.find_all([record()], "a") is not None and len(store.sealed_records()) == 1
    document = json.loads(store.path.read_text())
    document["records"][0]["max_abs_error"] = 1.234e-12
    document["records"].append({**record(reference="onnxruntime"), "fingerprint": "a",
                                "seal": document["records"][0]["seal"]})
    store.path.write_text(json.dumps(document))
    assert len(store.records()) == 2 and store.sealed_records() == []
    assert store.find_all([record()], "a") is None and store.find_all([record(reference="onnxruntime")], "a") is None


def test_a_foreign_json_file_is_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"records": []}))
    with pytest.raises(AssayError, match="not an Assay assay-results/2 file"):
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
    assert [{k: v for k, v in r.items() if k != "seal"} for r in store.records()] == [
        {**{k: old[k] for k in store.key_fields}, "verdict": "pass"}]
    kept = json.loads((tmp_path / "memory.assay-memory-1.json").read_text())
    assert kept["records"] == [old]


def test_a_store_of_another_or_later_schema_is_left_alone(tmp_path):
    path = tmp_path / "met.json"
    path.write_text(json.dumps({"schema": "assay-met/3", "records": []}))
    store = ResultStore(path, "assay-met/2", ("model",))
    with pytest.raises(AssayError, match="not an Assay assay-met/2 file"):
        store.put({"model": "m"})
    assert json.loads(path.read_text())["schema"] == "assay-met/3"


# --- records of a replaced model file (issue 44) ------------------------------------------------------------------


def _contents(records: list[dict]) -> list[tuple]:
    return sorted((r["model"], r["reference"], r[SOURCE], r["verdict"]) for r in records)


def test_a_new_content_at_a_path_supersedes_the_records_of_the_earlier_one(tmp_path):
    """good -> garbage -> good again at one path: only the last content's records are current; the others are
    counted in ``superseded`` with their content hash, and nothing of another model, or of a zoo name, moves."""
    store = ResultStore(tmp_path / "results.json")
    store.put(record(model="lenet5", **{SOURCE: None}))  # a zoo name: no file, never superseded
    store.put(record(model="other.onnx", **{SOURCE: "c"}))
    for reference in ("keras", "onnxruntime"):
        store.put(record(model="net.keras", reference=reference, **{SOURCE: "a"}))
    store.put(record(model="net.keras", variant="-", verdict="error", **{SOURCE: "bad"}))
    assert _contents(store.records()) == [("lenet5", "keras", None, "pass"), ("net.keras", "keras", "bad", "error"),
                                          ("other.onnx", "keras", "c", "pass")]
    store.put(record(model="net.keras", **{SOURCE: "a"}))
    store.put(record(model="lenet5", reference="onnxruntime", **{SOURCE: None}))
    assert _contents(store.records()) == [("lenet5", "keras", None, "pass"), ("lenet5", "onnxruntime", None, "pass"),
                                          ("net.keras", "keras", "a", "pass"), ("other.onnx", "keras", "c", "pass")]
    entries = store.superseded()
    assert [(e["model"], e[SOURCE], e["superseded_by"], e["count"], e["verdicts"]) for e in entries] == [
        ("net.keras", "a", "bad", 2, {"pass": 2}), ("net.keras", "bad", "a", 1, {"error": 1})]
    assert not any("records" in entry for entry in entries)  # without history: counted, not kept


def test_keep_history_keeps_the_superseded_records_whole(tmp_path):
    store = ResultStore(tmp_path / "results.json", keep_history=True)
    first = record(model="net.onnx", max_abs_error=1e-7, **{SOURCE: "a"})
    store.put(first)
    store.put(record(model="net.onnx", reference="onnxruntime", **{SOURCE: "b"}))
    (entry,) = store.superseded()
    (kept,) = entry["records"]
    assert {k: kept[k] for k in first} == first
    assert store.find_all([first], "any") is None  # a superseded record is never reused


def test_records_without_a_content_supersede_nothing(tmp_path):
    """Other stages' stores (memory.json, ...) write no ``SOURCE``: a record with the same key replaces, as ever."""
    store = ResultStore(tmp_path / "memory.json", "assay-memory/2", ("model", "generator", "variant", "target", "opt"))
    store.put(record(model="net.onnx", **{SOURCE: "a"}))
    store.put(record(model="net.onnx", target="cortex-m4f"))
    assert len(store.records()) == 2 and store.superseded() == []
    assert "superseded" not in json.loads((tmp_path / "memory.json").read_text())
