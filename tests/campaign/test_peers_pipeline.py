"""The whole pipeline for the peer generators on an ARM target (marked ``peers`` and ``slow``, about 17 min: run with ``pytest --peers --run-slow``;
the environments are built on first use, docs/peers.md): WCET from the C source alone, the loops it cannot
bound as a finding, memory with sizes from the DWARF and heap use, keras2c's stack and malloc from its source,
and a peer's refusal as ``not supported`` in every stage."""

import shutil

import pytest

from harness.core.plan import expand
from harness.measurement import cycles
from harness.stages.memory import run as memory
from harness.stages.met import run as met
from harness.stages.wcet import run as wcetrun

pytestmark = [pytest.mark.peers, pytest.mark.slow, pytest.mark.arm,
              pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                                 reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")]
TARGET = "cortex-m4f"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("peers-pipeline")


def wcet_records(model: str, generator: str, work) -> list[dict]:
    settings = wcetrun.Settings(n_inputs=3, work_dir=work)
    (item,) = cycles.plan([model], [generator], [TARGET], ["cortex-m4"], settings).items
    return wcetrun.run_item(item, settings, wcetrun.open_store(work / "wcet.json"))


def memory_records(model: str, generator: str, work) -> list[dict]:
    settings = memory.Settings(work_dir=work, n_inputs=3)
    items = expand([model], [generator], [TARGET], settings.campaign(), lambda _model, _profile: ()).items
    return [memory.run_item(item, settings) for item in items]


def test_acetone_dense_code_is_bounded_from_its_source(work):
    (record,) = wcet_records("acas-reg50", "acetone-nnet", work)
    assert record["verdict"] == "pass", record["cause"]
    assert record["wcet_cycles"] >= record["max_measured_cycles"] > 0
    assert "C source: for (" in open(record["flow_facts"]["f4"]).read()


def test_acetone_lenet5_soft_double_loops_are_bounded_by_library_annotations(work):
    """ACETONE's tanh calls the double exp (docs/peers.md A6): libgcc's soft-double loops are annotated."""
    (record,) = wcet_records("lenet5", "acetone-nnet:6loops", work)
    assert record["verdict"] == "pass", record["cause"]
    assert record["wcet_cycles"] >= record["max_measured_cycles"] > 0
    facts = open(record["flow_facts"]["f4"]).read()
    assert 'loop "__aeabi_dmul" + 0x1a6 51;' in facts and 'loop "__aeabi_ddiv" + 0x82 12;' in facts


def test_emlearn_loops_with_data_dependent_bounds_are_a_finding(work):
    (record,) = wcet_records("acas-reg50", "emlearn:loadable", work)
    assert record["verdict"] == "unbounded" and record["max_measured_cycles"] > 0
    loops = record["unbounded_loops"]
    assert len(loops) == 12 and all(loop.startswith("eml_net.h:") for loop in loops)
    # each says why its bound is data: a limit the C does not give as a literal, or a bound expression read at run
    # time (``for (i = 0; i < model->n_layers; ...)``, which the C parser reads as an expression)
    assert all("the limit is not an integer literal" in loop or "is read at run time" in loop for loop in loops)


def test_emlearn_memory_sizes_come_from_the_dwarf(work):
    (record,) = memory_records("acas-reg50", "emlearn:loadable", work)
    assert record["status"] == "pass", record["cause"]
    names = {row["name"] for row in record["inference"]["symbols"]}
    assert {"eml_net_infer", "acas_reg50_layer_0_weights", "acas_reg50_assay_entry"} <= names
    assert record["inference"]["rodata"] > 50_000 and record["heap"]["allocators"] == []


def test_keras2c_stack_and_malloc_are_reported_from_its_source(work):
    records = {r["variant"]: r for r in memory_records("lenet5", "keras2c", work)}
    for record in records.values():
        assert record["status"] == "error" and "ships no C backend" in record["cause"]
    stack, heap = records["stack"]["source"], records["malloc"]["source"]
    assert stack["stack_lower_bound"] >= 204_640 and stack["allocators"] == []
    assert heap["allocators"] == ["malloc"] and records["malloc"]["heap"]["paths"] == ["k2c_lenet5_initialize -> malloc"]


def test_a_refusal_is_not_supported_in_every_stage(work):
    settings = cycles.Settings(n_inputs=3, work_dir=work)
    (item,) = cycles.plan(["acas-reg50"], ["emlearn:inline"], [TARGET], ["cortex-m4"], settings).items
    (record,) = met.run_item(item, settings, met.open_store(work / "met.json"))
    assert record["verdict"] == "not supported" and "Inline inference not supported" in record["cause"]
    (record,) = wcet_records("acas-reg50", "emlearn:inline", work)
    assert record["verdict"] == "not supported"
    (record,) = memory_records("acas-reg50", "emlearn:inline", work)
    assert record["status"] == "not supported"
