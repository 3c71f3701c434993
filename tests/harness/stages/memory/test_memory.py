"""The memory-layout analysis: records, Table 5, the command, and, on real
generated models under QEMU, the static stack bound against the measured
high-water mark (static >= measured)."""

import json
import shutil
import subprocess
import sys

import pytest

import codegen
from harness.binary import elf, stack
from harness.core.plan import expand, load_model
from harness.stages.memory import run as memory
from harness.stages.memory.report import markdown, write_memory_report

ARM_TARGETS = ["arm7tdmi", "cortex-m4f", "cortex-a15"]
MODELS = ["acas-reg50", "lenet5"]
_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm")
needs_arm = pytest.mark.skipif(not all(shutil.which(tool) for tool in _TOOLS),
                               reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")



def plan(models: list[str], generators: list[str], targets_: list[str], settings: "memory.Settings"):
    """The memory stage's items: every combination, checked against nothing."""
    return expand(models, generators, targets_, settings.campaign(), lambda _model, _profile: ())

def cli(*args):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, check=False)


def fake_record(target, verdict="pass", static=184, measured=180, model="acas-reg50"):
    return {"model": model, "generator": "assay-v2", "variant": "keras", "target": target, "opt": "-O0",
            "verdict": verdict, "cause": None if verdict == "pass" else "static stack unbounded: cycle: a -> a",
            "inference": {"text": 2104, "rodata": 63420, "data": 0, "bss": 416,
                          "library": {"text": 1016, "functions": [{"name": "__cmpsf2", "size": 100}]}},
            "image": {"text": 25488, "rodata": 63664, "data": 2424, "bss": 716, "reserved": 0},
            "stack": {"static": {"bytes": static, "bounded": static is not None},
                      "measured": None if measured is None else {"bytes": measured, "painted": 16384, "calls": 20,
                                                                 "inputs": 20, "seed": 0}},
            "build": {"compiler": "arm-none-eabi-gcc 12.2.1", "flags": ["-O0", "-mcpu=arm7tdmi"]},
            "provenance": {"tools": {"python": "3.11"}}}


def test_table5_layout():
    text = markdown([fake_record("arm7tdmi"), fake_record("host", verdict="unbounded", static=None, measured=None)])
    assert "## acas-reg50, -O0" in text
    assert "| | assay-v2 (keras) arm7tdmi | assay-v2 (keras) host |" in text
    assert "| `.text` inference / image | 2104 / 25488 | 2104 / 25488 |" in text
    assert "| `.bss` inference / image | 416 / 716 |" in text
    assert "| stack, static bound | 184 | unbounded |" in text
    assert "| stack, measured (QEMU) | 180 | not measured |" in text
    assert "arm7tdmi: arm-none-eabi-gcc 12.2.1, flags `-O0 -mcpu=arm7tdmi`." in text
    assert "host -O0: unbounded: static stack unbounded: cycle: a -> a" in text


def test_store_replaces_records_by_key(tmp_path):
    store = memory.open_store(tmp_path / "memory.json")
    store.put(fake_record("arm7tdmi", static=100))
    store.put(fake_record("cortex-m4f"))
    store.put(fake_record("arm7tdmi", static=200))
    records = store.records()
    assert len(records) == 2
    assert next(r for r in records if r["target"] == "arm7tdmi")["stack"]["static"]["bytes"] == 200
    paths = write_memory_report(store.path, tmp_path / "report")
    assert paths[0].name == "table5.md" and "cortex-m4f" in paths[0].read_text()


def test_library_code_counts_overlapping_functions_once(tmp_path):
    symbols = [elf.Symbol("net", 0x100, 64, "FUNC", "GLOBAL", ".text"),
               elf.Symbol("__aeabi_fsub", 0x200, 448, "FUNC", "GLOBAL", ".text"),
               elf.Symbol("__addsf3", 0x204, 444, "FUNC", "GLOBAL", ".text"),
               elf.Symbol("__cmpsf2", 0x400, 100, "FUNC", "GLOBAL", ".text")]
    image = elf.ElfImage(path=tmp_path, machine="EM_ARM", sections=[], symbols=symbols, mapping=[], code={})
    functions = {s.name: stack.FunctionStack(s.name, [s.name], s.address, 0, "prologue") for s in symbols}
    bound = stack.StackBound("net", 0, None, [], functions)
    library = memory.library_code(image, bound, {"net"})
    assert library["text"] == 448 + 100
    assert [f["name"] for f in library["functions"]] == ["__addsf3", "__aeabi_fsub", "__cmpsf2"]


