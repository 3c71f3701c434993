"""Each stage's contract (``harness/stages/<stage>/spec.py``): declared once, read by the stages that consume
its results, its options made into argparse options, ``Settings`` defaults and the pytest campaign's."""

from __future__ import annotations

import argparse
import ast
import importlib
from pathlib import Path

import pytest

from harness import stages
from harness.core import oracle
from harness.contract import COMMON, PER_ITEM, PER_MODEL, Option, StageSpec
from harness.core.results import ResultStore
from harness.errors import AssayError

ROOT = Path(__file__).resolve().parents[2]
STAGES = Path(stages.__file__).parent
WITH_RUN_CODE = sorted(path.parent.name for path in STAGES.glob("*/run.py"))


def spec_of(name: str) -> StageSpec:
    return importlib.import_module(f"harness.stages.{name}.spec").SPEC


@pytest.mark.parametrize("name", WITH_RUN_CODE)
def test_every_stage_with_run_code_declares_its_contract(name):
    spec = spec_of(name)
    assert spec.name == name and spec.per in (PER_ITEM, PER_MODEL)
    assert spec.result_file and spec.schema and spec.schema.startswith("assay-")
    assert set(spec.consumes) <= set(WITH_RUN_CODE) - {name}
    assert set(spec.passing) <= set(spec.verdicts)


def test_every_record_verdict_is_a_word_of_the_oracle():
    """One vocabulary: memory records say ``verdict`` like the others, met passes as ``pass``."""
    words = {oracle.PASS, oracle.FAIL, oracle.ERROR, oracle.NOT_SUPPORTED, oracle.NOT_MEASURED, oracle.UNBOUNDED}
    for name in ("semantic", "memory", "met", "wcet", "mutate", "conformance"):
        spec = spec_of(name)
        assert set(spec.verdicts) <= words and spec.passing == (oracle.PASS,), name
    assert spec_of("memory").schema == "assay-memory/2" and spec_of("met").schema == "assay-met/2"


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every string constant in a module but its docstrings (f-strings' literal parts too)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_stage_retypes_another_stages_file_name_or_schema():
    """A stage reads another stage's results through its contract: the other stage's result file name and schema
    appear in no string of its code (docstrings aside)."""
    found = []
    for name in WITH_RUN_CODE:
        spec = spec_of(name)
        for path in sorted(STAGES.rglob("*.py")):
            if path.relative_to(STAGES).parts[0] == name:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {text!r} ({name})" for line, text in _string_constants(path)
                      if spec.schema in text or text == spec.result_file]
    assert found == []


def test_the_retype_check_sees_a_retyped_schema(tmp_path):
    path = tmp_path / "run.py"
    path.write_text('"""Reads results.json (assay-results/1)."""\nSCHEMA = "assay-results/1"\nf = f"{x}/met.json"\n')
    assert _string_constants(path) == [(2, "assay-results/1"), (3, "/met.json")]


def test_an_option_makes_the_argparse_option_the_settings_default_and_the_pytest_option():
    inputs = Option("--inputs", 20, "inputs measured (default {default})", type=int, field="n_inputs", pytest=True)
    off = Option("--no-arbiter", False, "no arbiter", action="store_true", field="arbiter",
                 to_setting=lambda value: not value, pytest=True)
    timeout = Option("--timeout", 600.0, "seconds (default {default})", type=float)
    spec = StageSpec("probe", options=(inputs, off, timeout, Option("--label", "x", "not a setting", field="")))
    parser = argparse.ArgumentParser()
    spec.add_options(parser)
    assert "inputs measured (default 20)" in parser.format_help() and "seconds (default 600)" in parser.format_help()
    args = parser.parse_args(["--inputs", "3", "--no-arbiter"])
    assert spec.settings_values(lambda dest: getattr(args, dest)) == {"n_inputs": 3, "arbiter": False,
                                                                       "timeout": 600.0}
    assert (spec.default("n_inputs"), spec.default("arbiter"), spec.default("timeout")) == (20, True, 600.0)
    with pytest.raises(KeyError):
        spec.default("label")
    assert spec.campaign_options() == [inputs, off]

    class Group:  # a pytest option group: addoption
        def __init__(self):
            self.added = {}

        def addoption(self, name, **kwargs):
            self.added[name] = kwargs

    group = Group()
    for option in spec.campaign_options():
        option.add_to(group, prefix="assay-")
    assert group.added == {"--assay-inputs": {"help": "inputs measured (default 20)", "default": 20, "type": int},
                           "--assay-no-arbiter": {"help": "no arbiter", "action": "store_true"}}


def test_a_spec_refuses_passing_verdicts_it_does_not_declare():
    with pytest.raises(ValueError, match="not among"):
        StageSpec("probe", verdicts=("pass",), passing=("ok",))
    with pytest.raises(ValueError, match="per must be"):
        StageSpec("probe", per="target")


def test_store_read_passed_and_failed_follow_the_contract(tmp_path):
    spec = spec_of("memory")
    store = ResultStore.of(spec, spec.path(tmp_path))
    assert store.path == tmp_path / "memory.json" and store.schema == spec.schema
    assert spec.passed({"verdict": "pass"}) and not spec.failed({"verdict": "not measured"})
    assert spec.failed({"verdict": "unbounded"}) and not spec.passed({"status": "pass"})  # assay-memory/1's field
    schedule = spec_of("schedule")
    schedule.path(tmp_path).write_text('{"schema": "assay-schedule/0"}')
    with pytest.raises(AssayError, match="not an Assay assay-schedule/1 file"):
        schedule.read(schedule.path(tmp_path))


def test_semantic_defaults_are_declared_once(monkeypatch):
    """``assay semantic``'s defaults, ``Settings``' and the pytest campaign's are the spec's."""
    from harness.pytest_plugin import _settings
    from harness.stages.semantic.command import add_command
    from harness.stages.semantic.settings import Settings
    from harness.stages.semantic.spec import SPEC

    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers())
    args = parser.parse_args(["semantic"])

    class Config:  # what _settings reads of a pytest config: the --assay-* options left at their defaults
        @staticmethod
        def getoption(dest):
            return {f"assay_{o.dest}": o.default for o in (*COMMON, *SPEC.campaign_options())}.get(dest, "-O0")

    from_cli = Settings(**SPEC.settings_values(lambda dest: getattr(args, dest)),
                        **{o.setting: getattr(args, o.dest) for o in COMMON}, opt=args.opt)
    assert from_cli == Settings() == _settings(Config())
    assert (Settings().n_inputs, Settings().arbiter, args.inputs, args.references) == (1000, True, 1000,
                                                                                       "keras,onnxruntime,litert")
