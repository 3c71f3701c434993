"""The import rules of docs/architecture.md, checked on the source (no import is executed).

- ``codegen`` (the tool under test) and ``wcet`` (the analysis library) never
  import ``harness``: each can be qualified and used on its own;
- ``codegen`` never imports ``wcet`` and ``wcet`` never imports ``codegen``;
- a stage (``harness.stages.<name>``) never imports another stage, but for its contract
  (``harness.stages.<other>.spec``, ``harness.contract``), and a contract imports no stage code;
- the core, the registries and the CLI never import a stage (data flows from
  the stages to the core, not back), except the CLI's discovery of commands.
- ``harness.scheduling`` imports nothing of Assay but itself;
- no two packages import each other, directly or through others (an ``importlib.import_module`` of a literal
  name counts as an import): each package can be understood, and replaced, above the ones it uses;
- no two modules import each other either, not even through an import inside a function;
- every import of one package by another is one the table of docs/architecture.md allows (the table is read
  here, so it describes the code).

Why a folder of its own: pytest puts a test module's folder on ``sys.path``; had it been ``tests/``, a later
``import codegen`` in the same process found the test folder ``tests/codegen`` (a namespace package, ahead of the
editable install's finder) and tests of the mutation stage failed with "module 'codegen' has no attribute
'__version__'" whenever this module ran before them on the same worker.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


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


def is_contract(name: str) -> bool:
    """``name`` is a stage's contract module, or a name in it (``harness.stages.wcet.spec``, ``...spec.SPEC``)."""
    parts = name.split(".")
    return stage_of(name) is not None and len(parts) in (4, 5) and parts[3] == "spec"


def crosses_stages(path: Path, name: str) -> bool:
    own, other = stage_of(".".join(path.with_suffix("").parts)), stage_of(name)
    return other is not None and other != own and not is_contract(name)


def contract_imports_stage_code(path: Path, name: str) -> bool:
    """A contract (``spec.py``) that imports stage code, its own or another's: another stage importing the
    contract would import that code through it."""
    return path.name == "spec.py" and stage_of(name) is not None and not is_contract(name)


def imports_a_stage(path: Path, name: str) -> bool:
    return path.parts[1] not in ("stages", "cli.py", "pytest_plugin.py") and stage_of(name) is not None


@pytest.mark.tor("TOR-ARC-001")
def test_a_stage_never_imports_another_stage():
    assert violations("harness/stages", crosses_stages) == []


@pytest.mark.tor("TOR-ARC-001")
def test_a_stage_contract_imports_no_stage_code():
    assert violations("harness/stages", contract_imports_stage_code) == []


@pytest.mark.tor("TOR-ARC-001")
def test_only_another_stages_contract_may_be_imported(tmp_path):
    """Probe: a stage may import another stage's ``spec`` module (or a name in it), nothing else of it; a contract
    may import no stage code."""
    stage = tmp_path / "harness" / "stages" / "explore"
    stage.mkdir(parents=True)
    (stage / "run.py").write_text("from harness.stages.memory import spec\nfrom harness.stages.met.spec import SPEC\n"
                                  "import harness.stages.wcet.spec\nfrom harness.stages.memory import run\n"
                                  "from harness.stages.met.spec_helpers import x\nfrom harness.stages import wcet\n"
                                  "from harness.stages.semantic.spec.inner import y\n")
    (stage / "spec.py").write_text("from harness.contract import StageSpec\nfrom harness.stages.wcet import spec\n"
                                   "from harness.stages.explore import run\n")
    assert violations("harness/stages", crosses_stages, tmp_path) == [
        "harness/stages/explore/run.py:4: imports harness.stages.memory.run",
        "harness/stages/explore/run.py:5: imports harness.stages.met.spec_helpers.x",
        "harness/stages/explore/run.py:6: imports harness.stages.wcet",
        "harness/stages/explore/run.py:7: imports harness.stages.semantic.spec.inner.y"]
    assert violations("harness/stages", contract_imports_stage_code, tmp_path) == [
        "harness/stages/explore/spec.py:3: imports harness.stages.explore.run"]


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


# --- modules: no import cycle, not even through a lazy import -------------------------------------------------