def test_unknown_target_is_bad_input(tmp_path):
    result = cli("memory", "--models", "acas-reg50", "--targets", "no-such-target", "--out", str(tmp_path))
    assert result.returncode == 2
    assert "unknown target 'no-such-target'" in result.stderr


@pytest.mark.tor("TOR-SEM-004")
def test_errors_become_records(tmp_path):
    settings = memory.Settings(work_dir=tmp_path / "work")
    item = plan(["no-such-model.onnx"], ["assay-v2"], ["host"], settings).items[0]
    record = memory.run_item(item, settings, memory.open_store(tmp_path / "memory.json"))
    assert record["verdict"] == memory.ERROR and record["cause"]


# --------------------------------------------------------------------------- real models under QEMU


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("memory") / "work"


@pytest.fixture(scope="module")
def records(work):
    if not all(shutil.which(tool) for tool in _TOOLS):
        pytest.skip("ARM toolchain or QEMU not installed")
    settings = memory.Settings(work_dir=work, n_inputs=20)
    store = memory.open_store(work.parent / "memory.json")
    session = memory.Session()
    campaign = plan(MODELS, ["assay-v2"], [*ARM_TARGETS, "host"], settings)
    for item in campaign.items:
        if item.variant == "keras":
            memory.run_item(item, settings, store, session)
    return store.records()


def find(records, model, target):
    (record,) = [r for r in records if r["model"] == model and r["target"] == target]
    return record


