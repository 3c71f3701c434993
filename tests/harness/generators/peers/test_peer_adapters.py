"""The three peers for real, each in its own environment (marked ``peers``: run with ``pytest --peers``;
the first run builds the environments, see docs/peers.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import generators
from harness.core.plan import Settings, load_model
from harness.errors import AssayError, NotSupported

pytestmark = pytest.mark.peers


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("peers")


def _model(name: str, work: Path):
    return load_model(name, Settings(work_dir=work))


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


def test_a_peer_writes_nothing_in_the_working_directory(work, tmp_path, monkeypatch):
    """emlearn compiles a test program under ./tmp: the driver runs in its scratch folder, not in the user's."""
    monkeypatch.chdir(tmp_path)
    code = generators.get("emlearn").generate(_model("acas-reg50", work), "loadable", work / "em-dense")
    assert code.sources and list(tmp_path.iterdir()) == []