def module_of(name: str, root: Path = ROOT) -> str | None:
    """The module of the tree an imported name is (``harness.core.plan.Item`` -> ``harness.core.plan``, a package
    its ``__init__``), or None when no prefix of it is a file or package of the tree (a library)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        path = root.joinpath(*parts[:end])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts[:end])
    return None


def module_edges(root: Path = ROOT) -> dict[tuple[str, str], str]:
    """(importing module, imported module) -> the first ``file:line`` of it, over Assay's code; an import inside a
    function or under ``if TYPE_CHECKING`` counts: it runs, or states a dependency, all the same."""
    edges: dict[tuple[str, str], str] = {}
    for package in ("harness", "codegen", "wcet"):
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            source = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            for line, name in imported_modules(path, root):
                target = module_of(name, root)
                if target is not None and target != source:
                    edges.setdefault((source, target), f"{path.relative_to(root)}:{line}")
    return edges


def cycle_report(edges) -> list[list[str]]:
    return [[f"{a} -> {b} ({edges[a, b]})" for a in cycle for b in cycle if (a, b) in edges]
            for cycle in cycles(edges)]


@pytest.mark.tor("TOR-ARC-001")
def test_no_two_modules_import_each_other():
    """Each module reads above the ones it uses: what two modules both need is a module of its own."""
    assert cycle_report(module_edges()) == []


def test_the_module_cycle_check_sees_lazy_and_type_checking_imports(tmp_path):
    for folder in ("harness/models", "harness/stages/semantic", "codegen", "wcet"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "harness/models/__init__.py").write_text("")
    (tmp_path / "harness/models/zoo.py").write_text("def load(path):\n    from harness.models import user_files\n")
    (tmp_path / "harness/models/user_files.py").write_text("from harness.models.zoo import read_cached\n")
    (tmp_path / "harness/models/cache.py").write_text("import json\n")
    (tmp_path / "harness/stages/semantic/run.py").write_text("from . import sanitize\n")
    (tmp_path / "harness/stages/semantic/sanitize.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.stages.semantic.run import Settings\n")
    edges = module_edges(tmp_path)
    assert edges[("harness.models.zoo", "harness.models.user_files")] == "harness/models/zoo.py:2"
    assert ("harness.models.cache", "json") not in edges  # libraries are not modules of the tree
    assert cycles(edges) == [["harness.models.user_files", "harness.models.zoo"],
                             ["harness.stages.semantic.run", "harness.stages.semantic.sanitize"]]


# --- packages: every import the table of docs/architecture.md allows ------------------------------------------

ARCHITECTURE = ROOT / "docs" / "architecture.md"
HEADER = ["package", "what it holds", "may import"]
REGISTRIES = ("harness.models", "harness.generators", "harness.references", "harness.targets", "harness.runners")
# The table's words (what a backticked name means is in ``allowances``). A rule is (kind, pattern): "all" allows
# the package or module and everything in it, "front" the package's ``__init__`` alone (the names it defines,
# not one of its modules), "exact" that one module.
WORDS: dict[str, list[tuple[str, str]]] = {
    "nothing of Assay": [],
    "nothing of Assay but itself": [],
    "errors": [("all", "harness.errors")],
    "core": [("all", "harness.core")],
    "binary": [("all", "harness.binary")],
    "measurement": [("all", "harness.measurement")],
    "formal": [("all", "harness.formal")],
    "models": [("all", "harness.models")],
    "registries": [("all", package) for package in REGISTRIES],
    "registry lookups": [("front", package) for package in REGISTRIES if package != "harness.models"],
    "Assay's version": [("front", "harness")],
    "codegen's version": [("exact", "codegen"), ("exact", "codegen.__version__")],
}
NAME = r"[A-Za-z_]\w*"


def allowances(cell: str) -> list[tuple[str, str]]:
    """The rules of a "may import" cell: its words and backticked names, separated by commas, semicolons or
    "and"; what is in parentheses or bold explains and allows nothing. A backticked name is a package or
    module with all it holds; one not under ``harness``, ``codegen`` or ``wcet`` is under ``harness``
    (``runners.countplugin``), and ``<name>`` stands for any name (``stages.<name>.spec``)."""
    text = re.sub(r"\*\*[^*]*\*\*", "", cell)
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\s*\([^()]*\)", "", text)
    rules = []
    for word in (part.strip() for part in re.split(r",|;|\band\b", text)):
        if re.fullmatch(r"`[\w.<>]+`", word):
            name = word.strip("`")
            rules.append(("all", name if name.split(".")[0] in ("harness", "codegen", "wcet") else f"harness.{name}"))
        elif word in WORDS:
            rules += WORDS[word]
        elif word:
            raise ValueError(f"unknown word in the import table: {word!r} (in {cell!r})")
    return rules


def import_table(path: Path = ARCHITECTURE) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """(the packages a row names, the rules of what they may import), per row of the table."""
    rows, inside = [], False
    for line in path.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells == HEADER:
            inside = True
        elif inside and cells is None:
            break
        elif inside and not set(line) <= set("|-: "):
            packages = re.findall(r"`([\w.<>]+)`", cells[0])
            rows.append((packages, allowances(cells[2])))
    return rows


def pattern(name: str) -> str:
    return re.escape(name).replace(re.escape("<name>"), NAME)


def allowed(rule: tuple[str, str], module: str, root: Path = ROOT) -> bool:
    kind, name = rule
    if kind == "exact":
        return module == name
    if kind == "all":
        return re.fullmatch(rf"{pattern(name)}(\..+)?", module) is not None
    found = re.fullmatch(rf"(?P<package>{pattern(name)})(\.(?P<attribute>{NAME}))?", module)
    if found is None:
        return False
    attribute = found["attribute"]
    return attribute is None or module_of(module, root) == found["package"]  # a name its __init__ defines


def table_violations(root: Path = ROOT, table: Path = ARCHITECTURE) -> list[str]:
    """Every import of one package of another that the table's row for the importing package does not allow."""
    rows = import_table(table)
    found = []
    for package in ("harness", "codegen", "wcet"):
        for path in sorted((root / package).rglob("*.py")):
            source = package_of(".".join(path.relative_to(root).with_suffix("").parts))
            rules = [rules for names, rules in rows if any(re.fullmatch(pattern(name), source) for name in names)]
            for line, name in imported_modules(path, root):
                if top(name) not in ("harness", "codegen", "wcet") or package_of(name) == source:
                    continue
                where = f"{path.relative_to(root)}:{line}: {source} imports {name}"
                if not rules:
                    found.append(f"{where}, and the table has no row for {source}")
                elif not any(allowed(rule, name, root) for rule in rules[0]):
                    found.append(f"{where}, which its row does not allow")
    return found


