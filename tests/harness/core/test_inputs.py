import hashlib

import numpy as np
import pytest

from harness.core.inputs import inputs_sha256, make_inputs
from harness.errors import ConfigError
from harness.models.model import Model


def model(domain=(-0.5, 0.5)):
    return Model(name="m", files={}, input_shape=(4, 3, 2), output_shape=(5,), layout="HWC",
                 output_layout="C", input_domain=domain)


def _nested(array):
    return tuple(_nested(a) for a in array) if np.ndim(array) else float(array)


@pytest.mark.tor("TOR-SEM-010")
def test_inputs_are_seeded_float32_and_inside_the_domain():
    first = make_inputs(model(), 200, seed=7)
    assert first.shape == (200, 4, 3, 2) and first.dtype == np.float32
    np.testing.assert_array_equal(first, make_inputs(model(), 200, seed=7))
    assert not np.array_equal(first, make_inputs(model(), 200, seed=8))
    assert first.min() >= -0.5 and first.max() <= 0.5
    assert first.min() < -0.45 and first.max() > 0.45  # the whole domain is used


def test_one_interval_draws_what_it_always_drew():
    """Results stay comparable across versions: a scalar domain keeps the pre-per-element stream."""
    expected = np.random.default_rng(7).uniform(-0.5, 0.5, size=(10, 4, 3, 2)).astype(np.float32)
    np.testing.assert_array_equal(make_inputs(model(), 10, seed=7), expected)


@pytest.mark.tor("TOR-SEM-010")
def test_each_element_is_drawn_from_its_own_interval():
    # per channel of an HWC image (shape (C,) broadcasts over H and W): channel 1 is a heading in ±π,
    # channel 0 a range up to 60760; one shared interval would put headings far outside ±π.
    per_channel = model(((0.0, -3.14159), (60760.0, 3.14159)))
    x = make_inputs(per_channel, 500, seed=1)
    assert x.shape == (500, 4, 3, 2) and x.dtype == np.float32
    assert np.all(np.abs(x[..., 1]) <= np.float32(3.14159)) and x[..., 1].min() < -3.0 and x[..., 1].max() > 3.0
    assert x[..., 0].min() >= 0.0 and x[..., 0].max() > 59000.0
    np.testing.assert_array_equal(x, make_inputs(per_channel, 500, seed=1))  # deterministic from the seed
    assert not np.array_equal(x, make_inputs(per_channel, 500, seed=2))
    # per element: every element its own interval, including a degenerate one
    low = np.arange(24, dtype=np.float64).reshape(4, 3, 2)
    per_element = model((_nested(low), _nested(low + 0.5)))
    x = make_inputs(per_element, 300, seed=0)
    assert np.all(x >= low.astype(np.float32)) and np.all(x <= (low + 0.5).astype(np.float32))
    assert np.all(x.max(axis=0) - x.min(axis=0) > 0.45)
    point = model(((0.0, 2.0), (0.0, 2.0)))  # low == high: a constant
    assert np.all(make_inputs(point, 5, seed=0)[..., 1] == 2.0)


def test_domain_json_round_trips_through_the_zoo_cache(tmp_path):
    from harness.models import cache

    m = model(((0.0, -1.0), (1.0, 1.0)))
    assert m.domain_json() == [[0.0, -1.0], [1.0, 1.0]] and model().domain_json() == [-0.5, 0.5]
    back = cache.model_from_dict(cache.model_to_dict(m, tmp_path), tmp_path)
    assert back.input_domain == m.input_domain
    np.testing.assert_array_equal(make_inputs(back, 20, seed=3), make_inputs(m, 20, seed=3))


@pytest.mark.parametrize("domain", [(-0.5, 0.5), ((0.0, -3.14159), (60760.0, 3.14159))])
def test_a_slice_is_drawn_alone_exactly_as_in_the_whole_set(domain):
    """A shard draws inputs start..stop of the seed's sequence without drawing the ones before."""
    whole = make_inputs(model(domain), 50, seed=3)
    for start, count in ((0, 7), (7, 13), (20, 30), (49, 1)):
        np.testing.assert_array_equal(make_inputs(model(domain), count, seed=3, start=start),
                                      whole[start:start + count])


