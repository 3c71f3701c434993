"""The import rules of docs/architecture.md, checked on the source (no import is executed).

- ``codegen`` (the tool under test) and ``wcet`` (the analysis library) never
  import ``harness``: each can be qualified and used on its own;
- ``codegen`` never imports ``wcet`` and ``wcet`` never imports ``codegen``;
- a stage (``harness.stages.<name>``) never imports another stage;
- the core, the registries and the CLI never import a stage (data flows from
  the stages to the core, not back), except the CLI's discovery of commands.
- ``harness.scheduling`` imports nothing of Assay but itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative imports resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names] or [(node.lineno, base)]
    return found


def violations(package: str, forbidden, root: Path = ROOT) -> list[str]:
    """Every import in ``root/package`` for which ``forbidden(path relative to root, module)`` holds."""
    return [f"{path.relative_to(root)}:{line}: imports {name}"
            for path in sorted((root / package).rglob("*.py"))
            for line, name in imported_modules(path, root) if forbidden(path.relative_to(root), name)]


def top(name: str) -> str:
    return name.split(".")[0]


def stage_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if parts[:2] == ["harness", "stages"] and len(parts) > 2 else None


@pytest.mark.tor("TOR-ARC-001")
@pytest.mark.parametrize("package, others", [("codegen", {"harness", "wcet"}), ("wcet", {"harness", "codegen"})])
def test_standalone_packages_import_no_other_assay_package(package, others):
    assert violations(package, lambda _path, name: top(name) in others) == []


def crosses_stages(path: Path, name: str) -> bool:
    own, other = stage_of(".".join(path.with_suffix("").parts)), stage_of(name)
    return other is not None and other != own


def imports_a_stage(path: Path, name: str) -> bool:
    return path.parts[1] not in ("stages", "cli.py", "pytest_plugin.py") and stage_of(name) is not None


@pytest.mark.tor("TOR-ARC-001")
def test_a_stage_never_imports_another_stage():
    assert violations("harness/stages", crosses_stages) == []


def test_core_and_registries_never_import_a_stage():
    assert violations("harness", imports_a_stage) == []


@pytest.mark.tor("TOR-ARC-001")
def test_the_rules_catch_every_kind_of_import(tmp_path):
    """The checks are only as good as the scan: a probe tree with each kind of forbidden import."""
    stage = tmp_path / "harness" / "stages" / "met"
    stage.mkdir(parents=True)
    (stage / "run.py").write_text("import harness.stages.wcet.run\nfrom ..semantic import report\n"
                                  "from . import command\ndef f():\n    from harness.stages.memory.run import x\n")
    (tmp_path / "harness" / "core").mkdir()
    (tmp_path / "harness" / "core" / "plan.py").write_text("from harness.stages.met import run\n")
    (tmp_path / "wcet").mkdir()
    (tmp_path / "wcet" / "bound.py").write_text("from harness.errors import AssayError\n")
    assert violations("harness/stages", crosses_stages, tmp_path) == [
        "harness/stages/met/run.py:1: imports harness.stages.wcet.run",
        "harness/stages/met/run.py:2: imports harness.stages.semantic.report",
        "harness/stages/met/run.py:5: imports harness.stages.memory.run.x"]
    assert violations("harness", imports_a_stage, tmp_path) == [
        "harness/core/plan.py:1: imports harness.stages.met.run"]
    assert violations("wcet", lambda _p, name: top(name) == "harness", tmp_path) == [
        "wcet/bound.py:1: imports harness.errors.AssayError"]


def test_the_scheduling_library_imports_nothing_of_assay_but_itself():
    """``harness.scheduling`` is plain data in and out, for the stage, the benchmark and a future generator."""
    def outside(_path: Path, name: str) -> bool:
        return top(name) in {"harness", "codegen", "wcet"} and not name.startswith("harness.scheduling")

    assert violations("harness/scheduling", outside) == []
