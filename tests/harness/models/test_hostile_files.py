"""Malformed and hostile model files: one line naming the file and the cause, never a traceback.

Every case is built in ``tmp_path``. Most are loaded in-process with
``zoo.load(path, cache_dir, seed=0)`` (and, for shapes too large to verify,
``budget.check``), which must raise a ``ModelError`` of one line that names the
user's file (never a cache file) and the cause. A representative subset also
runs the real CLI (``python -m harness.cli semantic``) against an OUT that
already holds a good acas-reg50 result: exit 2, no traceback, one-line errors
naming the file, the earlier records unchanged.

Unreadable files: tests run as root, and root opens any file whatever its mode
(its CAP_DAC_OVERRIDE), so a mode-000 file is readable in-process. "Permission
denied" is produced for real by running the loader and the CLI in a process
that keeps uid 0 but has CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH removed from
its capability bounding set (``setpriv --bounding-set=-dac_override,...``;
skipped if ``setpriv`` is missing). Switching to user ``nobody`` instead does
not work here: the Python installation lives under ``/root`` (mode 700). FIFOs,
directories named ``x.onnx`` and symlink loops fail for root as for anyone and
are tested directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.errors import ModelError
from harness.core import budget
from harness.models import zoo

from test_nnet import SMALL

WORKTREE = Path(__file__).resolve().parents[3]

# --- building the files -----------------------------------------------------------


def _onnx(nodes, inputs, outputs, initializers=(), opsets=(("", 17),)):
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)),
                              opset_imports=[helper.make_opsetid(domain, version) for domain, version in opsets])
    model.ir_version = 8
    return model.SerializeToString()


def _value(name, dims, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, dims)


def _relu(dims):
    return _onnx([helper.make_node("Relu", ["x"], ["y"])], [_value("x", dims)], [_value("y", dims)])


def _add_constant(values):
    weights = numpy_helper.from_array(np.array(values, dtype=np.float32), "w")
    return _onnx([helper.make_node("Add", ["x", "w"], ["y"])], [_value("x", ["N", 3])], [_value("y", ["N", 3])],
                 [weights])


GOOD_ONNX = _relu(["N", 5])


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory):
    """A valid tiny .keras, a valid .h5, a .keras with NaN weights, one with a Lambda layer, and a .keras and a .h5
    whose input has no value (``Input((0,))``)."""
    from harness.models.tf_runtime import keras, save_keras

    k = keras()
    directory = tmp_path_factory.mktemp("keras")

    def dense(name):
        inputs = k.Input(shape=(4,), name="x")
        return k.Model(inputs, k.layers.Dense(3, name="d")(inputs), name=name)

    good = dense("good")
    save_keras(good, directory / "good.keras")
    good.save(directory / "good.h5")
    nan = dense("nan")
    kernel, bias = nan.get_weights()
    kernel[1, 2] = np.nan
    nan.set_weights([kernel, bias])
    save_keras(nan, directory / "nan.keras")
    inputs = k.Input(shape=(4,), name="x")
    lam = k.Model(inputs, k.layers.Lambda(lambda t: t * 2.0, name="double")(inputs), name="lam")
    save_keras(lam, directory / "lambda.keras")
    inputs = k.Input(shape=(0,), name="x")
    empty = k.Model(inputs, k.layers.Dense(3, name="d")(inputs), name="empty")
    save_keras(empty, directory / "zero_input.keras")
    empty.save(directory / "zero_input.h5")
    return {name: (directory / name).read_bytes() for name in ("good.keras", "good.h5", "nan.keras", "lambda.keras",
                                                               "zero_input.keras", "zero_input.h5")}


def _keras_with_config(good: bytes, edit) -> bytes:
    """A .keras archive whose config.json is ``edit(config)``."""
    import io

    source, out = zipfile.ZipFile(io.BytesIO(good)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == "config.json":
                data = json.dumps(edit(json.loads(data))).encode()
            target.writestr(info.filename, data)
    return out.getvalue()


def _arbitrary_class(config):
    def walk(node):
        if isinstance(node, dict):
            if node.get("class_name") == "Dense":
                node["module"], node["class_name"] = "os", "system"
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(config)
    return config


def _corrupt_crc(good: bytes) -> bytes:
    data = bytearray(good)
    index = data.index(b"config.json", 30) + 40  # inside the first stored member's data
    data[index] ^= 0xFF
    return bytes(data)


def _h5_truncated(_keras) -> bytes:
    return _keras["good.h5"][: len(_keras["good.h5"]) // 2]


# name -> (file name, content builder (keras_files -> bytes) or a special kind, expected cause)
CASES = {
    "empty onnx": ("empty.onnx", lambda _: b"", "empty file"),
    "empty keras": ("empty.keras", lambda _: b"", "empty file"),
    "random onnx": ("random.onnx", lambda _: np.random.default_rng(0).bytes(4096), "not a valid ONNX file"),
    "random keras": ("random.keras", lambda _: np.random.default_rng(1).bytes(4096), "not a zip archive"),
    "random h5": ("random.h5", lambda _: np.random.default_rng(2).bytes(4096), "no HDF5 signature"),
    "binary nnet": ("random.nnet", lambda _: bytes(range(256)) * 8, "not an NNet text file"),
    "truncated onnx": ("truncated.onnx", lambda _: _add_constant([1, 2, 3])[:-20], "ONNX"),
    "truncated keras": ("truncated.keras", lambda k: k["good.keras"][: len(k["good.keras"]) // 2], "corrupt .keras"),
    "truncated h5": ("truncated.h5", _h5_truncated, "HDF5"),
    "truncated nnet": ("truncated.nnet", lambda _: SMALL[: SMALL.index("0.3,")].encode(), "truncated file"),
    "truncated json": ("truncated.json", lambda _: b'{"layers": [{"type": "Dense", "units": ', "json"),
    "not acetone json": ("other.json", lambda _: b'{"hello": "world"}', "json"),
    "unsupported op": ("unsupported.onnx", lambda _: _onnx([helper.make_node("FooBar", ["x"], ["y"])],
                                                           [_value("x", ["N", 5])], [_value("y", ["N", 5])]),
                       "invalid ONNX model"),
    "graph cycle": ("cycle.onnx", lambda _: _onnx([helper.make_node("Add", ["x", "b"], ["a"]),
                                                   helper.make_node("Relu", ["a"], ["b"]),
                                                   helper.make_node("Identity", ["a"], ["y"])],
                                                  [_value("x", ["N", 5])], [_value("y", ["N", 5])]),
                    "invalid ONNX model"),
    "dangling input": ("dangling.onnx", lambda _: _onnx([helper.make_node("Add", ["x", "ghost"], ["y"])],
                                                        [_value("x", ["N", 5])], [_value("y", ["N", 5])]),
                       "invalid ONNX model"),
    "no graph": ("nograph.onnx", lambda _: helper.make_model(helper.make_graph([], "g", [], [])).SerializeToString(),
                 "no graph"),
    "nan weights onnx": ("nan.onnx", lambda _: _add_constant([1.0, np.nan, 3.0]), "contain NaN"),
    "inf weights onnx": ("inf.onnx", lambda _: _add_constant([1.0, np.inf, 3.0]), "contain infinity"),
    "nan weights nnet": ("nan.nnet", lambda _: SMALL.replace("0.5,0.25,", "0.5,nan,").encode(), "NaN or infinity"),
    "nan weights keras": ("nan.keras", lambda k: k["nan.keras"], "contain NaN"),
    "zero dimension": ("zero.onnx", lambda _: _relu(["N", 0]), "the input has shape [0], a dimension of size 0"),
    # one rule for every format (issue 44): the Keras files used to reach the generators, which named the cache
    "zero-size keras input": ("zero_input.keras", lambda k: k["zero_input.keras"],
                              "the input has shape [0], a dimension of size 0"),
    "zero-size h5 input": ("zero_input.h5", lambda k: k["zero_input.h5"],
                           "the input has shape [0], a dimension of size 0"),
    "zero-size onnx output": ("zero_output.onnx", lambda _: _onnx(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], [_value("x", ["N", 5])], [_value("y", ["N", 0])],
        [numpy_helper.from_array(np.zeros((5, 0), np.float32), "w")]),
                              "the output has shape [0], a dimension of size 0"),
    "two inputs, one integer": ("two_inputs.onnx", lambda _: _onnx(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Identity", ["z"], ["w"])],
        [_value("x", ["N", 5]), _value("z", ["N", 5], TensorProto.INT64)],
        [_value("y", ["N", 5]), _value("w", ["N", 5], TensorProto.INT64)]), "z is INT64; float32 (quantized"),
    "integer input": ("int.onnx", lambda _: _onnx([helper.make_node("Identity", ["x"], ["y"])],
                                                  [_value("x", ["N", 5], TensorProto.INT64)],
                                                  [_value("y", ["N", 5], TensorProto.INT64)]),
                      "x is INT64; float32 or quantized (int8 ... float4e2m1)"),
    "rank-5 input": ("rank5.onnx", lambda _: _relu([2, 2, 2, 2, 2]), "ranks 1 to 4 are supported"),
    "lambda layer": ("lambda.keras", lambda k: k["lambda.keras"], "unsafe Keras layer Lambda"),
    "arbitrary class": ("evil.keras", lambda k: _keras_with_config(k["good.keras"], _arbitrary_class),
                        "unsafe Keras class os.system"),
    "no config": ("noconfig.keras", lambda k: _keras_with_config(k["good.keras"], lambda c: c)
                  .replace(b"config.json", b"config.jsox"), "no config.json"),
    "bad crc": ("crc.keras", lambda k: _corrupt_crc(k["good.keras"]), "corrupt .keras"),
    "onnx named keras": ("model.keras", lambda _: GOOD_ONNX, "not a zip archive"),
    "keras named onnx": ("keras.onnx", lambda k: k["good.keras"], "not a valid ONNX file"),
    "wrong suffix": ("model.pb", lambda _: GOOD_ONNX, "unsupported file type '.pb'"),
    "bad sidecar": ("sidecar.onnx", lambda _: GOOD_ONNX, "sidecar.onnx.assay.toml: unknown key 'tolrance'"),
    "symlink loop": ("loop.onnx", "loop", "symlink loop"),
    "dangling symlink": ("gone.onnx", "dangling", "dangling symlink"),
    "directory": ("dir.onnx", "directory", "is a directory"),
    "fifo": ("pipe.onnx", "fifo", "not a regular file (a FIFO"),
    "huge image": ("huge.onnx", lambda _: _relu([1, 3, 8000, 8000]), "above the limit of 4.0 GiB"),
    "2^31 wide": ("wide.onnx", lambda _: _relu(["N", 2**31]), "above the limit of 4.0 GiB"),
    "huge intermediate": ("expand.onnx", lambda _: _expand_model(), "above the limit of 4.0 GiB"),
}


def _expand_model() -> bytes:
    """5 inputs and 5 outputs, but a 5 x 4e7 intermediate tensor (Expand, then ReduceMax back)."""
    shape = numpy_helper.from_array(np.array([1, 5, 40_000_000], dtype=np.int64), "shape")
    axes = numpy_helper.from_array(np.array([2], dtype=np.int64), "axes")
    return _onnx([helper.make_node("Unsqueeze", ["x", "axes"], ["u"]),
                  helper.make_node("Expand", ["u", "shape"], ["big"]),
                  helper.make_node("ReduceMax", ["big"], ["y"], axes=[2], keepdims=0)],
                 [_value("x", [1, 5])], [_value("y", [1, 5])], [shape, axes])


def build(case: str, directory: Path, keras_files) -> Path:
    name, content, _ = CASES[case]
    path = directory / name
    if content == "loop":
        path.symlink_to(name)
    elif content == "dangling":
        path.symlink_to("nothing-here.onnx")
    elif content == "directory":
        path.mkdir()
    elif content == "fifo":
        os.mkfifo(path)
    else:
        path.write_bytes(content(keras_files))
        if case == "bad sidecar":
            (directory / f"{name}.assay.toml").write_text("tolrance = 1e-4\n")
    return path


KERAS_CASES = {"truncated keras", "truncated h5", "nan weights keras", "lambda layer", "arbitrary class",
               "no config", "bad crc", "keras named onnx", "zero-size keras input", "zero-size h5 input"}


def _needs_keras(case: str) -> bool:
    return case in KERAS_CASES


def _assert_one_line_about(message: str, path: Path, cause: str) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert str(path) in message, message
    assert cause in message, message
    assert "model.onnx" not in message.replace(path.name, "") and "model.keras" not in message.replace(path.name, ""),\
        message  # never a file of the cache


def test_at_least_thirty_cases():
    assert len(CASES) >= 30


@pytest.mark.tor("TOR-CLI-001")
@pytest.mark.parametrize("case", sorted(CASES))
def test_loader_refuses_with_one_line(case, tmp_path, request):
    keras_files = request.getfixturevalue("keras_files") if _needs_keras(case) else None
    path = build(case, tmp_path, keras_files)
    with pytest.raises(ModelError) as info:
        model = zoo.load(path, cache_dir=tmp_path / "cache", seed=0)
        budget.check(model, 3, source=str(path))  # what plan.expand does after a successful load
    _assert_one_line_about(str(info.value), path, CASES[case][2])


def test_budget_estimate_and_limit(tmp_path):
    """The estimate follows the documented formula; the limit comes from the argument or ASSAY_MEMORY_LIMIT."""
    model = zoo.load(build("huge image", tmp_path, None), cache_dir=tmp_path / "cache")
    pixels = 3 * 8000 * 8000
    size = (tmp_path / "huge.onnx").stat().st_size
    assert budget.estimate(model, 3) == 4 * 3 * (pixels + 3 * pixels) + 8 * 3 * (2 * pixels) + 2 * size
    assert budget.check(model, 3, limit=None) > 4 << 30  # no limit: the estimate only
    small = zoo.load(build("2^31 wide", tmp_path, None), cache_dir=tmp_path / "cache")
    with pytest.raises(ModelError, match=r"needs about 64\.0 GiB .* above the limit of 1\.0 GiB"):
        budget.check(small, 1, limit=1 << 30)
    acas = zoo.load(_write(tmp_path / "acas.onnx", _relu(["N", 5])), cache_dir=tmp_path / "cache")
    assert budget.check(acas, 1000) < 1 << 20
    os.environ[budget.ENVIRONMENT] = "100K"
    try:
        with pytest.raises(ModelError, match=r"acas.onnx: needs about .* above the limit of 100\.0 KiB"):
            budget.check(acas, 100_000, source=str(tmp_path / "acas.onnx"))
        os.environ[budget.ENVIRONMENT] = "none"
        assert budget.check(model, 3) > 4 << 30
    finally:
        del os.environ[budget.ENVIRONMENT]
    assert budget.parse_size("4G") == 4 << 30 and budget.parse_size("1.5GiB") == 3 << 29
    # Intermediate tensors count: 5 inputs and outputs, but a 2e8-element tensor inside.
    expand = zoo.load(build("huge intermediate", tmp_path, None), cache_dir=tmp_path / "cache")
    assert budget.estimate(expand, 1) >= 8 * 200_000_000


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


# --- unreadable files: really unreadable, for root without its file-permission capabilities ---

SETPRIV = shutil.which("setpriv")
needs_setpriv = pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0,
                                   reason="needs root and setpriv to drop CAP_DAC_OVERRIDE")


def _without_dac(args, cwd: Path, timeout=600):
    """Run ``python args`` as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH: file modes apply to it."""
    env = {**os.environ, "PYTHONPATH": str(WORKTREE)}
    return subprocess.run([SETPRIV, "--bounding-set=-dac_override,-dac_read_search", sys.executable, *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@needs_setpriv
def test_unreadable_onnx_is_not_called_invalid(tmp_path):
    path = _write(tmp_path / "secret.onnx", GOOD_ONNX)
    path.chmod(0o000)
    assert zoo.load(path, cache_dir=tmp_path / "cache").input_shape == (5,)  # root in-process: readable
    code = ("import sys\nfrom harness.models import zoo\nfrom harness.errors import ModelError\n"
            "try:\n    zoo.load(sys.argv[1], cache_dir=sys.argv[2], seed=0)\n"
            "except ModelError as e:\n    print(e)\n")
    result = _without_dac(["-c", code, str(path), str(tmp_path / "cache")], WORKTREE)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    message = result.stdout.strip()
    _assert_one_line_about(message, path, "cannot read the file (permission denied)")
    assert "not a valid ONNX" not in message


# --- the CLI on a representative subset ----------------------------------------------

CLI_CASES = ["empty onnx", "random keras", "truncated nnet", "graph cycle", "symlink loop", "directory",
             "huge image", "lambda layer", "nan weights onnx", "zero-size keras input"]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """OUT with one good acas-reg50 result (3 inputs) and a WORK dir shared by every CLI case."""
    root = tmp_path_factory.mktemp("campaign")
    out, work = root / "out", root / "work"
    result = _cli("acas-reg50", out, work)
    assert result.returncode == 0, result.stdout + result.stderr
    return out, work, _records(out)


def _cli(model, out, work, runner=None):
    command = [sys.executable, "-m", "harness.cli", "semantic", "--models", str(model), "--inputs", "3", "--quiet",
               "--out", str(out), "--work", str(work)]
    if runner is not None:
        return runner(command[1:])
    return subprocess.run(command, cwd=WORKTREE, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(WORKTREE)})


def _records(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["records"]


def _check_cli(result, path: Path, cause: str, earlier: list[dict], out: Path) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert errors, result.stderr
    for line in errors:
        _assert_one_line_about(line.split(": error: ", 1)[1], path, cause)
    records = _records(out)
    assert [r for r in records if r["model"] == "acas-reg50"] == earlier  # the earlier good run is untouched
    mine = [r for r in records if r["model"] == str(path)]
    assert mine and all(r["verdict"] == "error" and "\n" not in r["cause"] for r in mine)


@pytest.mark.tor("TOR-CLI-001")
@pytest.mark.parametrize("case", CLI_CASES)
def test_cli_one_line_exit_2_earlier_results_kept(case, campaign, tmp_path, request):
    out, work, earlier = campaign
    keras_files = request.getfixturevalue("keras_files") if _needs_keras(case) else None
    path = build(case, tmp_path, keras_files)
    _check_cli(_cli(path, out, work), path, CASES[case][2], earlier, out)


@needs_setpriv
def test_cli_unreadable_file(campaign, tmp_path):
    out, work, earlier = campaign
    path = _write(tmp_path / "secret.onnx", GOOD_ONNX)
    path.chmod(0o000)
    result = _cli(path, out, work, lambda args: _without_dac(args, WORKTREE))
    _check_cli(result, path, "cannot read the file (permission denied)", earlier, out)
