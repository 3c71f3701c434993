"""The oracle catches deliberately altered generated code (issue: oracle test).

Real pipeline: zoo model -> assay-v2 -> gcc -> worker -> Keras. The mutations
are placed with the manifest, so they hit real weights and real loops.
"""

import re
import shutil

import pytest

from harness.core.pipeline import from_code_layout, to_code_layout
from harness.core.plan import Settings, load_model
from harness.core import oracle
from harness.stages.semantic.run import reference_outputs
from harness.generators.generated import GeneratedCode
from harness.generators import get as get_generator
from harness.core.inputs import make_inputs
from harness.runners import host

N_INPUTS = 200


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    settings = Settings(n_inputs=N_INPUTS, work_dir=work)
    model = load_model("acas-reg50", settings)
    code = get_generator("assay-v2").generate(model, "keras", work / "src")
    expected = reference_outputs("keras", model, settings)
    return model, code, expected


def verdict_of(model, code_dir, expected, build_dir):
    code = GeneratedCode.from_directory(code_dir)
    built = host.build(code, build_dir)
    outputs = host.run(built, to_code_layout(make_inputs(model, N_INPUTS, 0), model, code)).outputs
    return oracle.compare(from_code_layout(outputs, model, code), expected, model.tolerance)


def mutated_copy(code, tmp_path):
    target = tmp_path / "mutant"
    shutil.copytree(code.directory, target)
    return target, GeneratedCode.from_directory(target)


@pytest.mark.tor("TOR-SEM-005")
def test_the_unaltered_code_passes(pristine, tmp_path):
    model, code, expected = pristine
    assert verdict_of(model, code.directory, expected, tmp_path / "b").verdict == oracle.PASS


@pytest.mark.tor("TOR-SEM-005")
def test_one_weight_changed_by_1e_3_fails(pristine, tmp_path):
    model, code, expected = pristine
    directory, mutant = mutated_copy(code, tmp_path)
    first_weights = next(s for s in mutant.manifest["symbols"]["data"] if "kernel" in s or "weight" in s)
    for path in directory.glob("*.c"):
        text = path.read_text()
        match = re.search(re.escape(first_weights) + r"\s*\[[^\]]*\]\s*=\s*\{\s*([-+0-9.eE]+)f?", text)
        if match:
            value = float(match.group(1))
            path.write_text(text[:match.start(1)] + f"{value + 1e-3:.9g}" + text[match.end(1):])
            break
    else:
        pytest.fail(f"no C initializer found for {first_weights}")
    result = verdict_of(model, directory, expected, tmp_path / "b")
    assert result.verdict == oracle.FAIL, result
    assert result.max_abs_error > model.tolerance


@pytest.mark.tor("TOR-SEM-005")
def test_one_loop_bound_off_by_one_is_detected(pristine, tmp_path):
    model, code, expected = pristine
    directory, mutant = mutated_copy(code, tmp_path)
    layer = mutant.manifest["layers"][0]
    loop = next(lp for lp in layer["loops"] if lp["parent"] is not None)  # the dot-product loop
    path = directory / layer["file"]
    lines = path.read_text().splitlines(keepends=True)
    line = lines[loop["line"] - 1]
    assert f"< {loop['bound']}" in line
    lines[loop["line"] - 1] = line.replace(f"< {loop['bound']}", f"< {loop['bound'] - 1}", 1)
    path.write_text("".join(lines))
    result = verdict_of(model, directory, expected, tmp_path / "b")
    assert result.verdict != oracle.PASS, result
