"""The OTAWA driver, tested against OTAWA's recorded real outputs (tests/wcet/otawa-recordings/).

The parsers are checked on every recorded ``owcet-*.out``; the process
handling (command line, exit status, stdout and stderr, time-out, PATH lookup)
with fake ``owcet``/``mkff`` scripts put on PATH that replay those recordings,
which runs on any machine. Where the real OTAWA of ``../shared/otawa-bin``
loads (the ``real_otawa`` fixture of tests/conftest.py, which skips with the
loader's message elsewhere), the same samples go through it: the recorded
figures, the recorded error, mkff's loops and odisasm's decoding.
"""

import json
import os
import stat
import sys

import pytest

from wcet.errors import ConfigurationError
from wcet import otawa
from wcet.facts import FlowFacts
from wcet.ffformat import parse_f4
from recordings import OTAWA, needs_recordings

pytestmark = needs_recordings


def recording(name: str) -> tuple[str, int]:
    """(what owcet printed, its exit status) from a recorded ``.out`` (last line: ``exit status: N``)."""
    lines = (OTAWA / name).read_text().splitlines()
    assert lines[-1].startswith("exit status:")
    return "".join(line + "\n" for line in lines[:-1]), int(lines[-1].split(":")[1])


@pytest.mark.parametrize("name, function, cycles", [
    ("arm7tdmi/owcet-trivial.out", "main", 22715),
    ("arm7tdmi/owcet-trivial-ffx.out", "main", 22715),
    ("arm7tdmi/owcet-generic.out", "main", 50964),
    ("cortex-m4/owcet-trivial.out", "layer", 15755),
    ("cortex-m4/owcet-stm32-arch0.out", "layer", 186197),
])
def test_recorded_wcets_are_read(name, function, cycles):
    output, status = recording(name)
    result = otawa.parse_owcet_output(output, status, function)
    assert (result.wcet_cycles, result.error, result.exit_status) == (cycles, None, 0)


def test_recorded_error_becomes_an_error_with_otawas_message():
    output, status = recording("cortex-m4/owcet-unbounded.out")
    result = otawa.parse_owcet_output(output, status, "layer")
    assert status == 2 and result.wcet_cycles is None and result.exit_status == 2
    assert result.error == ("owcet exited with status 2: otawa::FlowFactLoader (1.4.0):unbounded.ff: 2: "
                            "no bound for loop at 08000052")


def test_output_edge_cases():
    assert otawa.parse_owcet_output("ERROR: boom\nWCET[f] = 5 cycles\n", 0, "f").error == "boom"
    assert otawa.parse_owcet_output("WCET[g] = 5 cycles\n", 0, "f").error == "owcet printed no WCET[f] line " \
                                                                             "(it printed WCET[g])"
    assert otawa.parse_owcet_output("", 139, "f").error == "owcet exited with status 139 and printed nothing"
    assert otawa.parse_owcet_output("WCET[f] = 5 cycles\n", None, "f").error == "owcet did not finish"


FAKE = """\
#!{python}
# A stand-in for OTAWA's {tool}: records its arguments, replays a recorded output.
import json, os, sys, time
with open(os.environ["ASSAY_FAKE_ARGS"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
time.sleep(float(os.environ.get("ASSAY_FAKE_SLEEP", "0")))
lines = open(os.environ["ASSAY_FAKE_{upper}"]).read().splitlines()
status = 0
if lines and lines[-1].startswith("exit status:"):
    status = int(lines.pop().split(":")[1])
sys.stdout.write("".join(line + "\\n" for line in lines))
sys.exit(status)
"""


