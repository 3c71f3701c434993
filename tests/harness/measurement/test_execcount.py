"""The QEMU instruction counter is exact: checked against a program counted by hand.

The program (arm7tdmi, -O0) has a loop whose trip count comes from the input's
bits and a helper in a separate "library" file called twice. The expected
execution count of every instruction is derived in the test from binutils'
disassembly with source lines (``objdump -d -l``, independent of the
harness's own ELF reading): the loop's blocks from its two branches, the
layer of each address from its source line, and the helper's instructions
charged to the layer that calls it.
"""

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from harness import targets
from harness.measurement import execcount
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, qemu

_TOOLS = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "qemu-arm": "qemu-user", "gcc": "gcc"}
_MISSING = [f"{tool} ({package})" for tool, package in _TOOLS.items() if shutil.which(tool) is None]
needs_tools = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}; run .ci/setup")

NET_C = """\
int helper(int x);
void net(const float *input, float *output)
{
    const int n = ((const int *)input)[0] & 7;
    int s = 0;
    /* layer 0: loop */
    for (int i = 0; i < n; ++i) {
        s += i;
    }
    /* layer 1: calls */
    s = helper(s);
    s = helper(s);
    ((int *)output)[0] = s;
}
"""
LOOP_LINES, CALL_LINES = (6, 9), (10, 12)
LIB_C = "int helper(int x) { return x * 3 + 1; }\n"

MANIFEST = {
    "schema": "assay-manifest/1",
    "entry": {"symbol": "net", "signature": "void net(const float *input, float *output)", "file": "net.c"},
    "inputs": [{"name": "x", "shape": [1], "layout": "C", "size": 1, "dtype": "float32"}],
    "outputs": [{"name": "y", "shape": [1], "layout": "C", "size": 1, "dtype": "float32"}],
    "sources": ["net.c", "lib.c"],
    "symbols": {"code": ["net"], "data": []},
    "layers": [
        {"index": 0, "name": "loop", "op": "Loop", "function": "net", "file": "net.c", "lines": list(LOOP_LINES)},
        {"index": 1, "name": "calls", "op": "Call", "function": "net", "file": "net.c", "lines": list(CALL_LINES)},
    ],
}

TRIPS = [3, 0, 7, 5]  # the loop's trip count for each input (the low 3 bits of its bits)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    source = root / "src"
    source.mkdir()
    (source / "net.c").write_text(NET_C)
    (source / "lib.c").write_text(LIB_C)
    (source / "manifest.json").write_text(json.dumps(MANIFEST))
    code = GeneratedCode.from_directory(source)
    built = qemu.build(code, root / "build", targets.get("arm7tdmi"), "-O0")
    inputs = np.array(TRIPS, dtype=np.int32).view(np.float32).reshape(-1, 1)
    return built, execcount.count(built, inputs, timeout=60, cache_dir=root / "plugin")


def objdump(elf, function):
    """[(address, mnemonic, operands, source line)] of ``function``, from ``objdump -d -l``."""
    text = subprocess.run(["arm-none-eabi-objdump", "-d", "-l", f"--disassemble={function}", str(elf)],
                          capture_output=True, text=True, check=True).stdout
    rows, line = [], None
    for row in text.splitlines():
        location = re.match(r"^\S+\.c:(\d+)", row)
        if location:
            line = int(location.group(1))
            continue
        insn = re.match(r"^\s+([0-9a-f]+):\s+[0-9a-f]{8}\s+(\S+)\s*([^;@]*)", row)
        if insn:
            rows.append((int(insn.group(1), 16), insn.group(2), insn.group(3).strip(), line))
    return rows


