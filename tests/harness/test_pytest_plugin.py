"""The plugin's gates: --wcet and --run-slow turn marked tests on; without them they are skipped with a reason."""

import pytest

pytest_plugins = ["pytester"]

GATED = """
import pytest

@pytest.mark.wcet
def test_wcet_check():
    assert True

@pytest.mark.slow
def test_slow_check():
    assert True

def test_plain():
    assert True
"""


def test_wcet_and_slow_tests_are_skipped_by_default(pytester):
    pytester.makepyfile(GATED)
    result = pytester.runpytest("-rs", "-p", "no:randomly")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*WCET check: run with pytest --wcet*", "*slow: run with --run-slow*"])


def test_wcet_option_runs_wcet_tests_only(pytester):
    pytester.makepyfile(GATED)
    result = pytester.runpytest("--wcet")
    result.assert_outcomes(passed=2, skipped=1)


def test_a_directory_named_like_a_marker_is_not_gated(pytester):
    """Only the marker gates a test: tests under tests/wcet/ without @pytest.mark.wcet always run."""
    pytester.mkdir("wcet").joinpath("test_inside.py").write_text("def test_inside():\n    assert True\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)


def test_shards_without_an_output_folder_are_a_usage_error(pytester):
    """The controller merges the shards into --assay-out/results.json: without it there is nowhere to merge."""
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result = pytester.runpytest("--assay-shard-size", "10")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--assay-shard-size needs --assay-out*"])


def test_a_worker_reuses_a_shard_the_controller_holds_without_running_it(tmp_path):
    """A remote worker cannot see the controller's shards: the controller names them (xdist workerinput) and the
    worker returns their stored verdicts instead of running them again."""
    from harness.core.plan import load_model
    from harness.core.results import ResultStore
    from harness.core.shards import ShardStore, split
    from harness.pytest_plugin import Campaign, ShardItem
    from harness.stages.semantic import run as semantic

    settings = semantic.Settings(n_inputs=20, work_dir=tmp_path / "work")
    item = semantic.plan(["acas-reg50"], ["assay-v2:onnx"], ["onnxruntime"], ["host"], settings).items[0]
    shard = split(20, 10)[1]
    key = semantic.content_key(item, load_model(item.model, settings), settings)
    name = ShardStore(tmp_path / "out" / "shards").name(item.id, key, shard)
    checks = [{"reference": "onnxruntime", "verdict": "pass", "cause": None, "max_abs_error": 1e-7, "tolerance": 1e-5}]
    campaign = Campaign(settings, ResultStore(tmp_path / "out" / "results.json"), {name: checks})
    assert campaign.run(ShardItem(item, shard)) == checks
    assert campaign.payload == {"shard": {"item": ["acas-reg50", "assay-v2", "onnx", "host", ["onnxruntime"]],
                                          "name": name}}  # only its name: the controller has the file
    assert not (tmp_path / "out" / "shards").exists() and not (tmp_path / "work" / "acas-reg50" / "assay-v2").exists()


def test_a_model_no_generator_supports_is_a_skip_naming_the_op(pytester):
    """As in ``assay semantic`` (a ``not supported`` record, exit 2 when nothing else ran), a generator's refusal
    fails no campaign test: the item is skipped with the generator's one line, naming the node and its op."""
    import onnx
    from onnx import TensorProto, helper

    values = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4]) for name in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Hardmax", ["x"], ["y"], axis=1)], "hardmax", values[:1], values[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, pytester.path / "hardmax.onnx")
    pytester.makepyfile("from harness.stages.semantic.pytest_items import test_semantic_preservation  # noqa\n")
    result = pytester.runpytest("-rs", "-p", "no:randomly", "--assay-models", str(pytester.path / "hardmax.onnx"),
                                "--assay-generators", "assay-v2", "--assay-inputs", "3",
                                "--assay-work", str(pytester.path / "work"), "--assay-out", str(pytester.path / "out"))
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*not supported: hardmax.onnx: node 'Hardmax_0' (Hardmax) is not supported*"])
