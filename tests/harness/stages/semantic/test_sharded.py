"""A sharded item gives the record of an unsharded one, resumes shard by shard, and refuses shards that ran
different code (acas-reg50, the zoo's smallest model, with a few inputs; real gcc, Keras, ONNX Runtime)."""

import os

import pytest

from harness.core.results import ResultStore
from harness.core.shards import ShardStore, split
from harness.stages.semantic import sharded
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

N_INPUTS, SHARD_SIZE = 30, 7  # five shards, the last shorter
VOLATILE = ("timings", "finished_at", "seal")  # the seal is over every field, timings included


def same_records(a, b):
    """Records equal field for field, timings and dates aside."""
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in a] == \
        [{k: v for k, v in r.items() if k not in VOLATILE} for r in b]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    work = tmp_path_factory.mktemp("sharded-work")
    settings = campaign.Settings(n_inputs=N_INPUTS, work_dir=work)
    item = campaign.plan(["acas-reg50"], ["assay-v2:keras"], ["keras", "onnxruntime"], ["host"], settings).items[0]
    unsharded = campaign.run_item(item, settings, ResultStore(work / "unsharded.json"))
    return settings, item, unsharded


@pytest.mark.tor("TOR-SEM-010")
def test_sharded_and_unsharded_runs_give_the_same_records(setup, tmp_path):
    settings, item, unsharded = setup
    records = sharded.run_item_sharded(item, settings, SHARD_SIZE, ShardStore(tmp_path / "shards"),
                                       ResultStore(tmp_path / "results.json"))
    assert same_records(records, unsharded)
    assert unsharded[0]["verdict"] == "pass" and unsharded[0]["median_abs_error"] is not None
    assert records[0]["timings"]["shards"] == 5
    assert same_records(ResultStore(tmp_path / "results.json").records(), records)


def test_a_sharded_derived_run_judges_by_the_declared_order_as_the_unsharded_one(setup, tmp_path):
    """The merge reads the code's declared order of accumulation from its manifest as a single run does: the same
    bound, the same ``accumulation``, the same records."""
    settings, item, _ = setup
    derived = campaign.Settings(n_inputs=N_INPUTS, work_dir=settings.work_dir, tolerance="derived")
    unsharded = campaign.run_item(item, derived, ResultStore(tmp_path / "unsharded.json"))
    records = sharded.run_item_sharded(item, derived, SHARD_SIZE, ShardStore(tmp_path / "shards"),
                                       ResultStore(tmp_path / "results.json"))
    assert unsharded[0]["accumulation"].startswith("sequential") and unsharded[0]["derived"]["verdict"] == "pass"
    assert same_records(records, unsharded)


def test_a_run_killed_halfway_keeps_its_shards_and_computes_only_the_missing_ones(setup, tmp_path):
    settings, item, unsharded = setup
    shards = ShardStore(tmp_path / "shards")
    done = [sharded.run_shard(item, shard, settings, shards) for shard in split(N_INPUTS, SHARD_SIZE)[:2]]
    assert sharded.merge(item, settings, SHARD_SIZE, shards, ResultStore(tmp_path / "r.json")) is None  # incomplete
    kept = {path: path.stat().st_mtime_ns for path in shards.directory.rglob("*.npz")}
    assert len(kept) == len(done) == 2
    records = sharded.run_item_sharded(item, settings, SHARD_SIZE, shards, ResultStore(tmp_path / "r.json"))
    assert {path: path.stat().st_mtime_ns for path in kept} == kept  # not recomputed
    assert len(list(shards.directory.rglob("*.npz"))) == 5
    assert same_records(records, unsharded)


def test_shards_that_ran_other_generated_code_make_an_error_record_naming_the_host(setup, tmp_path):
    settings, item, _ = setup
    shards = ShardStore(tmp_path / "shards")
    all_shards = split(N_INPUTS, SHARD_SIZE)
    for shard in all_shards:
        sharded.run_shard(item, shard, settings, shards)
    last = shards.get(item.id, shards.held()[next(iter(shards.held()))]["fingerprint"], all_shards[-1])
    tampered = {**last.meta, "host": "other-host",
                "provenance": {**last.meta["provenance"], "sources_sha256": {"net.c": "0" * 64}}}
    shards.put(item.id, last.meta["fingerprint"], all_shards[-1], last.arrays,
               {k: v for k, v in tampered.items() if k not in ("schema", "item", "fingerprint", "shard")})
    records = sharded.merge(item, settings, SHARD_SIZE, shards, ResultStore(tmp_path / "r.json"))
    assert {r["verdict"] for r in records} == {"error"}
    assert "shard 4 (host other-host) ran generated code that differs" in records[0]["cause"]


@pytest.mark.arm
def test_a_sharded_arm_item_has_the_unsharded_bit_comparison_with_the_host(tmp_path):
    """The merged host outputs are what the merged ARM outputs are compared with, bit for bit."""
    def records(work, shard_size=None):
        settings = campaign.Settings(n_inputs=12, work_dir=tmp_path / work)
        items = campaign.plan(["acas-reg50"], ["assay-v2:onnx"], ["onnxruntime"], ["host", "arm7tdmi"], settings).items
        store = ResultStore(tmp_path / work / "results.json")
        if shard_size is None:
            return [r for item in items for r in campaign.run_item(item, settings, store)]
        shards = ShardStore(tmp_path / work / "shards")
        return [r for item in items for r in sharded.run_item_sharded(item, settings, shard_size, shards, store)]

    merged, unsharded = records("sharded", 5), records("unsharded")
    assert same_records(merged, unsharded)
    assert [r["target"] for r in merged] == ["host", "arm7tdmi"] and merged[1]["bits_vs_host"]["values"] == 12 * 5


def test_the_first_shard_on_a_machine_leaves_the_float64_outputs_ready_for_the_merge(setup, tmp_path):
    _, item, _ = setup
    settings = campaign.Settings(n_inputs=N_INPUTS, work_dir=tmp_path / "work")  # nothing cached yet
    stored = sharded.run_shard(item, split(N_INPUTS, SHARD_SIZE)[0], settings, ShardStore(tmp_path / "shards"))
    assert stored.meta["cause"] is None and "arbiter_s" in stored.meta["timings"]
    cached = list((settings.work_dir / "references").rglob(f"{campaign.ARBITER}-n{N_INPUTS}-*.npy"))
    assert len(cached) == 1  # the whole input set's, as the merge (or an unsharded run) asks for it
    assert len(campaign.reference_outputs(campaign.ARBITER, campaign.load_model(item.model, settings),
                                          settings)) == N_INPUTS
