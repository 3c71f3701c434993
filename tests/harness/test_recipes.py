"""The recipes of docs/architecture.md ("How to add …"), followed literally: each section of docs/recipes.md is
installed exactly as written, as a fake installed distribution (a ``*.dist-info`` folder with its entry points and
the section's files) on the PYTHONPATH of ``assay``, and run end to end through the CLI, Assay itself unchanged.
The generator's recipe is tested in tests/harness/test_registry.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

from wcet import timing

from plugin_support import install_distribution

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "docs" / "recipes.md"
QEMU = pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc") or not shutil.which("qemu-system-arm"),
                          reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")


def section(title: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The files of docs/recipes.md's section ``title`` (each code block under the file name last backticked
    before it) and the entry points of its ``pyproject.toml`` blocks."""
    text = RECIPES.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    entry_points: dict[str, dict[str, str]] = {}
    position = 0
    for block in re.finditer(r"```(?:python|toml)\n(.*?)```", text, re.S):
        named = re.findall(r"`([\w./-]+\.(?:py|toml))`", text[position:block.start()])
        assert named, f"{title}: a code block names no file before it"
        position = block.end()
        if named[-1] == "pyproject.toml":
            for group, entries in tomllib.loads(block.group(1))["project"]["entry-points"].items():
                entry_points.setdefault(group, {}).update(entries)
        else:
            files[named[-1]] = block.group(1)
    return files, entry_points


def install(site: Path, distribution: str, title: str) -> Path:
    """Section ``title`` as the installed distribution ``distribution`` in ``site``: its files, its metadata and
    its entry points."""
    files, entry_points = section(title)
    return install_distribution(site, distribution, entry_points, files)


def assay(*args: str, site: Path, module: str = "harness.cli") -> subprocess.CompletedProcess:
    """``python -m harness.cli ARGS`` (or another module) in a process that finds the distributions in ``site``,
    run in ``site`` (no metadata of a build in the current folder can hide theirs)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env, cwd=site,
                          timeout=900)


def records(path: Path, schema: str) -> list[dict]:
    document = json.loads(path.read_text())
    assert document["schema"] == schema
    return document["records"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One --work folder for the module: the zoo model is made once."""
    return tmp_path_factory.mktemp("work")


# --- a target (and the library annotations its flags need for assay wcet) -----------------------------------------


