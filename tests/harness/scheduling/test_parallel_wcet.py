"""§5.4 composition: each core accumulates its items' WCETs and waits for the other side at each operator."""

from __future__ import annotations

import pytest

from harness.scheduling import parallel_wcet


def layer(name):
    return {"kind": "layer", "name": name}


def op(kind, src, dst, seq, floats=10):
    return {"kind": kind, "src": src, "dst": dst, "seq": seq, "floats": floats}


# core 1 computes b (the long branch) and sends it to core 0, which computed a and then joins: the paper's
# two-core LeNet-5 (Algorithms 2 and 3)
PER_CORE = [{"items": [layer("a"), op("read", 1, 0, 0), layer("c")]},
            {"items": [layer("b"), op("write", 1, 0, 0)]}]
WCET = {"a": 100, "b": 300, "c": 50}


def test_the_reader_waits_for_the_writer_and_the_latest_core_counts():
    result = parallel_wcet.compose(PER_CORE, WCET, lambda kind, floats: floats)
    # core 1: b 300, write 10 -> 310; core 0: a 100, read waits until 310, +10 -> 320, c -> 370
    assert result.per_core == [370, 310]
    assert result.parallel == 370 and result.sequential == 450
    assert result.gain == pytest.approx(1 - 370 / 450)


def test_the_interference_margin_scales_every_item():
    result = parallel_wcet.compose(PER_CORE, WCET, lambda kind, floats: floats, interference=0.5)
    assert result.per_core == [555, 465] and result.sequential == 450
    with pytest.raises(ValueError, match="must not be negative"):
        parallel_wcet.compose(PER_CORE, WCET, lambda kind, floats: floats, interference=-0.1)


def test_a_writer_waits_for_the_previous_message_to_be_read():
    per_core = [{"items": [layer("a"), op("read", 1, 0, 0), op("read", 1, 0, 1)]},
                {"items": [op("write", 1, 0, 0), op("write", 1, 0, 1)]}]
    result = parallel_wcet.compose(per_core, {"a": 100}, lambda kind, floats: floats)
    # write 0 ends at 10; read 0 at max(100, 10) + 10 = 110; write 1 waits for it: 120; read 1: 130
    assert result.per_core == [130, 120]


def test_a_cycle_of_waits_is_refused():
    per_core = [{"items": [op("read", 1, 0, 0), op("write", 0, 1, 0)]},
                {"items": [op("read", 0, 1, 0), op("write", 1, 0, 0)]}]
    with pytest.raises(ValueError, match="deadlock"):
        parallel_wcet.compose(per_core, {}, lambda kind, floats: floats)
