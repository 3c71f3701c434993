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
