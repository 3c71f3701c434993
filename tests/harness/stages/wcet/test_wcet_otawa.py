"""``assay wcet`` with the real OTAWA: ``--engine otawa`` and ``--engine both`` on the zoo, in campaign and ELF mode.

The zoo's default models on the ARM7TDMI and the Cortex-M4F (assay-v2, keras variant; one measured input: the
soundness check is test_wcet.py's job), bounded by the built-in analyzer, by OTAWA from the ``.ff`` and the
``.ffx`` file the stage writes, and cross-checked: each OTAWA figure equals the built-in one, or the cross-check
names the declared OTAWA error that explains the difference, found by its check in that very run (the instruction,
its address and odisasm's lines around it). An image too large for the target skips with the stage's cause.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.measurement import cycles
from harness.models import zoo
from harness.stages.wcet import run as wcetrun
from wcet import crosscheck

# the recorded OTAWA samples: in the tree, else beside it (../shared/otawa)
OTAWA = next((path for path in (Path(__file__).resolve().parents[3] / "wcet" / "otawa-recordings",
                                Path(__file__).resolve().parents[5] / "shared" / "otawa") if path.is_dir()),
             Path("/nonexistent"))
needs_recordings = pytest.mark.skipif(not OTAWA.is_dir(), reason="the recorded OTAWA samples are not found")

needs_tools = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-arm"),
                                 reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")
DECLARED = {error.name for error in crosscheck.OTAWA_ERRORS}


@pytest.mark.wcet
@pytest.mark.arm
@pytest.mark.otawa
@needs_tools
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
# cifarnet's OTAWA run alone took 93 s of the default test run (its cross-check, --run-slow, is the same code path as
# the other eight models')
@pytest.mark.parametrize("model", [pytest.param(name, marks=pytest.mark.slow) if name == "cifarnet" else name
                                   for name in zoo.names("default")])
def test_otawa_equals_the_builtin_bound_or_a_declared_otawa_error_explains_it(real_otawa, model, target, tmp_path):
    settings = wcetrun.Settings(n_inputs=1, work_dir=tmp_path / "work", engines=("builtin", "otawa", "both"),
                                otawa_timeout=30.0)
    plan = cycles.plan([model], ["assay-v2"], [target], ["trivial"], settings)
    (item,) = [i for i in plan.items if i.variant == "keras"]
    records = {r["engine"]: r for r in wcetrun.run_item(item, settings, wcetrun.open_store(tmp_path / "wcet.json"))}
    builtin, theirs, both = records["builtin"], records["otawa"], records["both"]
    if builtin["verdict"] == "error" and "image too large" in builtin["cause"]:
        pytest.skip(builtin["cause"])
    assert builtin["verdict"] == "pass", builtin["cause"]
    assert both["verdict"] == "pass", both["cause"]
    assert both["wcet_cycles"] == builtin["wcet_cycles"]
    files = both["crosscheck"]["files"]
    assert set(files) == {"f4", "ffx"}
    for name, check in files.items():
        assert check["assay_cycles"] == builtin["wcet_cycles"], name  # the files read back to the same bound
        assert check["status"] in ("agree", "explained"), check["line"]
        if check["status"] == "agree":
            assert check["otawa_cycles"] == builtin["wcet_cycles"]
            continue
        explanation = check["explanation"]
        assert explanation["name"] in DECLARED, check["line"]
        if explanation["kind"] == "decoder":  # produced by the check: the instruction, its address, odisasm's lines
            divergence = check["divergence"]
            assert divergence["address"] and divergence["assay"]["text"] and divergence["excerpt"]
            assert any(line.startswith(divergence["address"][2:].rjust(8, "0")) for line in divergence["excerpt"])
    agreed = all(check["status"] == "agree" for check in files.values())
    if agreed:
        assert theirs["verdict"] == "pass", theirs["cause"]
        assert theirs["wcet_cycles"] == builtin["wcet_cycles"]
        assert theirs["otawa"] == {"f4": builtin["wcet_cycles"], "ffx": builtin["wcet_cycles"]}
    elif theirs["verdict"] == "pass":  # OTAWA's own figure is the one the cross-check explained
        assert theirs["wcet_cycles"] == files["f4"]["otawa_cycles"] == files["ffx"]["otawa_cycles"]
    else:
        assert theirs["verdict"] == "error" and "OTAWA" in theirs["cause"]


@pytest.mark.arm
@pytest.mark.otawa
@needs_tools
def test_assay_wcet_engine_both_writes_the_cross_check_and_the_reproducers(real_otawa, tmp_path, capsys):
    """The command itself: --engine otawa,both on acas-reg50 (both variants, both targets) agrees everywhere;
    otawa.md lists every item and file."""
    out = tmp_path / "out"
    status = main(["wcet", "--models", "acas-reg50", "--targets", "arm7tdmi,cortex-m4f", "--engine", "otawa,both",
                   "--timing", "trivial", "--inputs", "1", "--out", str(out), "--work", str(tmp_path / "work"),
                   "--quiet"])
    assert status == 0, capsys.readouterr()
    records = json.loads((out / "wcet.json").read_text())["records"]
    assert len(records) == 8 and all(r["verdict"] == "pass" for r in records)
    table = (out / "otawa.md").read_text()
    assert table.count("| agree |") == 8 and "unexplained" not in table.split("*unexplained*")[1]
    assert not (out / "otawa-reproducers").exists()  # no decoder error, no reproducer


@pytest.mark.otawa
@needs_recordings
def test_elf_mode_engine_both_and_otawa(otawa_on_path, capsys):
    elf, facts = OTAWA / "cortex-m4/fdense_m4.elf", OTAWA / "cortex-m4/fdense_m4.ff"
    assert main(["wcet", "--elf", str(elf), "--function", "layer", "--flow-facts", str(facts), "--engine", "both",
                 "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("WCET[layer] = 15755 cycles\nlayer: Assay 15755, OTAWA 15755: agree\n")
    report = json.loads(out[out.index("{"):])
    assert report["status"] == "agree" and report["otawa_command"][0].endswith("/owcet")
    assert main(["wcet", "--elf", str(elf), "--function", "layer", "--flow-facts", str(facts), "--engine",
                 "otawa"]) == 0
    assert capsys.readouterr().out == "WCET[layer] = 15755 cycles\n"
    assert main(["wcet", "--elf", str(elf), "--function", "layer", "--engine", "both"]) == 2
    assert "need --flow-facts" in capsys.readouterr().err


@needs_recordings
@pytest.mark.parametrize("command", [[sys.executable, "-m", "wcet", "--batch"],
                                     [sys.executable, "-m", "harness.cli", "wcet", "--batch"]])
def test_batch_mode_bounds_every_triple_in_one_process(command, tmp_path):
    dense, fdense = OTAWA / "arm7tdmi/dense.elf", OTAWA / "cortex-m4/fdense_m4.elf"
    batch = tmp_path / "batch.txt"
    batch.write_text(f"# ELF FUNCTION [FLOW_FACTS]\n{dense} main {OTAWA / 'arm7tdmi/dense.ff'}\n\n"
                     f"'{fdense}' layer {OTAWA / 'cortex-m4/fdense_m4.ff'}\n"
                     f"{dense} main {OTAWA / 'arm7tdmi/dense-context.ffx'}\n")
    result = subprocess.run([*command, str(batch)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{dense}: WCET[main] = 22715 cycles",
                                          f"{fdense}: WCET[layer] = 15755 cycles",
                                          f"{dense}: WCET[main] = 22715 cycles"]
    # standard input, JSON lines, a triple left unbounded (exit 1) and a bad line (exit 2) in one run
    lines = f"{fdense} layer\n{dense} main {OTAWA / 'arm7tdmi/dense.ff'}\n{dense}\n"
    result = subprocess.run([*command, "-", "--json"], input=lines, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    unbounded, bounded, bad = [json.loads(line) for line in result.stdout.splitlines()]
    assert unbounded["function"] == "layer" and "loop(s) without a bound" in unbounded["error"]
    assert bounded["schema"] == "assay-wcet-elf/1" and bounded["wcet_cycles"] == 22715
    assert bad == {"error": "<stdin>:3: expected 'ELF FUNCTION [FLOW_FACTS]', found 1 field(s)"}
