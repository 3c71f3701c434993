"""Parallel V2 code (codegen.parallel): one function per core, the layers' V2 code untouched, Writing/Reading
operators per §5.2-5.3, and refusals of schedules it cannot implement. Execution is tested with the runners
(tests/harness/runners/test_parallel_host.py, test_qemu_smp.py)."""

from __future__ import annotations

import re

import pytest

import codegen
from codegen.errors import UnsupportedModel
from harness.models import zoo

BRANCH_A = ["split_a1_conv", "split_a1_avgpool"]
BRANCH_B = ["split_b1_conv", "split_b1_avgpool"]
TAIL = ["split_concat", "conv1", "avgpool1", "flatten1", "dense1", "dense2", "dense3"]


def tasks(names: list[str], start: int = 0, step: int = 10) -> list[dict]:
    return [{"node": name, "start": start + step * k, "end": start + step * (k + 1)} for k, name in enumerate(names)]


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    return zoo.load("lenet5-split", cache_dir=tmp_path_factory.getbasetemp() / "zoo-cache").file("keras")


def _layer_code(directory, manifest: dict, name: str) -> str:
    """A layer's lines with its buffers' names and offsets masked (they differ per core by design)."""
    layer = next(layer for layer in manifest["layers"] if layer["name"] == name)
    lines = (directory / layer["file"]).read_text().splitlines()[layer["lines"][0] - 1:layer["lines"][1]]
    return re.sub(r"\b(\w+_arena|input|output)\[[^\]]*\]", "BUF", "\n".join(line.strip() for line in lines))


def test_one_function_per_core_and_the_layers_code_untouched(model_file, tmp_path):
    sequential = codegen.generate(model_file, tmp_path / "seq", name="lenet5-split")
    schedule = [tasks(BRANCH_A + TAIL), tasks(BRANCH_B)]
    manifest = codegen.generate(model_file, tmp_path / "par", name="lenet5-split", cores=2, schedule=schedule)
    parallel = manifest["parallel"]
    assert parallel["functions"] == ["lenet5_split_core0", "lenet5_split_core1"]
    text = (tmp_path / "par" / "lenet5_split_inference.c").read_text()
    for function in parallel["functions"]:
        assert f"void {function}(const float *input, float *output) {{" in text
    assert "malloc" not in text
    for name in BRANCH_A + BRANCH_B + TAIL:
        assert _layer_code(tmp_path / "par", manifest, name) == _layer_code(tmp_path / "seq", sequential, name)
    # one channel (core 1 -> core 0), one message per inference: branch b's pooled output
    assert [(c["src"], c["dst"], c["messages"], c["capacity_floats"]) for c in parallel["channels"]] == [
        (1, 0, 1, 12 * 12 * 3)]
    assert "static volatile unsigned lenet5_split_flag_1_0;" in text
    assert "while (lenet5_split_flag_1_0 != 2u * lenet5_split_sent_1_0) { }" in text
    assert "while (lenet5_split_flag_1_0 != 2u * lenet5_split_received_1_0 + 1u) { }" in text
    assert text.count("__sync_synchronize();") == 4  # acquire and release in each operator
    kinds = [[(item["kind"], item.get("name") or item["layer"]) for item in core["items"]]
             for core in parallel["per_core"]]
    assert kinds[1] == [("layer", "split_b1_conv"), ("layer", "split_b1_avgpool"), ("write", "split_b1_avgpool")]
    assert kinds[0][:4] == [("layer", "split_a1_conv"), ("layer", "split_a1_avgpool"), ("read", "split_b1_avgpool"),
                            ("layer", "split_concat")]
    events = [item["event"] for core in parallel["per_core"] for item in core["items"]]
    assert sorted(events) == list(range(len(events)))


def test_operators_span_their_lines(model_file, tmp_path):
    manifest = codegen.generate(model_file, tmp_path, name="lenet5-split", cores=2,
                                schedule=[tasks(BRANCH_A + TAIL), tasks(BRANCH_B)])
    lines = (tmp_path / "lenet5_split_inference.c").read_text().splitlines()
    for core in manifest["parallel"]["per_core"]:
        for item in core["items"]:
            first, last = item["lines"]
            assert first <= last
            if item["kind"] != "layer":
                opening = lines[first - 1]
                assert ("Writing operator" if item["kind"] == "write" else "Reading operator") in opening
                assert any("for (int i = 0; i < 432; ++i)" in line for line in lines[first - 1:last])


def test_at_equal_times_a_core_writes_before_it_reads(model_file, tmp_path):
    """Both cores end a branch at 20 and each needs the other's: reading first on both would deadlock
    (found on inception-mini's DSH schedule)."""
    schedule = [tasks(BRANCH_A + TAIL), tasks(BRANCH_B + ["split_concat"])]
    manifest = codegen.generate(model_file, tmp_path, name="lenet5-split", cores=2, schedule=schedule)
    for core in manifest["parallel"]["per_core"]:
        operators = [item["kind"] for item in core["items"] if item["kind"] != "layer"]
        assert operators == ["write", "read"], core["core"]


def test_schedules_it_cannot_implement_are_refused(model_file, tmp_path):
    with pytest.raises(UnsupportedModel, match="'split_b1_avgpool' on core 1 needs the output of 'split_b1_conv'"):
        codegen.generate(model_file, tmp_path / "a", cores=2,
                         schedule=[tasks(BRANCH_A + TAIL), tasks(list(reversed(BRANCH_B)))])
    with pytest.raises(UnsupportedModel, match="does not place layer"):
        codegen.generate(model_file, tmp_path / "b", cores=2, schedule=[tasks(BRANCH_A + TAIL), []])
    with pytest.raises(UnsupportedModel, match="no such layer"):
        codegen.generate(model_file, tmp_path / "c", cores=1, schedule=[tasks(["nope"])])
    with pytest.raises(UnsupportedModel, match="uses 2 cores"):
        codegen.generate(model_file, tmp_path / "d", cores=1, schedule=[tasks(BRANCH_A + TAIL), tasks(BRANCH_B)])
