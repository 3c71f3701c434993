"""WCET soundness over the default zoo tier (issue 4), on with ``pytest --wcet``.

For every model and ARM target: automatic flow facts, the built-in analyzer's
bound, and the check that it is at least every measured cycle count (QEMU,
counting plugin, same timing model) in total and per layer. arm7tdmi-ext is
the ARM7TDMI with external memory, so that every model of the tier fits.
"""

import shutil

import pytest

from harness.measurement import cycles
from harness.models import zoo
from harness.stages.wcet import run as wcetrun
from wcet import ffformat

TARGETS = ["arm7tdmi-ext", "cortex-m4f"]
N_INPUTS = 10

pytestmark = [pytest.mark.wcet, pytest.mark.arm,
              pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-arm"),
                                 reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")]


@pytest.mark.tor("TOR-WCET-001")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", zoo.names("default"))
def test_wcet_bounds_every_measurement(model, target, tmp_path):
    settings = wcetrun.Settings(n_inputs=N_INPUTS, work_dir=tmp_path / "work")
    plan = cycles.plan([model], ["assay-v2"], [target], None, settings)
    (item,) = [i for i in plan.items if i.variant == "keras"]
    records = wcetrun.run_item(item, settings, wcetrun.open_store(tmp_path / "wcet.json"))
    assert {r["timing"] for r in records} == {"trivial", "arm7tdmi" if target.startswith("arm7") else "cortex-m4"}
    for record in records:
        assert record["verdict"] == "pass", record["cause"]
        assert record["wcet_cycles"] >= record["max_measured_cycles"] > 0
        assert record["tightness"] >= 1.0
        layers = record["layers"]
        assert len([lay for lay in layers if lay["layer"] != "(outside layers)"]) >= 1
        for layer in layers:
            assert layer["wcet_cycles"] >= layer["max_measured_cycles"], layer
        # each layer's bound covers its share of the worst path, so the bounds add up to at least the total
        assert sum(layer["wcet_cycles"] for layer in layers) >= record["wcet_cycles"]
    # the flow facts written for OTAWA read back under the strict grammar, with every loop bounded
    files = records[0]["flow_facts"]
    f4 = ffformat.parse_f4(open(files["f4"]).read(), source=files["f4"])
    ffx = ffformat.parse_ffx(open(files["ffx"]).read(), source=files["ffx"])
    assert f4.loops and all(loop.max > 0 for loop in f4.loops)
    assert {(lp.function, lp.offset) for lp in ffx.loops} == {(lp.function, lp.offset) for lp in f4.loops}


@pytest.mark.tor("TOR-WCET-001")
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["acas-reg50", pytest.param("lenet5", marks=pytest.mark.slow)])
def test_v1_precise_bound_per_layer_between_measured_and_context_insensitive(model, target, tmp_path):
    """assay-v1 (generic layer loop, shared library, function pointers): per layer (one execution of the
    dispatch call, measured by execution under QEMU) and in total, measured <= precise <= context-insensitive,
    and the call targets QEMU saw in each layer are the ones the flow facts give that execution."""
    settings = wcetrun.Settings(n_inputs=N_INPUTS, work_dir=tmp_path / "work")
    plan = cycles.plan([model], ["assay-v1"], [target], None, settings)
    (item,) = [i for i in plan.items if i.variant == "keras"]
    records = wcetrun.run_item(item, settings, wcetrun.open_store(tmp_path / "wcet.json"))
    for record in records:
        assert record["verdict"] == "pass", record["cause"]
        assert record["wcet_cycles"] >= record["wcet_cycles_precise"] >= record["max_measured_cycles"] > 0
        net = [lay for lay in record["layers"] if "wcet_cycles_insensitive" in lay]
        assert len(net) >= 8 if model == "acas-reg50" else len(net) >= 5
        for layer in net:
            assert layer["wcet_cycles_insensitive"] >= layer["wcet_cycles"] >= layer["max_measured_cycles"] > 0, layer
        # layers of different sizes (and types): the precise bound is strictly tighter
        assert record["wcet_cycles_precise"] < record["wcet_cycles"]
    # QEMU: in layer k's bucket, the k-th table entry's layer function and its activation start exactly once
    counts, code, _ = cycles.count_item(item, settings, wcetrun.STAGE)
    names = counts.bucket_names
    table = {layer["net_index"]: layer for layer in code.manifest["layers"] if "net_index" in layer}
    for index, layer in table.items():
        bucket = names.index(layer["name"])
        for name in (layer["layer_type"], layer["actv_function"]):
            start = counts.code.function(name).start
            assert all(call.counts.get(bucket, {}).get(start, [0])[0] == 1 for call in counts.calls), (layer, name)
