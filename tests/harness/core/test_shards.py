"""Input shards: the slices cover the input set exactly once, and a stored shard travels between hosts intact."""

import numpy as np
import pytest

from harness.core.shards import SCHEMA, Shard, ShardStore, concatenate, split
from harness.errors import AssayError, ConfigError

FINGERPRINT = "ab" * 32


@pytest.mark.parametrize("n_inputs, size", [(1000, 100), (40, 15), (7, 7), (7, 50), (1, 1)])
def test_shards_cover_every_input_once_in_order(n_inputs, size):
    shards = split(n_inputs, size)
    covered = [i for shard in shards for i in range(shard.start, shard.stop)]
    assert covered == list(range(n_inputs))
    assert [shard.index for shard in shards] == list(range(len(shards)))
    assert all(shard.size == size for shard in shards[:-1]) and 1 <= shards[-1].size <= size


@pytest.mark.parametrize("n_inputs, size", [(10, 0), (10, -3), (0, 5)])
def test_a_shard_size_or_input_count_below_one_is_refused(n_inputs, size):
    with pytest.raises(ConfigError, match="at least 1"):
        split(n_inputs, size)


def test_a_stored_shard_is_read_back_keyed_by_content_and_slice(tmp_path):
    store = ShardStore(tmp_path)
    shard = Shard(1, 15, 30)
    outputs = np.arange(30, dtype=np.float32).reshape(15, 2) / 7
    store.put("m/g/v/host", FINGERPRINT, shard, {"outputs": outputs}, {"cause": None, "host": "a"})
    stored = store.get("m/g/v/host", FINGERPRINT, shard)
    np.testing.assert_array_equal(stored.arrays["outputs"], outputs)
    assert stored.arrays["outputs"].dtype == np.float32
    assert stored.meta["schema"] == SCHEMA and stored.meta["shard"] == [1, 15, 30] and stored.meta["host"] == "a"
    assert store.get("m/g/v/host", "cd" * 32, shard) is None  # other content: not reused
    assert store.get("m/g/v/host", FINGERPRINT, Shard(1, 15, 29)) is None  # another slice
    assert store.get("m/g/v/arm7tdmi", FINGERPRINT, shard) is None  # another item
    assert list(store.held()) == [store.name("m/g/v/host", FINGERPRINT, shard)]


def test_a_shard_sent_by_another_host_lands_byte_for_byte_in_the_controllers_store(tmp_path):
    worker, controller = ShardStore(tmp_path / "worker"), ShardStore(tmp_path / "controller")
    shards = split(5, 2)
    for shard in shards:
        worker.put("item", FINGERPRINT, shard, {"outputs": np.full((shard.size, 3), shard.index, np.float32)}, {})
        received = controller.receive(worker.payload("item", FINGERPRINT, shard))
        assert received.meta["shard"] == shard.as_list()
    for shard in shards:
        sent, landed = worker.path("item", FINGERPRINT, shard), controller.path("item", FINGERPRINT, shard)
        assert landed.read_bytes() == sent.read_bytes()
    joined = concatenate([controller.get("item", FINGERPRINT, shard) for shard in shards], "outputs")
    np.testing.assert_array_equal(joined[:, 0], [0, 0, 1, 1, 2])


@pytest.mark.parametrize("name", ["../escape/x.npz", "/abs/x.npz", "item/x.txt", "a/b/c.npz"])
def test_a_shard_name_outside_the_store_is_refused(tmp_path, name):
    with pytest.raises(AssayError, match="unexpected name"):
        ShardStore(tmp_path).receive({"name": name, "data": ""})


def test_bytes_that_are_not_a_shard_are_refused_with_their_name(tmp_path):
    with pytest.raises(AssayError, match="item/x.npz: not a readable shard file"):
        ShardStore(tmp_path).receive({"name": "item/x.npz", "data": "bm90IGFuIG5weg=="})
    assert not (tmp_path / "item" / "x.npz").exists()


@pytest.mark.tor("TOR-RES-003")
def test_a_shard_planted_in_the_store_is_not_taken_for_a_run(tmp_path, monkeypatch):
    """Issue 39, B2: a shard file of the right name and format, written by hand (the outputs of wrong code, or the
    reference's, so that wrong code would pass), is not this user's sealed shard: ``get`` says missing and the
    shard runs again; a received shard is sealed by the store that received it."""
    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "a.key"))
    store, shard = ShardStore(tmp_path / "store"), Shard(0, 0, 4)
    store.put("item", FINGERPRINT, shard, {"outputs": np.zeros((4, 2), np.float32)}, {"cause": None})
    planted = store.path("item", FINGERPRINT, shard).read_bytes().replace(b"\x00" * 8, b"\x01" * 8, 1)
    store.path("item", FINGERPRINT, shard).write_bytes(planted)
    assert store.get("item", FINGERPRINT, shard) is None
    other = ShardStore(tmp_path / "other")
    other.put("item", FINGERPRINT, shard, {"outputs": np.ones((4, 2), np.float32)}, {"cause": None})
    received = store.receive(other.payload("item", FINGERPRINT, shard))
    np.testing.assert_array_equal(store.get("item", FINGERPRINT, shard).arrays["outputs"], received.arrays["outputs"])