@pytest.fixture
def fake_otawa(tmp_path, monkeypatch):
    """Fake owcet and mkff on PATH; returns a function that reads the argument lists they were called with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("owcet", "mkff"):
        path = bin_dir / tool
        path.write_text(FAKE.format(python=sys.executable, tool=tool, upper=tool.upper()))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    args = tmp_path / "args.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("ASSAY_FAKE_ARGS", str(args))
    monkeypatch.setenv("ASSAY_FAKE_MKFF", str(OTAWA / "cortex-m4/mkff-output.ff"))
    return lambda: [json.loads(line) for line in args.read_text().splitlines()] if args.is_file() else []


def test_not_installed_is_said(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("OTAWA_HOME", raising=False)
    assert not otawa.available() and not otawa.mkff_available()
    with pytest.raises(ConfigurationError, match="owcet is not on PATH"):
        otawa.run_owcet(OTAWA / "cortex-m4/fdense_m4.elf", "layer", OTAWA / "cortex-m4/fdense_m4.ff")


def test_run_owcet_command_and_result(fake_otawa, monkeypatch):
    monkeypatch.setenv("ASSAY_FAKE_OWCET", str(OTAWA / "cortex-m4/owcet-trivial.out"))
    elf, ff = OTAWA / "cortex-m4/fdense_m4.elf", OTAWA / "cortex-m4/fdense_m4.ff"
    assert otawa.available()
    result = otawa.run_owcet(elf, "layer", ff, "trivial", {"ARCH": "0"})
    assert (result.wcet_cycles, result.error, result.exit_status, result.ok) == (15755, None, 0, True)
    assert fake_otawa() == [["-s", "trivial", "-p", "ARCH=0", str(elf), "layer", "-f", str(ff)]]
    assert "WCET[layer] = 15755 cycles" in result.stdout


def test_run_owcet_error_verdict_with_otawas_message(fake_otawa, monkeypatch):
    monkeypatch.setenv("ASSAY_FAKE_OWCET", str(OTAWA / "cortex-m4/owcet-unbounded.out"))
    result = otawa.run_owcet(OTAWA / "cortex-m4/fdense_m4.elf", "layer", OTAWA / "cortex-m4/unbounded.ff")
    assert result.wcet_cycles is None and result.exit_status == 2 and not result.ok
    assert "no bound for loop at 08000052" in result.error


def test_run_owcet_time_out(fake_otawa, monkeypatch):
    monkeypatch.setenv("ASSAY_FAKE_OWCET", str(OTAWA / "cortex-m4/owcet-trivial.out"))
    monkeypatch.setenv("ASSAY_FAKE_SLEEP", "5")
    result = otawa.run_owcet(OTAWA / "cortex-m4/fdense_m4.elf", "layer", OTAWA / "cortex-m4/fdense_m4.ff",
                             timeout=0.5)
    assert result.error == "owcet did not finish within 0.5 s" and result.exit_status is None


def test_scripts_by_name_or_path(fake_otawa, tmp_path):
    elf, ff = OTAWA / "arm7tdmi/dense.elf", OTAWA / "arm7tdmi/dense.ff"
    script = tmp_path / "mine.osx"
    script.write_text("<otawa-script/>")
    assert otawa.owcet_command(elf, "main", ff, str(script))[1:3] == ["-s", str(script.resolve())]
    assert otawa.owcet_command(elf, "main", ff, "generic")[1:3] == ["-s", "generic"]
    with pytest.raises(ConfigurationError, match="no such file"):
        otawa.owcet_command(elf, "main", ff, str(tmp_path / "missing.osx"))
    with pytest.raises(ConfigurationError, match="script name"):
        otawa.owcet_command(elf, "main", ff, "trivial; rm -rf")


def test_mkff_loops_are_compared_with_our_facts(fake_otawa):
    elf = OTAWA / "cortex-m4/fdense_m4.elf"
    loops = otawa.mkff_loops(elf, "layer")
    assert fake_otawa() == [[str(elf), "layer"]]
    assert [(l.function, l.offset, l.address) for l in loops] == [("layer", 0x6A, 0x800006A),
                                                                  ("layer", 0x52, 0x8000052)]
    symbols = otawa.function_symbols(elf)
    ours = parse_f4(OTAWA / "cortex-m4/fdense_m4.ff")
    assert otawa.uncovered_loops(loops, ours, symbols) == []
    outer_only = FlowFacts(loops=tuple(l for l in ours.loops if l.offset == 0x6A))
    assert otawa.uncovered_loops(loops, outer_only, symbols) == [
        "mkff finds a loop at layer + 0x52 (0x8000052) that the flow facts do not bound"]
    assert otawa.mkff_problems(elf, "layer", outer_only) == [
        "mkff finds a loop at layer + 0x52 (0x8000052) that the flow facts do not bound"]
    # the same loops named by absolute address are covered
    absolute = FlowFacts(loops=tuple(l.__class__(None, symbols["layer"] + l.offset, l.max) for l in ours.loops))
    assert otawa.uncovered_loops(loops, absolute, symbols) == []


def test_tools_are_found_in_home_then_on_path_then_in_otawa_home(fake_otawa, tmp_path, monkeypatch):
    home = tmp_path / "otawa"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "owcet").write_text("#!/bin/sh\n")
    assert otawa.tool("owcet", home) == str(home / "bin" / "owcet")
    assert otawa.tool("odisasm", home) is None  # a home is the only place looked in
    assert otawa.tool("owcet") == str(tmp_path / "bin" / "owcet")  # the fake on PATH
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("OTAWA_HOME", str(home))
    assert otawa.tool("owcet") == str(home / "bin" / "owcet") and otawa.available()
    elf = OTAWA / "arm7tdmi/dense.elf"
    assert otawa.owcet_command(elf, "main", None)[-2:] == [str(elf), "main"]  # no -f without facts


ODISASM_SAMPLE = """\
# FUNCTION layer
\tlayer:
0800000a  2ee0  bs.n 0800006a
\t\tkind = CONTROL 
\t\ttarget = 0800006a
0800000c  1c4a  ldr r2, [pc, #0x70]
\t\tkind = MEM LOAD INT 
# FUNCTION expf
00002526  9fed3b5a  vldr d10, [pc, #236]
\t\tkind = MEM LOAD FLOAT
0000252e  17ee  <unknown>
\t\tkind = 
00008018  30f19f97  ldrls pc, [pc, r3, lsl #2]
\t\tkind = COND CONTROL MEM LOAD INT 
\t\ttarget = unknown
"""


def test_odisasm_output_is_read_with_sizes_kinds_and_targets():
    functions = otawa.parse_odisasm_output(ODISASM_SAMPLE)
    assert list(functions) == ["layer", "expf"]
    branch, load = functions["layer"]
    assert (branch.address, branch.size, branch.text, branch.kind, branch.target, branch.control) == (
        0x800000A, 2, "bs.n 0800006a", ("CONTROL",), 0x800006A, True)
    assert (load.size, load.kind, load.target, load.control) == (2, ("MEM", "LOAD", "INT"), None, False)
    vldr, unknown, table = functions["expf"]
    assert (vldr.size, unknown.size, unknown.text, unknown.kind) == (4, 2, "<unknown>", ())
    assert table.control and table.target is None and table.kind[:2] == ("COND", "CONTROL")
    assert table.lines == ("00008018  30f19f97  ldrls pc, [pc, r3, lsl #2]", "\t\tkind = COND CONTROL MEM LOAD INT",
                           "\t\ttarget = unknown")


# ---- the real OTAWA (../shared/otawa-bin): skips with the loader's message where it cannot load ----


@pytest.mark.otawa
@pytest.mark.parametrize("elf, function, facts, cycles", [
    ("arm7tdmi/dense.elf", "main", "arm7tdmi/dense.ff", 22715),
    ("arm7tdmi/dense.elf", "main", "arm7tdmi/dense-context.ffx", 22715),
    ("cortex-m4/fdense_m4.elf", "layer", "cortex-m4/fdense_m4.ff", 15755),
])
def test_real_owcet_gives_the_recorded_figures(real_otawa, elf, function, facts, cycles):
    params = {"virtual": "true"} if facts.endswith("context.ffx") else {}  # as recorded: contexts need it
    result = otawa.run_owcet(OTAWA / elf, function, OTAWA / facts, "trivial", params, timeout=120,
                             home=real_otawa.home)
    assert (result.wcet_cycles, result.error, result.exit_status) == (cycles, None, 0), result.stdout
    assert result.command[0] == str(real_otawa.bin / "owcet")


@pytest.mark.otawa
def test_real_owcet_error_is_the_recorded_one(real_otawa):
    result = otawa.run_owcet(OTAWA / "cortex-m4/fdense_m4.elf", "layer", OTAWA / "cortex-m4/unbounded.ff",
                             timeout=120, home=real_otawa.home)
    assert result.wcet_cycles is None and result.exit_status == 2
    assert "no bound for loop at 08000052" in result.error


@pytest.mark.otawa
def test_real_odisasm_on_the_recorded_sample(real_otawa):
    elf = OTAWA / "cortex-m4/fdense_m4.elf"
    decoded = otawa.run_odisasm(elf, "layer", OTAWA / "cortex-m4/fdense_m4.ff", timeout=120, home=real_otawa.home)
    insns = {insn.address: insn for insn in decoded["layer"]}
    assert insns[0x8000000].text == "push {r7}" and insns[0x8000000].size == 2
    assert insns[0x800000A].control and insns[0x800000A].target == 0x800006A  # b.n to the outer loop's test
