"""The three peers for real, each in its own environment (marked ``peers``: run with ``pytest --peers``;
the first run builds the environments, see docs/peers.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import generators
from harness.core.plan import Settings, load_model
from harness.errors import AssayError, NotSupported
from harness.generators.peers import session
from harness.stages.conformance import cases as conformance_cases

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("peers")


def _model(name: str, work: Path):
    return load_model(name, Settings(work_dir=work))


def _case(name: str, work: Path):
    """A conformance case (layers named ``0_dense``, ``b0_1_conv2d``, ...) as a model."""
    (case,) = conformance_cases.select([name])
    return _model(str(conformance_cases.build(case, work)), work)


def test_acetone_variants_are_its_convolution_implementations(work):
    acetone = generators.get("acetone-nnet")
    assert acetone.variants(_model("acas-reg50", work)) == ["default"]
    assert acetone.variants(_model("lenet5", work))[:2] == ["6loops", "std_gemm_nn"]


def test_acetone_code_has_assay_entry_and_recovered_layers(work):
    code = generators.get("acetone-nnet").generate(_model("lenet5", work), "6loops", work / "ac")
    assert code.entry == "acetone_assay_entry" and code.input_layout == "HWC"
    assert {p.name for p in code.sources} == {"inference.c", "global_vars.c", "assay_entry.c"}
    mapping = code.manifest["layer_mapping"]
    assert mapping["status"] == "recovered"
    assert [layer["op"] for layer in mapping["layers"]][:3] == ["Input_layer", "Conv2D", "AveragePooling2D"]
    assert code.manifest["peer"]["environment"]["pins"]["tensorflow"] == "2.12.1"


def test_emlearn_refusal_is_not_supported_with_its_message(work):
    with pytest.raises(NotSupported, match="Layer type 'Conv2D' is not implemented"):
        generators.get("emlearn").generate(_model("lenet5", work), "loadable", work / "em")


def test_keras2c_code_cannot_be_compiled_from_pypi(work):
    with pytest.raises(AssayError, match=r"ships no C backend.*declares 204640 bytes of float arrays as locals"):
        generators.get("keras2c").generate(_model("lenet5", work), "stack", work / "k2c")


def test_a_peer_writes_nothing_in_the_working_directory_and_takes_relative_paths(work, tmp_path, monkeypatch):
    """emlearn compiles a test program under ./tmp: the driver runs in its scratch folder, not in the user's;
    the paths Assay gives (``--work generated``: relative) still name the user's files."""
    model = _model("acas-reg50", work)
    monkeypatch.chdir(tmp_path)
    code = generators.get("emlearn").generate(model, "loadable", Path("out") / "em-dense")
    assert code.sources and list(tmp_path.iterdir()) == [tmp_path / "out"]
    acetone = generators.get("acetone-nnet").generate(model, "default", Path("out") / "ac-dense")
    assert (tmp_path / "out" / "ac-dense" / "inference.c").is_file() and acetone.sources


def test_acetone_session_survives_a_peer_crash_and_gives_the_same_code_as_a_fresh_one(work):
    """One interpreter serves several generations; a case ACETONE crashes on (A4) does not change the next."""
    acetone = generators.get("acetone-nnet")
    session.close_all()
    with pytest.raises(AssayError, match=r"acetone-nnet: IndexError: .*\(at parser_h5.py:\d+\)"):
        acetone.generate(_case("dense_nobias", work), "default", work / "ac-crash")
    reused = acetone.generate(_case("dense_deep", work), "default", work / "ac-reused")
    session.close_all()
    fresh = acetone.generate(_case("dense_deep", work), "default", work / "ac-fresh")
    assert [p.read_bytes() for p in reused.sources] == [p.read_bytes() for p in fresh.sources]


def test_acetone_gets_a_functional_graph(work):
    """A residual Add (a Conv2D and the input) reaches ACETONE as a Keras 2 functional model."""
    code = generators.get("acetone-nnet").generate(_case("add_residual_conv", work), "6loops", work / "ac-add")
    assert [layer["op"] for layer in code.manifest["layer_mapping"]["layers"]] == \
        ["Input_layer", "Conv2D", "Add", "Flatten", "Dense"]


def test_acetone_refuses_leaky_relu_in_its_own_words(work):
    with pytest.raises(NotSupported, match="acetone-nnet: TypeError: Error: layer LeakyReLU not supported$"):
        generators.get("acetone-nnet").generate(_case("act_leaky_relu", work), "default", work / "ac-leaky")


def test_keras2c_accepts_conformance_layer_names_and_keras3_leaky_relu(work):
    """Names such as ``0_dense`` are handed over as C identifiers; LeakyReLU's slope reaches keras2c's C."""
    with pytest.raises(AssayError, match="ships no C backend"):
        generators.get("keras2c").generate(_case("act_leaky_relu", work), "stack", work / "k2c-leaky")
    source = (work / "k2c-leaky" / "k2c_act_leaky_relu.c").read_text()
    assert "float layer_1_leakyrelu_negative_slope = 0.10000000149011612;" in source  # the slope, in float32


def test_keras2c_refusal_keeps_its_whole_message(work):
    with pytest.raises(NotSupported, match="keras2c: AssertionError: The following errors were found: Activation "
                                           "type 'relu6' for layer 'layer_0_dense' is not supported at this time."):
        generators.get("keras2c").generate(_case("act_relu6", work), "stack", work / "k2c-relu6")


def test_emlearn_unsupported_activation_and_functional_graph_are_refusals(work):
    emlearn = generators.get("emlearn")
    with pytest.raises(NotSupported, match="emlearn: ValueError: Unsupported activation 'selu'"):
        emlearn.generate(_case("act_selu", work), "loadable", work / "em-selu")
    with pytest.raises(NotSupported, match="emlearn: ValueError: Unknown model type: 'Functional'"):
        emlearn.generate(_case("add_dense", work), "loadable", work / "em-add")
