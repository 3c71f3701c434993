"""emx-onnx-cgen for real, in its own environment (marked ``peers``: run with ``pytest --peers``; the first run
builds the environment, about 2 minutes, docs/peers.md)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness import generators
from harness.core.plan import Settings, load_model
from harness.generators.emx_onnx_cgen import PEER

pytestmark = pytest.mark.peers
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("emx")


def _model(name: str, work: Path):
    return load_model(name, Settings(work_dir=work))


def test_variants_are_the_default_and_allocation_free_modes(work):
    assert generators.get("emx-onnx-cgen").variants(_model("acas-reg50", work)) == ["default", "no-heap"]


def test_default_mode_takes_large_temporaries_from_malloc_and_no_heap_mode_none(work):
    """LeNet-5's first feature maps (13 824 bytes) are above emx's 1024-byte threshold: heap in the default
    mode; ``--large-temp-threshold 0`` keeps them on the stack. The weights are in the C in both modes."""
    emx, model = generators.get("emx-onnx-cgen"), _model("lenet5", work)
    default = emx.generate(model, "default", work / "default")
    no_heap = emx.generate(model, "no-heap", work / "no-heap")
    c_default = (default.directory / "emx_lenet5.c").read_text()
    c_no_heap = (no_heap.directory / "emx_lenet5.c").read_text()
    assert c_default.count("malloc(") == 5 and "malloc(" not in c_no_heap
    assert "float tmp0_conv1_conv[1][6][24][24];" in c_no_heap
    assert "fopen" not in c_default and not list(default.directory.glob("*.bin"))
    assert default.entry == "emx_lenet5_assay_entry" and default.input_layout == "CHW"
    assert default.manifest["peer"]["operators"] == ["AveragePool", "Conv", "Flatten", "Gemm", "Softmax", "Tanh"]
    assert "--large-temp-threshold 0" in no_heap.manifest["peer"]["command"]


def test_driver_writes_what_the_command_line_writes(work, tmp_path):
    """The driver goes through emx-onnx-cgen's own ``compile`` code path: its C is the command's, byte for byte
    (the manifest's command is the reproducer)."""
    code = generators.get("emx-onnx-cgen").generate(_model("acas-reg50", work), "no-heap", work / "cli")
    command = shlex.split(code.manifest["peer"]["command"])
    assert command[:2] == ["emx-onnx-cgen", "compile"]
    out = tmp_path / "emx_acas_reg50.c"
    command[3] = str(out)  # the output path
    subprocess.run([str(PEER.python.parent / "emx-onnx-cgen"), *command[1:]], check=True, capture_output=True)
    assert out.read_bytes() == (code.directory / "emx_acas_reg50.c").read_bytes()


def test_semantic_campaign_passes_both_modes_on_the_host(tmp_path):
    out = tmp_path / "semantic"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", "acas-reg50",
                           "--generators", "emx-onnx-cgen", "--inputs", "20", "--work", str(tmp_path / "work"),
                           "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((out / "results.json").read_text())["records"]
    assert {(r["variant"], r["verdict"]) for r in records} == {("default", "pass"), ("no-heap", "pass")}
    assert all(r["max_abs_error"] < 1e-5 for r in records)


@pytest.mark.slow
def test_conformance_sample_beside_assay_and_acetone(tmp_path):
    """The issue's command on a sample of cases where ACETONE has findings (A4 bias-free Dense, A7 softmax on
    large logits, A11 dilation): emx-onnx-cgen passes them in both modes (docs/peers.md, its column)."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "conformance", "--generators",
                           "emx-onnx-cgen,assay-v2:keras,acetone-nnet:default:6loops", "--cases",
                           "dense_nobias,act_softmax_large,conv_dilated_valid,avgpool_same_2_odd", "--inputs", "20",
                           "--out", str(out), "--work", str(tmp_path / "w"), "--quiet"], cwd=ROOT,
                          capture_output=True, text=True, timeout=3600)
    assert done.returncode == 1, done.stdout + done.stderr  # ACETONE's findings
    results = json.loads((out / "conformance.json").read_text())["results"]
    emx = {(r["case"], r["variant"]): r["verdict"] for r in results if r["generator"] == "emx-onnx-cgen"}
    assert len(emx) == 8 and set(emx.values()) == {"pass"}, emx
    acetone = {r["case"]: r["verdict"] for r in results if r["generator"] == "acetone-nnet"}
    assert acetone["dense_nobias"] == "error" and acetone["act_softmax_large"] == "fail"


def test_quantized_cnn_is_held_bit_for_bit_to_the_onnxruntime_rule_it_is_declared_to_follow(tmp_path):
    """emx-onnx-cgen's integer kernels requantize as ONNX Runtime does; the adapter declares that rule, so the C is
    judged bit for bit against the integer arbiter under it (not by a tolerance) on a QOperator CNN made by ONNX
    Runtime's own quantizer; the QDQ form of the same CNN, which it runs as float ops, falls back, visibly."""
    sys.path.insert(0, str(ROOT / "tests" / "harness"))
    import int8_models_support

    source = int8_models_support.float_cnn(tmp_path / "cnn.onnx")
    models = [int8_models_support.quantized(source, tmp_path / f"cnn-{fmt}.onnx", fmt) for fmt in ("qoperator", "qdq")]
    out = tmp_path / "semantic"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", ",".join(map(str, models)),
                           "--generators", "emx-onnx-cgen:no-heap", "--references", "onnxruntime",
                           "--inputs", "50", "--work", str(tmp_path / "work"), "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = {Path(r["model"]).stem: r for r in json.loads((out / "results.json").read_text())["records"]}
    qoperator, qdq = records["cnn-qoperator"], records["cnn-qdq"]
    assert qoperator["verdict"] == qdq["verdict"] == "pass"
    assert qoperator["quantized"]["rule"] == "onnxruntime"
    assert qoperator["derived"]["bound"] == 0.0 and qoperator["derived"]["c_distance"] == 0.0
    assert qdq["derived"]["fallback"].startswith("integer arbiter not available: node 'conv1' (Conv): a QDQ group")

    # the declaration is a claim the oracle checks: the same C said to follow TFLite's fixed-point rule fails
    code = tmp_path / "code"
    subprocess.run([sys.executable, "-m", "harness.cli", "generate", "--model", str(models[0]), "--generator",
                    "emx-onnx-cgen", "--variant", "no-heap", "--out", str(code)], cwd=ROOT, check=True,
                   capture_output=True)
    manifest = json.loads((code / "manifest.json").read_text())
    assert manifest["quantization"]["rule"] == "onnxruntime"
    manifest["quantization"]["rule"] = "fixed-point"
    (code / "manifest.json").write_text(json.dumps(manifest))
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", str(models[0]),
                           "--generators", f"dir:{code}", "--references", "onnxruntime", "--inputs", "50",
                           "--work", str(tmp_path / "work"), "--out", str(tmp_path / "claimed"), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    (record,) = json.loads((tmp_path / "claimed" / "results.json").read_text())["records"]
    assert proc.returncode == 1 and record["verdict"] == "fail", record
    assert record["derived"]["c_distance"] == pytest.approx(record["quantized"]["lsb"], rel=1e-4)  # 1 LSB