@pytest.mark.tor("TOR-ARC-001")
def test_every_import_is_one_the_architecture_table_allows():
    """docs/architecture.md's table says what each package may import; the code does no more than that."""
    assert table_violations() == []


def test_the_table_check_reads_words_names_and_fronts(tmp_path):
    table = tmp_path / "architecture.md"
    table.write_text(
        "# A\n\n| package | what it holds | may import |\n|---|---|---|\n"
        "| `harness.errors` | errors | nothing of Assay |\n"
        "| `harness.core` | the core | registry lookups (`runners.host` is not one), errors, `runners.probed` |\n"
        "| `harness.stages.<name>` | a stage | core, `stages.<name>.spec`; **never another stage** |\n\nAfter.\n")
    for folder in ("harness/core", "harness/runners", "harness/targets", "harness/stages/met", "codegen", "wcet"):
        (tmp_path / folder).mkdir(parents=True)
    for module in ("harness/runners/__init__.py", "harness/runners/host.py", "harness/runners/probed.py",
                   "harness/targets/__init__.py", "harness/errors.py"):
        (tmp_path / module).write_text("")
    (tmp_path / "harness/lockfile.py").write_text("from harness.errors import ConfigError\n")
    (tmp_path / "harness/core/plan.py").write_text(
        "from harness import runners\nfrom harness.targets import get\nfrom harness.runners import probed\n"
        "from harness.errors import AssayError\ndef f():\n    from harness.runners import host\n")
    (tmp_path / "harness/stages/met/run.py").write_text(
        "from harness.core.plan import Item\nfrom harness.stages.wcet import spec\n"
        "from harness.stages.wcet import run\nfrom harness.stages.met import report\n")
    (tmp_path / "harness/errors.py").write_text("from wcet.errors import WcetError\n")
    assert table_violations(tmp_path, table) == [
        "harness/core/plan.py:6: harness.core imports harness.runners.host, which its row does not allow",
        "harness/errors.py:1: harness.errors imports wcet.errors.WcetError, which its row does not allow",
        "harness/lockfile.py:1: harness.lockfile imports harness.errors.ConfigError, and the table has no row for "
        "harness.lockfile",
        "harness/stages/met/run.py:3: harness.stages.met imports harness.stages.wcet.run, which its row does not "
        "allow"]
    table.write_text("| package | what it holds | may import |\n|---|---|---|\n| `harness.core` | x | the registry |\n")
    with pytest.raises(ValueError, match="unknown word in the import table: 'the registry'"):
        import_table(table)


def test_no_test_imports_the_tests_folder_as_a_package():
    """The tool-qualification run of ``assay evidence`` runs the tests outside the source tree, where ``tests`` is
    no package: a test module importing ``tests.<...>`` is a collection error there and fails the qualification
    (it did: ``tests.harness.stages.conftest``). Shared helpers travel as fixtures or ``*_support`` modules."""
    found = violations("tests", lambda path, name: top(name) == "tests")
    assert found == []