def expected_counts(elf, n):
    """{bucket: {address: executions}} for one call with loop trip count ``n``, derived from the disassembly."""
    net, helper = objdump(elf, "net"), objdump(elf, "helper")
    # -O0 lays a for loop out as: jump forward to the condition; body; condition ending in a
    # conditional branch back to the body. The body runs n times, the condition n + 1 times.
    forward = [(a, ops) for a, m, ops, _ in net if m == "b"]
    backward = [(a, ops) for a, m, ops, _ in net if re.fullmatch(r"b(lt|le|gt|ge|ne|eq|lo|hi|ls|hs|cc|cs)", m)]
    assert len(forward) == 1 and len(backward) == 1, net
    condition = int(forward[0][1].split()[0], 16)
    body = int(backward[0][1].split()[0], 16)
    branch = backward[0][0]
    assert body < condition <= branch
    calls = [a for a, m, ops, _ in net if m == "bl" and "<helper>" in ops]
    assert len(calls) == 2

    def bucket(line):
        if LOOP_LINES[0] <= line <= LOOP_LINES[1]:
            return 1
        if CALL_LINES[0] <= line <= CALL_LINES[1]:
            return 2
        return 0

    counts = {}
    for address, _, _, line in net:
        executions = n if body <= address < condition else n + 1 if condition <= address <= branch else 1
        if executions:
            counts.setdefault(bucket(line), {})[address] = executions
    assert all(bucket(line) == 2 for address, _, _, line in net if address in calls)
    for address, *_ in helper:  # straight-line code, run once per call, charged to the caller's layer
        counts.setdefault(2, {})[address] = 2
    return counts, branch