@pytest.mark.tor("TOR-MEM-001")
@pytest.mark.arm
@needs_arm
@pytest.mark.parametrize("target", ARM_TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_static_stack_bounds_the_measured_one(records, model, target):
    record = find(records, model, target)
    assert record["verdict"] == "pass", record["cause"]
    static, measured = record["stack"]["static"], record["stack"]["measured"]
    assert static["bounded"] and static["reason"] is None
    assert measured["calls"] == 20 and measured["painted"] == 16384 and measured["same_static"]
    assert 0 < measured["bytes"] <= static["bytes"]
    entry = static["worst_path"][0]
    assert entry["function"] == static["entry"] and static["worst_path"][-1]["depth"] == static["bytes"]
    assert static["functions"][static["entry"]]["su"] == static["functions"][static["entry"]]["prologue"]


@pytest.mark.tor("TOR-MEM-004")
@pytest.mark.arm
@needs_arm
@pytest.mark.parametrize("target", ARM_TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_inference_sizes_come_from_the_manifest_symbols(records, model, target):
    record = find(records, model, target)
    inference, image = record["inference"], record["image"]
    assert inference["missing"] == []
    arena = next(row for row in inference["symbols"] if row["name"].endswith("_arena"))
    assert arena["kind"] == "bss" and arena["size"] == inference["bss"] > 0
    for kind in ("text", "rodata", "data", "bss"):
        assert 0 <= inference[kind] <= image[kind]
    assert inference["data"] == 0 and inference["rodata"] > 10000  # the parameters are constants
    if target == "arm7tdmi":  # soft float: libgcc helpers are reached
        assert any(f["name"].startswith("__") for f in inference["library"]["functions"])


@pytest.mark.arm
@needs_arm
def test_lenet5_stack_goes_through_libm(records):
    for target in ARM_TARGETS:
        static = find(records, "lenet5", target)["stack"]["static"]
        assert "tanhf" in [step["function"] for step in static["worst_path"]]


@pytest.mark.arm
@needs_arm
def test_host_has_no_bound_through_a_shared_libm(records):
    assert find(records, "acas-reg50", "host")["verdict"] == "pass"
    lenet = find(records, "lenet5", "host")
    assert lenet["verdict"] == "unbounded" and "no stack data for tanhf" in lenet["cause"]
    assert lenet["stack"]["measured"] is None


@pytest.mark.arm
@needs_arm
def test_incbin_weights_blob_is_attributed(records, work, tmp_path):
    model = load_model("acas-reg50", memory.Settings(work_dir=work).campaign())
    out = tmp_path / "incbin"
    codegen.generate(str(model.file("keras")), str(out), name="acas_reg50", weights="incbin")
    settings = memory.Settings(work_dir=work, n_inputs=5)
    (item,) = plan(["acas-reg50"], [f"dir:{out}"], ["cortex-m4f"], settings).items
    record = memory.run_item(item, settings)
    assert record["verdict"] == "pass", record["cause"]
    blob = next(row for row in record["inference"]["symbols"] if row["name"] == "acas_reg50_weights")
    assert blob["kind"] == "rodata" and blob["size"] == (out / "acas_reg50_weights.bin").stat().st_size
    keras = find(records, "acas-reg50", "cortex-m4f")
    assert record["inference"]["rodata"] == keras["inference"]["rodata"]  # same parameters, one blob


@pytest.mark.arm
@needs_arm
def test_command_writes_memory_json_and_table5(records, work, tmp_path):
    out = tmp_path / "report"
    result = cli("memory", "--models", "acas-reg50", "--targets", "cortex-a15", "--inputs", "5", "--quiet",
                 "--work", str(work), "--out", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "memory.json").read_text())
    assert data["schema"] == memory.SCHEMA and {r["variant"] for r in data["records"]} == {"keras", "onnx"}
    table = (out / "table5.md").read_text()
    assert "## acas-reg50, -O0" in table and "stack, static bound" in table


@pytest.mark.tor("TOR-MEM-001")
@pytest.mark.arm
@needs_arm
@pytest.mark.parametrize("target", ["arm7tdmi-ext", "cortex-m4f"])  # V1's two buffers: lenet5 needs 34 KB RAM
def test_v1_static_stack_goes_through_the_function_pointers(work, target):
    """assay-v1 calls every layer and activation through pointers: the manifest's targets bound the stack,
    at least the painted one, on the path entry -> a layer function -> an activation."""
    settings = memory.Settings(work_dir=work, n_inputs=20)
    for item in plan(MODELS, ["assay-v1"], [target], settings).items:
        if item.variant != "keras":
            continue
        record = memory.run_item(item, settings)
        assert record["verdict"] == "pass", record["cause"]
        static, measured = record["stack"]["static"], record["stack"]["measured"]
        assert static["bounded"] and measured["same_static"] and 0 < measured["bytes"] <= static["bytes"]
        path = [step["function"] for step in static["worst_path"]]
        assert path[1].startswith("assay_v1_") and path[2].startswith("assay_v1_"), path


@pytest.mark.arm
@needs_arm
def test_heap_reachable_from_the_entry_and_sizes_from_dwarf_without_symbols(dense_keras_model, work, loop_dense_dir):
    """Another tool's code (assay.json: no symbols) that calls malloc: the record names the allocator and a
    call path from the entry, and the inference sizes are what its file defines (DWARF)."""
    settings = memory.Settings(work_dir=work, n_inputs=5)
    records = {}
    for name, allocate in (("heap", True), ("noheap", False)):
        (item,) = plan([dense_keras_model], [loop_dense_dir(name, allocate=allocate)],
                       ["cortex-m4f"], settings).items
        records[name] = memory.run_item(item, settings)
    heap = records["heap"]
    assert heap["verdict"] == "pass", heap["cause"]
    assert heap["heap"]["allocators"] == ["malloc"] and heap["heap"]["paths"][0].startswith("dense -> ")
    assert records["noheap"]["heap"] == {"allocators": [], "origin": "binary call graph", "paths": []}
    names = {row["name"] for row in heap["inference"]["symbols"]}
    assert {"dense", "W", "B"} <= names and any(n.startswith("scratch") for n in names)  # a static of dense
    assert heap["inference"]["rodata"] >= 32 and heap["inference"]["bss"] >= 4
    assert "malloc" in markdown([heap]).split("heap allocation reachable from the entry")[1].splitlines()[0]


@pytest.mark.arm
@needs_arm
def test_an_analysis_only_target_has_sizes_and_a_static_bound_but_no_measurement(dense_keras_model, work,
                                                                                   loop_dense_dir):
    """cortex-m4f-big (``not_runnable``): the image is built and analysed, QEMU never runs, and the record
    says why there is no measured stack instead of failing."""
    settings = memory.Settings(work_dir=work, n_inputs=5)
    (item,) = plan([dense_keras_model], [loop_dense_dir("literal")], ["cortex-m4f-big"], settings).items
    record = memory.run_item(item, settings)
    assert record["verdict"] == memory.NOT_MEASURED, record["cause"]
    assert record["cause"].startswith("target cortex-m4f-big is not runnable (analysis only)")
    assert record["stack"]["static"]["bounded"] and record["stack"]["measured"] is None
    assert record["inference"]["text"] > 0 and "run_s" not in record["timings"]
