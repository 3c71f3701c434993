"""The assay command: help, exit statuses and one-line errors (run as a real subprocess)."""

import subprocess
import sys

import pytest

from harness import generators, targets


def assay(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_help_explains_every_command():
    result = assay("--help")
    assert result.returncode == 0
    for command in ("zoo", "generate", "semantic", "report"):
        assert command in result.stdout
    semantic = assay("semantic", "--help").stdout
    for option in ("--models", "--generators", "--references", "--inputs", "--seed", "--out", "--redo", "dir:PATH"):
        assert option in semantic


def test_zoo_list_names_the_paper_benchmarks():
    result = assay("zoo", "list")
    assert result.returncode == 0
    for name in ("acas-reg50", "acas-decr256", "lenet5", "cifarnet", "alexnet", "vgg16"):
        assert name in result.stdout


@pytest.mark.tor("TOR-CLI-001")
def test_missing_model_is_one_line_exit_2_no_traceback(tmp_path):
    result = assay("semantic", "--models", str(tmp_path / "nope.onnx"), "--inputs", "3", "--quiet",
                   "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if "nope.onnx" in line]
    assert len(lines) == 1 and len(lines[0]) < 300, lines  # one cause, once, for both references
    assert "keras, onnxruntime" in lines[0]


@pytest.mark.tor("TOR-CLI-001")
def test_a_generator_refusal_is_one_line_exit_2(tmp_path):
    """An ONNX file the loader accepts but assay-v2 cannot generate (an op it does not implement)."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Sin", ["x"], ["y"], name="odd")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path / "sine.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    result = assay("generate", "--model", str(path), "--out", str(tmp_path / "c"), "--work", str(tmp_path / "w"))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert "sine.onnx" in line and "Sin" in line


@pytest.mark.tor("TOR-CLI-002")
def test_unknown_target_and_generator_list_the_known_ones(tmp_path):
    """Every registered name is listed, not just one: the line is the registry's list, in its order."""
    result = assay("semantic", "--models", "acas-reg50", "--targets", "z80", "--work", str(tmp_path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"known targets: {', '.join(targets.names())}" in result.stderr and len(targets.names()) >= 5
    result = assay("semantic", "--models", "acas-reg50", "--generators", "nope", "--work", str(tmp_path))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert all(name in result.stderr for name in generators.names()) and len(generators.names()) >= 7


def test_generate_writes_c_and_manifest(tmp_path):
    result = assay("generate", "--model", "acas-reg50", "--out", str(tmp_path / "c"), "--work", str(tmp_path / "w"))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "c" / "manifest.json").is_file()
    assert list((tmp_path / "c").glob("*.c"))


def test_the_v3_size_refusal_names_an_option_that_exists_and_it_works(tmp_path):
    """assay-v3's refusal of a model above its multiply-accumulate limit tells the user to raise ``--max-macs`` of
    ``assay generate`` and to check that C with ``--generators dir:``: both work (a Gemm of 4 x 3 = 12)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(0).uniform(-1, 1, (3, 4)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(weights, "w")])
    model = tmp_path / "gemm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    common = ("--model", str(model), "--generator", "assay-v3", "--work", str(tmp_path / "w"))
    refused = assay("generate", *common, "--out", str(tmp_path / "refused"), "--max-macs", "11")
    (line,) = refused.stderr.strip().splitlines()
    assert refused.returncode == 2 and "12 multiply-accumulate statements, above its limit of 11; generate it " \
        "anyway with `assay generate --generator assay-v3 --max-macs N --out DIR`, then check that C with " \
        "`--generators dir:DIR`" in line, refused.stderr
    done = assay("generate", *common, "--out", str(tmp_path / "c"), "--max-macs", "12")
    assert done.returncode == 0, done.stderr
    checked = assay("semantic", "--models", str(model), "--generators", f"dir:{tmp_path / 'c'}", "--inputs", "20",
                    "--sanitize", "0", "--quiet", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "w"))
    assert checked.returncode == 0, checked.stderr
    other = assay("generate", "--model", str(model), "--max-macs", "12", "--out", str(tmp_path / "v2"),
                  "--work", str(tmp_path / "w"))
    assert other.returncode == 2 and "assay-v2 takes no --max-macs; assay-v3 does" in other.stderr, other.stderr


def test_semantic_on_one_model_writes_results_and_reports(tmp_path):
    out = tmp_path / "out"
    result = assay("semantic", "--models", "acas-reg50", "--generators", "assay-v2:all", "--inputs", "50", "--quiet",
                   "--out", str(out), "--work", str(tmp_path / "work"))
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("results.json", "table1.md", "index.html", "error_per_model.png"):
        assert (out / name).is_file()
    table = (out / "table1.md").read_text()
    assert "acas-reg50" in table and "assay-v2 (keras)" in table and "assay-v2 (onnx)" in table
    assert "assay-v2 (onnx+none)" in table  # the ONNX file has Gemm + Relu: fusing changes it, so both run
    rerun = assay("report", "--results", str(out / "results.json"), "--check")
    assert rerun.returncode == 0 and "6 of 6 records pass" in rerun.stdout


def test_wcet_elf_mode_reproduces_the_recorded_otawa_runs():
    """``assay wcet --elf`` on real OTAWA samples (tests/wcet/otawa-recordings): trivial timing, OTAWA's own flow
    facts."""
    from pathlib import Path

    import pytest

    otawa = Path(__file__).resolve().parents[1] / "wcet" / "otawa-recordings"
    if not otawa.is_dir():
        pytest.skip("tests/wcet/otawa-recordings not found")
    ok = assay("wcet", "--elf", str(otawa / "arm7tdmi/dense.elf"), "--function", "main",
               "--flow-facts", str(otawa / "arm7tdmi/dense-context.ffx"), "--timing", "trivial")
    assert ok.returncode == 0 and ok.stdout.splitlines()[0] == "WCET[main] = 22715 cycles", ok.stderr
    unbounded = assay("wcet", "--elf", str(otawa / "cortex-m4/fdense_m4.elf"), "--function", "layer")
    assert unbounded.returncode == 1
    assert 'loop "layer" + 0x6a' in unbounded.stderr and 'loop "layer" + 0x52' in unbounded.stderr
    missing = assay("wcet", "--elf", str(otawa / "cortex-m4/fdense_m4.elf"), "--function", "nosuch")
    assert missing.returncode == 2 and "no function 'nosuch'" in missing.stderr and "Traceback" not in missing.stderr


# What running one ELF analysis may import: no other stage, no ML framework, no ILP solver for OTAWA's samples;
# of the models package only the tier names the shared --tier option offers (a module with no import).
HEAVY = ("numpy", "highspy", "tensorflow", "keras", "onnxruntime", "onnx", "codegen", "harness.models.",
         "harness.core", "harness.generators", "harness.references")
LIGHT = ("harness.models.tiers",)


def test_wcet_elf_mode_imports_only_what_it_needs():
    from pathlib import Path

    otawa = Path(__file__).resolve().parents[1] / "wcet" / "otawa-recordings"
    if not otawa.is_dir():
        pytest.skip("tests/wcet/otawa-recordings not found")
    script = ("import sys\nfrom harness import cli\n"
              f"status = cli.main(['wcet', '--elf', {str(otawa / 'arm7tdmi/dense.elf')!r}, '--function', 'main', "
              f"'--flow-facts', {str(otawa / 'arm7tdmi/dense.ff')!r}])\n"
              "print(status, sorted(m for m in sys.modules if m.startswith(('harness.stages.', *HEAVY)) "
              "and not m.startswith('harness.stages.wcet') and m not in LIGHT))\n")
    run = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\nLIGHT = {LIGHT!r}\n" + script], capture_output=True, text=True,
                         timeout=600)
    assert run.stdout.splitlines() == ["WCET[main] = 22715 cycles", "0 []"], run.stderr