@pytest.mark.tor("TOR-MET-001")
@needs_tools
@pytest.mark.arm
def test_counts_match_the_hand_count_per_input_per_address_and_per_layer(tiny):
    built, result = tiny
    assert result.bucket_names == ["(outside layers)", "loop", "calls"]
    assert len(result.calls) == len(TRIPS)
    for n, call in zip(TRIPS, result.calls):
        expected, branch = expected_counts(built.elf, n)
        measured = {bucket: {address: pair[0] for address, pair in per_address.items()}
                    for bucket, per_address in call.counts.items()}
        assert measured == expected, f"trip count {n}"
        assert call.instructions() == sum(sum(per.values()) for per in expected.values())
        # the loop's backward branch was taken n times (the jumps the counter saw)
        assert call.counts[1][branch][1] == n
    assert result.outputs.view(np.int32)[:, 0].tolist() == [3 * (3 * (n * (n - 1) // 2) + 1) + 1 for n in TRIPS]


def main_range(elf):
    from elftools.elf.elffile import ELFFile

    with open(elf, "rb") as stream:
        symbol = ELFFile(stream).get_section_by_name(".symtab").get_symbol_by_name("main")[0]
    start = symbol["st_value"] & ~1
    return start, start + symbol["st_size"]


def singlestep_counts(built, entry, inputs):
    """Per call of ``entry``: executions per address, from QEMU's own trace with one instruction per block.

    An independent count: ``-singlestep`` makes every instruction its own
    translation block and ``-d exec,nochain`` logs each block as it runs. QEMU runs (unconfined: this is the
    test's own code) in a folder of its own holding the inputs file (Assay's runs leave nothing in the build
    folder).
    """
    work = built.elf.parent / "singlestep"
    work.mkdir()
    (work / qemu.INPUTS_FILE).write_bytes(inputs.astype("<f4").tobytes())
    shutil.copy(built.elf, work / built.elf.name)
    log = work / "singlestep.log"
    program = (["-kernel", built.elf.name] if built.profile.kind == "qemu-system"
               else [built.elf.name, qemu.INPUTS_FILE, qemu.OUTPUTS_FILE])
    subprocess.run([built.profile.emulator_path(), *built.profile.emulator_args, "-singlestep",
                    "-d", "exec,nochain", "-D", str(log), *program], cwd=work, check=True, timeout=120,
                   capture_output=True)
    pcs = [int(m.group(1), 16) for m in re.finditer(r"Trace \d+: \S+ \[[0-9a-f]+/([0-9a-f]+)/", log.read_text())]
    main_start, main_end = main_range(built.elf)
    calls, inside = [], None
    for pc in pcs:
        if inside is None and pc == entry:
            inside = {}
        elif inside is not None and main_start <= pc < main_end:  # back in the caller
            calls.append(inside)
            inside = None
        if inside is not None:
            inside[pc] = inside.get(pc, 0) + 1
    return calls


@pytest.mark.tor("TOR-MET-001")
@needs_tools
@pytest.mark.arm
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_counts_equal_qemus_single_step_trace(tmp_path, tiny, target):
    """The plugin counts per translation-block segment; QEMU's single-step trace counts one by one."""
    if shutil.which(targets.get(target).emulator) is None:
        pytest.skip(f"{targets.get(target).emulator} not installed")
    built = qemu.build(GeneratedCode.from_directory(tiny[0].code.directory), tmp_path / target,
                       targets.get(target), "-O0")
    inputs = np.array(TRIPS, dtype=np.int32).view(np.float32).reshape(-1, 1)
    result = execcount.count(built, inputs, timeout=60, cache_dir=tmp_path / "plugin")
    reference = singlestep_counts(built, result.code.function("net").start, inputs)
    assert len(reference) == len(TRIPS)
    assert [call.per_address() for call in result.calls] == reference


@pytest.mark.tor("TOR-MET-003")
def test_parse_reports_an_incomplete_call_and_plugin_errors(tmp_path):
    out = tmp_path / "out"
    out.write_text("I 0\nD 0 2 100 104\nC 0 1 5 1\nE 0\nI 1\nD 1 1 104\nC 1 1 2 0\nC 0 1 1 0\nE 1\n")
    first, second = execcount.parse(out)
    assert first.counts == {1: {0x100: [5, 0], 0x104: [5, 1]}}
    assert second.counts == {1: {0x100: [1, 0], 0x104: [3, 0]}}
    assert second.instructions() == 4 and second.per_address() == {0x100: 1, 0x104: 3}
    out.write_text("I 0\nD 0 1 100\nC 0 1 5 0\nX incomplete\n")
    with pytest.raises(RunError, match="ended inside a call"):
        execcount.parse(out)
    out.write_text("X error return address inside a segment\n")
    with pytest.raises(RunError, match="return address inside a segment"):
        execcount.parse(out)


@needs_tools
def test_plugin_builds_once_per_source(tmp_path):
    first = execcount.plugin_library(tmp_path)
    assert first.is_file() and execcount.plugin_library(tmp_path) == first


@pytest.mark.arm
@pytest.mark.skipif(shutil.which("qemu-system-arm") is None or shutil.which("arm-none-eabi-gcc") is None,
                    reason="needs qemu-system-arm and arm-none-eabi-gcc (.ci/setup)")
def test_per_vcpu_counts_of_parallel_code_match_the_sequential_layers(tmp_path_factory, tmp_path):
    """lenet5-split on two cortex-a15x4 cores: each vCPU is counted apart, a layer costs on its core what it
    costs in the sequential V2 code (same C, same compiler; within 10 %: buffers differ), the busy waits apart."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runners"))
    from parallel_support import BRANCH_B, SPLIT_SCHEDULE, load, parallel, sequential, sizes
    from harness.runners import qemu_smp

    profile = targets.get("cortex-a15x4")
    model = load("lenet5-split", tmp_path_factory.getbasetemp() / "zoo-cache")
    seq = sequential(model, tmp_path / "seq")
    code = parallel(model, tmp_path / "par", 2, SPLIT_SCHEDULE)
    inputs = np.random.default_rng(3).random((2, sizes(model)), dtype=np.float32)
    sequential_counts = execcount.count(qemu_smp.build(seq, tmp_path / "seq-build", profile, trace=False),
                                        inputs, smp_run=qemu_smp.run)
    assert [call.vcpu for call in sequential_counts.calls] == [0, 0]
    cores = execcount.count_parallel(qemu_smp.build(code, tmp_path / "par-build", profile, trace=False), inputs,
                                     qemu_smp.run)
    assert [core.core for core in cores] == [0, 1] and all(len(core.work) == 2 for core in cores)
    names = sequential_counts.bucket_names
    per_core = code.manifest["parallel"]["per_core"]
    for core in per_core:
        for item in (i for i in core["items"] if i["kind"] == "layer"):
            expected = max(call.instructions(names.index(item["name"])) for call in sequential_counts.calls)
            # the same C but other buffers: arena offsets change address computations at -O0
            assert cores[core["core"]].items.get(item["event"], 0) == pytest.approx(expected, rel=0.1), item["name"]
    assert {i["name"] for i in per_core[1]["items"] if i["kind"] == "layer"} == set(BRANCH_B)
    total = max(call.instructions() for call in sequential_counts.calls)
    assert cores[1].work[0] < total / 3 < cores[0].work[0] < total < cores[0].work[0] + cores[1].work[0]
    assert cores[1].waits[0] < 20 < cores[0].waits[0]  # core 0 spins for branch b; core 1 never waits
