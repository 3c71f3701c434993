"""Eclipse Aidge for real, in its own environment (marked ``peers``: run with ``pytest --peers``; the first run
builds the environment, about a minute, docs/peers.md); and the adapter's reading of Aidge's tensor layouts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import generators
from harness.core.plan import Settings, load_model
from harness.errors import NotSupported
from harness.generators.aidge import entry_layouts
from harness.models.model import Model

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("aidge")


def _model(name: str, work: Path):
    return load_model(name, Settings(work_dir=work))


@pytest.mark.peers
def test_export_is_cpp_with_a_static_activation_buffer_and_the_weights_in_the_sources(work):
    """ACAS Xu's 50-wide layers: Aidge's memory manager lays every activation out in one static array (two
    50-float buffers, 400 bytes); the weights are ``const float`` arrays in ``.cpp`` files of their own."""
    code = generators.get("aidge").generate(_model("acas-reg50", work), "default", work / "acas")
    peer = code.manifest["peer"]
    assert peer["signature"] == "void model_forward (const float* _0_FCAct_0_input_0, float** _7_FC_0_output_0);"
    assert peer["static_buffers"] == [{"name": "mem_0", "bytes": 400}]
    assert [source.name for source in code.sources][:2] == ["forward.cpp", "_0_FCAct_0_biases.cpp"]
    assert "kernels/cpp/fullyconnected.hpp" in code.manifest["headers"]
    assert "const float _0_FCAct_0_weights_output_0[50*5]" in (
        code.directory / "src" / "parameters" / "_0_FCAct_0_weights.cpp").read_text()
    assert code.manifest["generator"]["version"] == "0.10.1" and code.entry == "aidge_assay_entry"


@pytest.mark.peers
def test_flatten_is_refused_by_name(work):
    with pytest.raises(NotSupported, match=r"aidge: NoImplError: No implementation found for node .*\[Flatten\]"):
        generators.get("aidge").generate(_model("lenet5", work), "default", work / "lenet5")


@pytest.mark.peers
def test_semantic_campaign_passes_acas_on_the_host_and_names_lenets_refusal(tmp_path):
    out = tmp_path / "semantic"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "semantic", "--models", "acas-reg50,lenet5",
                           "--generators", "aidge", "--inputs", "20", "--work", str(tmp_path / "work"),
                           "--out", str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((out / "results.json").read_text())["records"]
    verdicts = {(r["model"], r["reference"]): r["verdict"] for r in records}
    assert verdicts == {("acas-reg50", "keras"): "pass", ("acas-reg50", "onnxruntime"): "pass",
                        ("lenet5", "keras"): "not supported", ("lenet5", "onnxruntime"): "not supported"}
    assert all(r["max_abs_error"] < 1e-5 for r in records if r["verdict"] == "pass")


@pytest.mark.slow
@pytest.mark.peers
@pytest.mark.arm
def test_wcet_is_finite_on_both_arm_targets_its_26_loops_bounded_from_the_machine_code(tmp_path):
    """The kernels' loop bounds are template arguments (no C to parse) and 8 inlined copies share each line: the
    -O0 counters bound all 26 (docs/peers.md, "WCET: Aidge's loops bounded from the machine code")."""
    out = tmp_path / "wcet"
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "wcet", "--models", "acas-reg50", "--generators",
                           "aidge", "--targets", "cortex-m4f,arm7tdmi", "--timing", "trivial", "--inputs", "2",
                           "--work", str(tmp_path / "work"), "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads((out / "wcet.json").read_text())["records"]
    assert len(records) == 2
    for record in records:
        assert record["verdict"] == "pass" and record["wcet_cycles"] >= record["max_measured_cycles"], record
        bounds = sorted(b["bound"] for b in record["binary_bounds"])
        assert bounds == [1] * 16 + [5] * 2 + [50] * 8, (record["target"], bounds)  # 8 x (1, 50|5, 1), 50, 5


@pytest.mark.peers
@pytest.mark.slow
def test_clip_with_its_bounds_as_inputs_is_the_identity(tmp_path):
    """Aidge finding: ONNX Clip (opset >= 11) takes min and max as inputs; aidge-export-cpp 0.10.1 writes them as
    parameter arrays but clips with the node's attributes, -FLT_MAX and FLT_MAX, so ReLU6 leaves the Dense output
    unclipped (docs/peers.md, Aidge)."""
    out = tmp_path / "out"
    subprocess.run([sys.executable, "-m", "harness.cli", "conformance", "--generators", "aidge", "--cases",
                    "act_relu6,dense", "--work", str(tmp_path / "work"), "--out", str(out), "--quiet"],
                   cwd=ROOT, capture_output=True, text=True, check=False)
    verdicts = {(r["case"], r["generator"], r["variant"]): r["verdict"]
                for r in json.loads((out / "conformance.json").read_text())["results"]}
    assert verdicts == {("dense", "aidge", "default"): "pass", ("act_relu6", "aidge", "default"): "fail"}


def _conv_model(output_shape: tuple[int, ...]) -> Model:
    """A Keras-made model's facts: canonical channels-last, its ONNX file channels-first."""
    return Model(name="m", files={}, input_shape=(8, 8, 3), output_shape=output_shape, layout="HWC",
                 output_layout="HWC", file_layouts={"onnx": ("CHW", "CHW")})


def _export(input_dims: list[int], output_dims: list[int]) -> dict:
    return {"inputs": [{"name": "x", "dims": input_dims}], "outputs": [{"name": "y", "dims": output_dims}]}


def test_layouts_follow_the_dims_of_aidges_export():
    """act_softmax_channels: the input stays as ONNX has it, the output comes channels-last."""
    assert entry_layouts(_conv_model((6, 6, 4)), _export([1, 3, 8, 8], [1, 6, 6, 4])) == ("CHW", "HWC")
    assert entry_layouts(_conv_model((6, 6, 4)), _export([1, 3, 8, 8], [1, 4, 6, 6])) == ("CHW", "CHW")


def test_layouts_that_the_dims_cannot_tell_are_refused():
    with pytest.raises(NotSupported, match=r"tensor y has dims \[1, 4, 4, 4\].*cannot tell its layout"):
        entry_layouts(_conv_model((4, 4, 4)), _export([1, 3, 8, 8], [1, 4, 4, 4]))
    with pytest.raises(NotSupported, match="tensor y has dims .* neither the model's layout nor its channels-last"):
        entry_layouts(_conv_model((6, 6, 4)), _export([1, 3, 8, 8], [1, 144]))


def test_a_tensor_without_a_batch_axis_is_compared_whole():
    """The ONNX node tests' tensors (``[3, 4, 5]``, no batch axis) as Aidge's manifest gives them."""
    model = Model(name="m", files={}, input_shape=(3, 4, 5), output_shape=(3, 4, 5), layout="CHW",
                  output_layout="CHW")
    assert entry_layouts(model, _export([3, 4, 5], [3, 4, 5])) == ("CHW", "CHW")
