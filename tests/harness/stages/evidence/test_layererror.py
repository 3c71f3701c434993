"""Per-layer error: the generated C's intermediate outputs (instrumented host build, in the runner's worker)
against Keras' layer outputs and ONNX Runtime's intermediate tensors, and against the float64 value of the layer
within its derived bound; a weight perturbed in one layer beyond that layer's bound shows up as the first layer over
its tolerance, the layers before it stay within theirs."""

import os
import re
import shutil

import pytest

from harness.core.inputs import make_inputs
from harness.core.plan import Settings, load_model
from harness.generators import get as get_generator
from harness.generators.generated import GeneratedCode
from harness.stages.evidence import layererror

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
N_INPUTS = 40


@pytest.fixture(scope="module")
def acas(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    model = load_model("acas-reg50", Settings(work_dir=work))
    codes = {variant: get_generator("assay-v2").generate(model, variant, work / variant) for variant in ("keras", "onnx")}
    return model, codes, make_inputs(model, N_INPUTS, 0)


def _measure(model, code, inputs, work):
    return layererror.measure(code, model, inputs, work, model.tolerance, model.rtol, 120)


@pytest.mark.tor("TOR-EVD-008")
@pytest.mark.parametrize("variant", ["keras", "onnx"])
def test_every_layer_of_correct_code_is_within_tolerance(acas, variant, tmp_path):
    model, codes, inputs = acas
    result = _measure(model, codes[variant], inputs, tmp_path)
    assert result["available"] and result["reference"] == {"keras": "keras", "onnx": "onnxruntime"}[variant]
    compared = [row for row in result["layers"] if row["compared"]]
    assert len(compared) == len(model_layers := [l for l in codes[variant].manifest["layers"] if "output" in l])
    assert [row["layer"] for row in compared] == [l["name"] for l in model_layers]
    assert all(row["within_tolerance"] and 0 <= row["max_abs_error"] < model.tolerance for row in compared)
    assert any(row["max_abs_error"] > 0 for row in compared)  # float32 rounding is seen: the values are compared
    assert result["first_over_tolerance"] is None
    # each layer judged by its own derived bound, which holds the correct code's distance to float64
    assert result["tolerance"] == layererror.DERIVED
    assert all(row["judged_by"] == "derived bound" for row in compared)
    assert all(0 < row["c_to_float64"] <= row["largest_bound"] and row["bound_ratio"] <= 1 for row in compared)
    # layer-local: each bound is the layer's own rounding from the C's input, below the bound of the same tensor
    # carried from the network's input (bounds.layer_tolerances), however deep
    from harness.references import bounds

    carried = bounds.layer_tolerances(model, inputs, [row["graph_tensor"] for row in compared],
                                      bounds.Order.from_manifest(codes[variant].manifest))
    assert all(row["largest_bound"] < whole.max() for row, whole in zip(compared[1:], carried[1:]))


@pytest.mark.tor("TOR-EVD-008")
@pytest.mark.parametrize("layer", ["dense3", "dense6"])
def test_a_weight_mutated_in_one_layer_is_localised_to_that_layer(acas, layer, tmp_path):
    model, codes, inputs = acas
    code = codes["keras"]
    copy = tmp_path / "mutated"
    shutil.copytree(code.directory, copy)
    params = copy / next(s for s in code.manifest["sources"] if s.endswith("params.c"))
    text = params.read_text()
    header = re.search(rf"{code.manifest['prefix']}{layer}_kernel\[\d*\]\s*=\s*\{{\s*", text)
    number = re.compile(r"[-+]?\d[\d.eE+-]*f?").match(text, header.end())
    value = float(number.group(0).rstrip("f"))
    params.write_text(text[:number.start()] + f"{value * 1.5 + 0.5:.9g}f" + text[number.end():])
    result = _measure(model, GeneratedCode.from_directory(copy), inputs, tmp_path / "build")
    rows = {row["layer"]: row for row in result["layers"]}
    assert result["first_over_tolerance"] == layer
    before = [row for row in result["layers"] if row["index"] < rows[layer]["index"]]
    assert before and all(row["within_tolerance"] for row in before)
    assert rows[layer]["max_abs_error"] > 100 * max(row["max_abs_error"] for row in before)
    assert rows[layer]["judged_by"] == "derived bound" and rows[layer]["bound_ratio"] > 1
    assert all(row["bound_ratio"] <= 1 for row in before)


@pytest.mark.tor("TOR-EVD-008")
def test_a_model_with_an_op_without_a_bound_rule_is_judged_by_the_fixed_tolerance_visibly(tmp_path, monkeypatch):
    """An op without a rule in ``harness.references.bounds`` (Elu, whose rule since issue 40 is taken away here):
    every layer is judged by the model's tolerance, and the result and each row say why."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from harness.models import zoo
    from harness.references import bounds

    monkeypatch.delitem(bounds._FORWARD, "Elu")
    monkeypatch.delitem(bounds._REVERSE, "Elu")

    rng = np.random.default_rng(0)
    w1, b1, w2 = (rng.uniform(-1, 1, shape).astype(np.float32) for shape in ((8, 4), (8,), (3, 8)))
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1), helper.make_node("Elu", ["h"], ["e"]),
             helper.make_node("Gemm", ["e", "w2"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "elu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
                              [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"))])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "elu.onnx"))
    model = zoo.load(tmp_path / "elu.onnx", cache_dir=tmp_path / "cache")
    code = get_generator("assay-v2").generate(model, "onnx", tmp_path / "code")
    result = _measure(model, code, make_inputs(model, 20, 0), tmp_path / "build")
    assert result["tolerance"] == "fixed tolerance: no derived bound for Elu"
    compared = [row for row in result["layers"] if row["compared"]]
    assert compared and all(row["judged_by"] == "fixed tolerance: no derived bound for Elu" and
                            row["within_tolerance"] and "bound_ratio" not in row for row in compared)


@pytest.mark.tor("TOR-EVD-008")
def test_a_keras_flatten_of_channels_last_features_is_judged_by_the_fixed_tolerance_not_compared_out_of_order(
        tmp_path):
    """lenet5 (Keras): its Flatten orders the features channels last, the export's channels first. The same values
    in two orders cannot be compared element by element (that gave a false 'over the tolerance' at flatten1): that
    layer is judged by the fixed tolerance with the reason, every other layer by its derived bound, all within."""
    model = load_model("lenet5", Settings(work_dir=tmp_path / "work"))
    code = get_generator("assay-v2").generate(model, "keras", tmp_path / "code")
    result = _measure(model, code, make_inputs(model, 4, 0), tmp_path / "build")
    compared = {row["layer"]: row for row in result["layers"] if row["compared"]}
    flattened = [name for name, row in compared.items() if row["judged_by"].startswith("fixed tolerance")]
    assert flattened and all("flattened channels first, the Keras layer's channels last" in compared[name]["judged_by"]
                             for name in flattened)
    assert any(row["judged_by"] == "derived bound" for row in compared.values())
    assert result["first_over_tolerance"] is None and all(row["within_tolerance"] for row in compared.values())