def test_the_inputs_digest_is_remembered_per_draw_not_per_model_object():
    """Cache keys ask for it once per shard and reference: the memo must still tell every draw apart."""
    for domain, count, seed in [((-0.5, 0.5), 20, 1), ((-0.5, 0.5), 21, 1), ((-0.5, 0.5), 20, 2),
                                ((-0.5, 0.25), 20, 1), (([-1.0, 0.0], [1.0, 0.5]), 20, 1)]:
        expected = hashlib.sha256(make_inputs(model(domain), count, seed).tobytes()).hexdigest()
        assert inputs_sha256(model(domain), count, seed) == expected
        assert inputs_sha256(model(domain), count, seed) == expected  # the remembered one


def test_a_users_set_runs_first_and_counts_in_the_key_by_its_bytes(tmp_path):
    """``--inputs-from``: the file's rows, then the draw a run without it makes; its bytes, a label included, key
    every cache (the refcache's entries and the kept outputs take ``campaign_sha256``)."""
    from dataclasses import replace

    from harness.core.inputs import campaign_inputs, campaign_sha256, campaign_size, user_inputs
    from harness.core.plan import Settings

    x = make_inputs(model(), 3, seed=11)
    np.savez(tmp_path / "a.npz", x=x, y=np.array([0, 4, 2]))
    np.savez(tmp_path / "b.npz", x=x, y=np.array([0, 4, 3]))
    beside = Settings(n_inputs=5, seed=2, inputs_from=tmp_path / "a.npz")
    inputs = campaign_inputs(model(), beside)
    assert inputs.shape == (8, 4, 3, 2) and inputs.dtype == np.float32 and campaign_size(model(), beside) == 8
    np.testing.assert_array_equal(inputs[:3], x)
    np.testing.assert_array_equal(inputs[3:], make_inputs(model(), 5, seed=2))
    np.testing.assert_array_equal(campaign_inputs(model(), replace(beside, n_inputs=0)), x)
    assert list(user_inputs(tmp_path / "a.npz", model()).labels) == [0, 4, 2]
    keys = {campaign_sha256(model(), s) for s in (beside, replace(beside, inputs_from=tmp_path / "b.npz"),
                                                   replace(beside, inputs_from=None), replace(beside, n_inputs=0))}
    assert len(keys) == 4
    assert campaign_sha256(model(), replace(beside, inputs_from=None)) == inputs_sha256(model(), 5, 2)


def test_integer_inputs_are_taken_as_float32_and_a_classifier_is_one_score_vector(tmp_path):
    from harness.core.inputs import classes, user_inputs

    np.save(tmp_path / "ints.npy", np.zeros((2, 4, 3, 2), np.int16))
    loaded = user_inputs(tmp_path / "ints.npy", model())
    assert loaded.x.dtype == np.float32 and loaded.labels is None and loaded.summary()["inputs"] == 2
    assert classes(model()) == 5
    image = Model(name="ae", files={}, input_shape=(4,), output_shape=(2, 2), layout="C", output_layout="HW")
    assert classes(image) is None


def test_a_test_set_beyond_the_memory_limit_or_not_a_regular_file_is_refused_before_it_is_read(tmp_path,
                                                                                               monkeypatch):
    """``--inputs-from`` is the user's file, but a huge one, an .npz that unpacks to gigabytes, or a FIFO must give
    one line, not take the machine's memory or wait forever: the file's size and the .npz's declared sizes are
    held against the memory limit an item may take (``harness.core.budget``) before anything is unpacked."""
    import os

    from harness.core.inputs import user_inputs

    monkeypatch.setenv("ASSAY_MEMORY_LIMIT", "64K")
    np.save(tmp_path / "big.npy", np.zeros((700, 4, 3, 2), np.float32))  # 67 200 bytes of data
    with pytest.raises(ConfigError, match=r"big.npy: is 65\.\d KiB, above the memory limit of 64\.0 KiB"):
        user_inputs(tmp_path / "big.npy", model())
    np.savez_compressed(tmp_path / "bomb.npz", x=np.zeros((4000, 4, 3, 2), np.float32))
    assert (tmp_path / "bomb.npz").stat().st_size < 64 << 10  # small on disk: only the declared size tells
    with pytest.raises(ConfigError, match=r"bomb.npz: unpacks to 375\.\d KiB, above the memory limit"):
        user_inputs(tmp_path / "bomb.npz", model())
    monkeypatch.delenv("ASSAY_MEMORY_LIMIT")
    assert user_inputs(tmp_path / "bomb.npz", model()).x.shape == (4000, 4, 3, 2)  # within the default limit
    os.mkfifo(tmp_path / "fifo.npy")  # no writer: reading it would block
    with pytest.raises(ConfigError, match="fifo.npy: not a regular file"):
        user_inputs(tmp_path / "fifo.npy", model())
