"""The import rules of docs/architecture.md, checked on the source (no import is executed).

- ``codegen`` (the tool under test) and ``wcet`` (the analysis library) never
  import ``harness``: each can be qualified and used on its own;
- ``codegen`` never imports ``wcet`` and ``wcet`` never imports ``codegen``;
- a stage (``harness.stages.<name>``) never imports another stage;
- the core, the registries and the CLI never import a stage (data flows from
  the stages to the core, not back), except the CLI's discovery of commands.
- ``harness.scheduling`` imports nothing of Assay but itself;
- no two packages import each other, directly or through others (an ``importlib.import_module`` of a literal
  name counts as an import): each package can be understood, and replaced, above the ones it uses.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file, relative imports resolved, and of every
    ``importlib.import_module("literal")``."""
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
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found.append((node.lineno, node.args[0].value))
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


def package_of(module: str) -> str:
    """The unit of docs/architecture.md's import table a module belongs to: ``codegen``, ``wcet``, a stage
    (``harness.stages.semantic``), a harness package (``harness.core``) or a top-level module (``harness.cli``)."""
    parts = module.split(".")
    if parts[0] != "harness":
        return parts[0]
    return ".".join(parts[:3] if parts[1:2] == ["stages"] and len(parts) > 2 else parts[:2])


def package_edges(root: Path = ROOT) -> dict[tuple[str, str], str]:
    """(importing package, imported package) -> the first ``file:line`` that makes the edge, over Assay's code."""
    edges: dict[tuple[str, str], str] = {}
    for package in ("harness", "codegen", "wcet"):
        for path in sorted((root / package).rglob("*.py")):
            source = package_of(".".join(path.relative_to(root).with_suffix("").parts))
            for line, name in imported_modules(path, root):
                target = package_of(name)
                if top(name) in {"harness", "codegen", "wcet"} and target != source:
                    edges.setdefault((source, target), f"{path.relative_to(root)}:{line}")
    return edges


def cycles(edges) -> list[list[str]]:
    """Every set of packages that import one another, through others or directly (Tarjan's strongly connected
    components of more than one package), each sorted."""
    graph: dict[str, list[str]] = {}
    for source, target in edges:
        graph.setdefault(source, []).append(target)
        graph.setdefault(target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


@pytest.mark.tor("TOR-ARC-001")
def test_no_two_packages_import_each_other():
    edges = package_edges()
    assert [[f"{a} -> {b} ({edges[a, b]})" for a in cycle for b in cycle if (a, b) in edges]
            for cycle in cycles(edges)] == []


def test_the_cycle_check_sees_direct_indirect_and_importlib_cycles(tmp_path):
    for folder in ("harness/core", "harness/targets", "harness/runners", "harness/stages/met", "harness/models"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "harness/core/plan.py").write_text("from harness.targets import get\n")
    (tmp_path / "harness/targets/__init__.py").write_text("def f():\n    from harness import runners\n")
    (tmp_path / "harness/runners/host.py").write_text("import importlib\nimportlib.import_module('harness.core.plan')\n")
    (tmp_path / "harness/stages/met/run.py").write_text("from harness.models import zoo\n")
    (tmp_path / "harness/models/zoo.py").write_text("from ..stages.met import run\n")
    for package in ("codegen", "wcet"):
        (tmp_path / package).mkdir()
    edges = package_edges(tmp_path)
    assert edges[("harness.runners", "harness.core")] == "harness/runners/host.py:2"
    assert cycles(edges) == [["harness.core", "harness.runners", "harness.targets"],
                             ["harness.models", "harness.stages.met"]]