@pytest.mark.arm
@QEMU
def test_the_target_recipe_runs_and_bounds_on_a_profile_of_a_package(tmp_path, work):
    site = install(tmp_path / "site", "assay-myboard", "A target, in full")
    common = ("--models", "acas-reg50", "--targets", "cortex-m4f-1m", "--quiet", "--work", str(work))
    result = assay("semantic", *common, "--references", "onnxruntime", "--inputs", "5", "--out",
                   str(tmp_path / "semantic"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    found = records(tmp_path / "semantic" / "results.json", "assay-results/2")
    assert sorted((r["target"], r["variant"], r["verdict"]) for r in found) == [
        ("cortex-m4f-1m", "keras", "pass"), ("cortex-m4f-1m", "onnx", "pass")]
    result = assay("wcet", *common, "--inputs", "3", "--out", str(tmp_path / "wcet"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    found = records(tmp_path / "wcet" / "wcet.json", "assay-wcet/1")
    assert sorted((r["timing"], r["verdict"]) for r in found) == [("cortex-m4", "pass")] * 2 + [("trivial", "pass")] * 2


# The bounds of libgcc's Thumb-2 soft-float multiplication (the multilib of -mcpu=cortex-m4 -mfloat-abi=soft): the
# same source lines as the ARM-mode build toolchains/annotations/ bounds (and tests/wcet/test_annotations.py
# measures), ieee754-sf.S, whose loops normalise a subnormal operand's 23-bit mantissa: at most 22 back edges.
SOFT_FLOAT = """\
compiler = "arm-none-eabi-gcc"
version = "12.2.1"
multilibs = ["thumb/v7e-m/nofp"]

[[function]]
multilib = "thumb/v7e-m/nofp"
symbol = "__mulsf3"
aliases = ["__aeabi_fmul"]
source = "libgcc/config/arm/ieee754-sf.S (Thumb-2, ARMv7E-M)"
size = {size}
sha256 = "{sha256}"
{loops}"""
LOOP = """
[[function.loop]]
offset = {offset:#x}
bound = 22
justification = "normalises a subnormal operand's 23-bit non-zero mantissa: at most 22 back edges"
"""


@pytest.mark.slow
@pytest.mark.arm
@QEMU
def test_a_profile_whose_flags_link_another_library_build_needs_its_annotations_beside_it(tmp_path, work):
    """As the target recipe says: no FPU (-mfloat-abi=soft) links libgcc's Thumb-2 soft float, whose multiplication
    loops; assay wcet names those loops and the file until annotations/ beside the profile bound them."""
    from wcet.armcode import load_code, sha256
    from wcet.program import load_program

    site = install(tmp_path / "site", "assay-myboard", "A target, in full")
    folder = site / "assay_myboard"
    (folder / "cortex-m4-soft.toml").write_text(
        'extends = "cortex-m4f-1m"\nname = "cortex-m4-soft"\ndescription = "Cortex-M4 part without FPU"\n'
        'cflags = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=soft", "-std=c99", "-ffp-contract=off", "-g"]\n')
    args = ("wcet", "--models", "acas-reg50", "--targets", "cortex-m4-soft", "--timing", "cortex-m4", "--inputs", "3",
            "--quiet", "--work", str(work), "--out", str(tmp_path / "wcet"))

    result = assay(*args, site=site)
    assert result.returncode == 1, result.stdout + result.stderr
    causes = [r["cause"] for r in records(tmp_path / "wcet" / "wcet.json", "assay-wcet/1")]
    assert len(causes) == 2 and all(c.startswith("flow facts for acas_reg50_inference in assay.elf") for c in causes)
    problems = {line.strip() for cause in causes for line in cause.splitlines()[1:]}
    assert all(re.match(r"library loop __aeabi_fmul \+ 0x[0-9a-f]+ .* has no bound: __aeabi_fmul in assay.elf "
                        r"\(\d+ bytes, sha256 [0-9a-f]{16}\.\.\.\) is not the build annotated in "
                        r"arm-none-eabi-gcc-12.2.1.toml .*: a different library build; derive and measure its "
                        r"bounds again, and add its entry \(docs/flowfacts.md\)$", line) for line in problems), problems

    elf = next(work.rglob("build-cortex-m4-soft-O0/assay.elf"))
    code, program = load_code(elf), load_program(elf)
    routine = code.functions["__aeabi_fmul"]
    offsets = sorted({loop.header - routine.start for loop in program.loops("__aeabi_fmul")})
    assert len(offsets) == 2
    (folder / "annotations").mkdir()
    (folder / "annotations" / "arm-none-eabi-gcc-12.2.1.toml").write_text(SOFT_FLOAT.format(
        size=routine.end - routine.start, sha256=sha256(code.bytes(routine.start, routine.end)).hexdigest(),
        loops="".join(LOOP.format(offset=offset) for offset in offsets)))

    result = assay(*args, site=site)  # the annotations are in the records' content key: recomputed, not reused
    assert result.returncode == 0, result.stdout + result.stderr
    found = records(tmp_path / "wcet" / "wcet.json", "assay-wcet/1")
    assert [r["verdict"] for r in found] == ["pass", "pass"]
    assert all(r["wcet_cycles"] >= r["max_measured_cycles"] > 0 for r in found)


# --- a runner kind, a reference, a timing model, a model format ------------------------------------------------


def test_the_runner_kind_recipe_runs_the_target_that_names_it(tmp_path, work):
    site = install(tmp_path / "site", "assay-perturbed", "A runner kind, in full")
    result = assay("semantic", "--models", "acas-reg50", "--targets", "host-perturbed", "--references", "onnxruntime",
                   "--inputs", "5", "--quiet", "--work", str(work), "--out", str(tmp_path / "out"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    found = records(tmp_path / "out" / "results.json", "assay-results/2")
    assert sorted((r["target"], r["variant"], r["verdict"]) for r in found) == [
        ("host-perturbed", "keras", "pass"), ("host-perturbed", "onnx", "pass")]
    assert next(work.rglob("build-host-perturbed-O0/libassay.so")).is_file()  # built by the kind's build


def test_the_reference_recipe_is_compared_with(tmp_path, work):
    site = install(tmp_path / "site", "assay-onnxref", "A reference, in full")
    result = assay("semantic", "--models", "acas-reg50", "--targets", "host", "--references",
                   "onnx-reference,onnxruntime", "--inputs", "5", "--quiet", "--work", str(work), "--out",
                   str(tmp_path / "out"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    found = records(tmp_path / "out" / "results.json", "assay-results/2")
    assert sorted((r["variant"], r["reference"], r["verdict"]) for r in found) == [
        ("keras", "onnx-reference", "pass"), ("keras", "onnxruntime", "pass"),
        ("onnx", "onnx-reference", "pass"), ("onnx", "onnxruntime", "pass")]


@pytest.mark.slow
@pytest.mark.arm
@QEMU
def test_the_timing_model_recipe_prices_measured_and_static_cycles(tmp_path, work):
    """unit (1 cycle per instruction) against trivial (``Trivial.cycles_per_instruction``, 5): measured cycles,
    the WCET stage's bound and ``python -m wcet``'s bound differ by exactly that factor."""
    factor = timing.Trivial.cycles_per_instruction
    site = install(tmp_path / "site", "assay-unit", "A timing model, in full")
    common = ("--models", "acas-reg50", "--targets", "cortex-m4f", "--timing", "trivial,unit", "--inputs", "3",
              "--quiet", "--work", str(work))
    result = assay("met", *common, "--out", str(tmp_path / "met"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    measured = {(r["variant"], r["timing"]): r for r in records(tmp_path / "met" / "met.json", "assay-met/2")}
    assert sorted(measured) == [("keras", "trivial"), ("keras", "unit"), ("onnx", "trivial"), ("onnx", "unit")]
    for variant in ("keras", "onnx"):
        unit, trivial = measured[variant, "unit"]["per_input"], measured[variant, "trivial"]["per_input"]
        assert unit["cycles"] == unit["instructions"] and trivial["cycles"] == [factor * c for c in unit["cycles"]]

    result = assay("wcet", *common, "--out", str(tmp_path / "wcet"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    bounds = {(r["variant"], r["timing"]): r for r in records(tmp_path / "wcet" / "wcet.json", "assay-wcet/1")}
    assert {r["verdict"] for r in bounds.values()} == {"pass"}
    unit = bounds["keras", "unit"]
    assert bounds["keras", "trivial"]["wcet_cycles"] == factor * unit["wcet_cycles"]

    facts = Path(unit["flow_facts"]["f4"])
    result = assay(str(facts.with_suffix(".elf")), "acas_reg50_inference", "--flow-facts", str(facts), "--timing",
                   "unit", site=site, module="wcet")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"WCET[acas_reg50_inference] = {unit['wcet_cycles']} cycles"


def test_the_model_format_recipe_reads_its_suffix(tmp_path, work):
    site = install(tmp_path / "site", "assay-npz", "A model format, in full")
    rng = np.random.default_rng(0)
    path = tmp_path / "tiny.npz"
    np.savez(path, W0=rng.normal(size=(5, 8)), b0=rng.normal(size=8), W1=rng.normal(size=(8, 3)), b1=rng.normal(size=3))
    result = assay("semantic", "--models", str(path), "--targets", "host", "--references", "onnxruntime", "--inputs",
                   "5", "--quiet", "--work", str(work), "--out", str(tmp_path / "out"), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = records(tmp_path / "out" / "results.json", "assay-results/2")
    assert (record["model"], record["variant"], record["verdict"]) == (str(path), "onnx", "pass")
    assert len(list((work / "zoo" / "user").glob("tiny-*/model.onnx"))) == 1  # converted into the model cache

    np.savez(tmp_path / "bad.npz", W0=np.ones((2, 2)))
    result = assay("semantic", "--models", str(tmp_path / "bad.npz"), "--targets", "host", "--inputs", "5", "--quiet",
                   "--work", str(work), "--out", str(tmp_path / "bad"), site=site)
    assert result.returncode == 2 and "bad.npz: expected the arrays W0, b0, W1, b1, ..." in result.stderr


# --- a stage ---------------------------------------------------------------------------------------------------


def test_the_stage_recipe_runs_per_model_and_keeps_exit_2_for_an_unknown_model(tmp_path, work):
    site = install(tmp_path / "site", "assay-params", "A stage, in full")
    assert "params" in assay("--help", site=site).stdout
    out = tmp_path / "out"

    result = assay("params", "--models", "acas-reg50", "--work", str(work), "--out", str(out), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    (record,) = records(out / "params.json", "assay-params/1")
    assert record["model"] == "acas-reg50" and record["verdict"] == "pass" and 0 < record["params"] <= 100_000
    assert f"| acas-reg50 | {record['params']} | 100000 | pass |" in (out / "params.md").read_text()

    result = assay("params", "--models", "acas-reg50", "--max-params", "10", "--quiet", "--work", str(work), "--out",
                   str(out), site=site)
    assert result.returncode == 1 and "acas-reg50: fail" in result.stderr
    (record,) = records(out / "params.json", "assay-params/1")
    assert (record["max_params"], record["verdict"]) == (10, "fail")

    result = assay("params", "--models", "no-such-model", "--work", str(work), "--out", str(tmp_path / "none"),
                   site=site)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("assay: error: ") and "no-such-model" in line and "Traceback" not in line, result.stderr
