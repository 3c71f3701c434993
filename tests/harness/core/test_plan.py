"""Per-model stages: ``expand_models`` keeps bad input, and such a stage keeps the CLI's contract (an unknown
model: exit 2, one line), without --generators and --targets."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from harness.cli import add_common_options, add_output_options, add_selection_options, selected_models
from harness.core import plan
from harness.core.plan import ModelItem, Settings, expand_models
from harness.core.progress import finish, run_items
from harness.errors import ModelError


def fake_load(name: str, _settings: Settings):
    if name.startswith("nope"):
        raise ModelError(f"unknown zoo model '{name}' (known: tiny)")
    return name


def test_expand_models_makes_one_item_per_model_and_keeps_bad_input(monkeypatch):
    monkeypatch.setattr(plan, "load_model", fake_load)
    campaign = expand_models(["tiny", "nope", "other"], Settings(), lambda model: (f"{model}-check",))
    assert campaign.items == [ModelItem("tiny", ("tiny-check",)), ModelItem("other", ("other-check",))]
    assert [item.id for item in campaign.items] == ["tiny", "other"]
    assert campaign.per_model and campaign.bad_input == ["unknown zoo model 'nope' (known: tiny)"]


def probe_parser() -> argparse.ArgumentParser:
    """A per-model stage as its command module would add it."""
    def cmd_probe(args: argparse.Namespace) -> int:
        campaign = expand_models(selected_models(args), Settings(work_dir=args.work))
        failed = run_items(campaign.items, lambda item: (True, []), quiet=True)
        return finish(campaign, failed, "nothing written", [])

    parser = argparse.ArgumentParser(prog="assay")
    sub = parser.add_subparsers(dest="command", required=True)
    probe = sub.add_parser("probe")
    add_selection_options(probe, per_model=True)
    add_output_options(probe, "reports/probe", "nothing")
    add_common_options(probe)
    probe.set_defaults(func=cmd_probe)
    return parser


def test_a_per_model_stage_takes_no_generators_or_targets(capsys):
    with pytest.raises(SystemExit) as exit_:
        probe_parser().parse_args(["probe", "--models", "tiny", "--generators", "assay-v2"])
    assert exit_.value.code == 2 and "unrecognized arguments: --generators" in capsys.readouterr().err


@pytest.mark.tor("TOR-CLI-001")
@pytest.mark.parametrize("model", ["nope-model", "nope.onnx"])
def test_a_per_model_stage_with_an_unknown_model_exits_2_with_one_line(model, tmp_path, capsys):
    name = str(tmp_path / model) if model.endswith(".onnx") else model  # a zoo name, a missing file
    args = probe_parser().parse_args(["probe", "--models", name, "--work", str(tmp_path / "work")])
    assert args.func(args) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("assay: error: ") and model in line and "Traceback" not in line, line


def test_a_per_model_stage_with_good_models_exits_0(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plan, "load_model", fake_load)
    args = probe_parser().parse_args(["probe", "--models", "tiny", "--work", str(tmp_path)])
    assert args.func(args) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("1 items, 0 failed")


def test_the_work_option_is_a_path():
    args = probe_parser().parse_args(["probe"])
    assert args.work == Path("generated") and args.models is None
