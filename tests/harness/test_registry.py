"""The one registry mechanism: entry-point groups ``assay.<kind>``, read by ``harness.registry`` (and by
``wcet.timing`` for timing models). Assay's built-ins are declared in ``pyproject.toml`` as a plugin's are;
plugins here are fake installed distributions (a ``*.dist-info`` folder and a module) on a path of their own,
given to ``assay`` through PYTHONPATH, Assay itself unchanged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from harness import generators, registry, runners, targets
from harness.errors import ConfigError
from wcet import timing
from wcet.errors import ConfigurationError

from plugin_support import install_distribution

ROOT = Path(__file__).resolve().parents[2]


def install(site: Path, distribution: str, entry_points: dict[str, dict[str, str]], modules: dict[str, str]) -> Path:
    """A fake installed distribution in ``site``: its metadata, its entry points, its modules (name -> source)."""
    return install_distribution(site, distribution, entry_points,
                                {f"{module}.py": source for module, source in modules.items()})


def clear_caches() -> None:
    registry._groups.cache_clear()
    registry.entries.cache_clear()
    timing._entries.cache_clear()


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on this process's sys.path for fake distributions; the registries read afresh around the test."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    clear_caches()
    yield folder
    clear_caches()


def assay(*args, site: Path, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m harness.cli ARGS`` in a process that finds the distributions in ``site``, run in ``site`` unless
    told (``python -m`` puts its folder first on sys.path: a build's ``assay.egg-info`` in the checkout would hide
    the installed metadata)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd or site, timeout=900)


# --- Assay's own built-ins ------------------------------------------------------------------------------------


def test_assay_declares_its_built_ins_as_a_plugin_would_and_each_loads():
    """What the installed metadata says is what pyproject.toml says (else: pip install -e .), and every
    registered object exists."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    groups = {group.removeprefix(registry.PREFIX): entries for group, entries in declared.items()
              if group.startswith(registry.PREFIX)}
    assert set(groups) == {"generators", "references", "runners", "model_formats", "commands", "timing_models",
                           "targets"}
    for kind, entries in groups.items():
        assert {name: entry.value for name, entry in registry.entries(kind).items()} == entries, \
            "installed metadata is stale: pip install --no-deps --no-build-isolation -e ."
        for name in entries:
            assert registry.load(kind, name) is not None
    assert timing.names() == sorted(groups["timing_models"])


def test_every_runner_declares_known_capabilities():
    for kind in runners.kinds():
        assert runners.for_kind(kind).CAPABILITIES <= runners.CAPABILITIES, kind
    with pytest.raises(ValueError, match="unknown runner capability 'flies'"):
        runners.capable(type("Profile", (), {"kind": "host"})(), "flies")


# --- one name, two distributions ------------------------------------------------------------------------------


def test_a_name_two_distributions_declare_is_an_error_naming_both(site):
    install(site, "assay-clash", {"assay.generators": {"assay-v2": "assay_clash:Other"},
                                  "assay.timing_models": {"trivial": "assay_clash:Other"}},
            {"assay_clash": "class Other:\n    pass\n"})
    with pytest.raises(ConfigError) as error:
        generators.get("assay-v2")
    message = str(error.value)
    assert "generator 'assay-v2' is registered twice" in message and "\n" not in message
    assert "assay 0.1.0 (harness.generators.assay_v2:AssayV2)" in message
    assert "assay-clash 1.0 (assay_clash:Other)" in message
    with pytest.raises(ConfigurationError, match="timing model 'trivial' is registered twice") as error:
        timing.get("trivial")
    assert "assay 0.1.0 (wcet.timing:Trivial)" in str(error.value)
    assert "assay-clash 1.0 (assay_clash:Other)" in str(error.value)


def test_a_generator_without_the_interface_is_refused_in_one_line(site):
    """A class with version, variants and generate only (no Adapter): refused when named, not an
    AttributeError on every item."""
    install(site, "assay-bare", {"assay.generators": {"bare": "assay_bare:Bare"}},
            {"assay_bare": "class Bare:\n    def version(self):\n        return '1'\n"
                           "    def variants(self, model):\n        return ['c']\n"
                           "    def generate(self, model, variant, out_dir):\n        raise NotImplementedError\n"})
    assert "bare" in generators.names()
    with pytest.raises(ConfigError, match=r"generator 'bare' of assay-bare 1.0 \(assay_bare:Bare\) has no "
                                          r"identity\(\); a generator subclasses harness.generators.Adapter"):
        generators.get("bare")


# --- plugins of every kind, in process ----------------------------------------------------------------------------


def test_a_plugin_runner_kind_declares_its_capabilities(site):
    install(site, "assay-sim", {"assay.runners": {"sim": "assay_sim"}},
            {"assay_sim": "CAPABILITIES = frozenset({'emulated', 'counts-instructions'})\n"
                          "def build(code, build_dir, profile, opt=None):\n    raise NotImplementedError\n"
                          "def run(built, inputs, timeout=300.0):\n    raise NotImplementedError\n"})
    assert "sim" in runners.kinds()
    profile = type("Profile", (), {"kind": "sim"})()
    assert runners.capable(profile, runners.COUNTS_INSTRUCTIONS) and runners.capable(profile, runners.EMULATED)
    assert not runners.capable(profile, runners.PAINTS_STACK)


UNIT_MODELS = '''"""Two timing models: one cycle per instruction (times ``k``), declared as Assay's are and as a frozen dataclass
(the form before issue 45, which docs/recipes.md showed)."""

from dataclasses import dataclass
from typing import ClassVar

from wcet.errors import ConfigurationError
from wcet.timing import TimingModel


class Unit(TimingModel):
    name: ClassVar[str] = "unit"
    generic: ClassVar[bool] = True
    k: int = 1
    floor: int = 0

    def __post_init__(self):
        if self.k < 1:
            raise ConfigurationError("unit timing: k must be >= 1")

    def cycles(self, insn, executed=None) -> int:
        return max(self.k, self.floor)


@dataclass(frozen=True)
class OldUnit(TimingModel):
    name: ClassVar[str] = "old-unit"
    k: int = 1

    def cycles(self, insn, executed=None) -> int:
        return self.k
'''


def test_a_plugin_timing_model_declares_its_parameters_with_or_without_dataclasses(site):
    install(site, "assay-unit", {"assay.timing_models": {"unit": "assay_unit:Unit",
                                                         "old-unit": "assay_unit:OldUnit"}},
            {"assay_unit": UNIT_MODELS})
    assert {"unit", "old-unit"} <= set(timing.names())
    for name in ("unit", "old-unit"):
        model = timing.get(name, k="3")
        assert model.cycles(None) == 3 and model.params()["k"] == 3 and model == timing.get(name, k=3)
        assert hash(model) == hash(timing.get(name, k=3)) and model != timing.get(name)
        assert model.describe() == f"{name} (k=3{', floor=0' if name == 'unit' else ''})"
        with pytest.raises(AttributeError):
            model.k = 4
        with pytest.raises(ConfigurationError, match=f"timing model {name} has no option speed; its options: k"):
            timing.get(name, speed=2)
    assert repr(timing.get("unit", floor=7)) == "Unit(k=1, floor=7)" and timing.get("unit", floor=7).cycles(None) == 7
    with pytest.raises(ConfigurationError, match="k must be >= 1"):
        timing.get("unit", k=0)


def test_a_plugin_model_format_loads_its_suffix(site, tmp_path):
    """``.onnxz``: an ONNX file under another suffix, copied into the cache folder and read there."""
    import onnx
    from onnx import TensorProto, helper

    from harness.models import user_files, zoo

    install(site, "assay-onnxz", {"assay.model_formats": {".onnxz": "assay_onnxz:convert"}},
            {"assay_onnxz": "import shutil\nfrom harness import registry\n\n"
                            "def convert(path, folder):\n"
                            "    shutil.copy(path, folder / 'model.onnx')\n"
                            "    return registry.load('model_formats', '.onnx')(folder / 'model.onnx', folder)\n"})
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path / "relu.onnxz"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    assert ".onnxz" in user_files.suffixes()
    model = zoo.load(path, cache_dir=tmp_path / "cache")
    assert model.input_shape == (4,) and Path(model.files["onnx"]).parent.parent == tmp_path / "cache" / "user"


def test_a_plugin_folder_of_target_profiles_adds_its_targets_and_a_name_in_two_folders_is_an_error(site):
    """A profile of a package's folder extends one of Assay's (and finds its linker script in toolchains/); a kind of
    another package's may take the QEMU kinds' keys; the same name in two folders is an error naming both files."""
    install(site, "assay-boards", {"assay.targets": {"assay-boards": "assay_boards:PROFILES"}},
            {"assay_boards": "from pathlib import Path\nPROFILES = Path(__file__).with_name('boards')\n"})
    boards = site / "boards"
    boards.mkdir()
    (boards / "m4f-ext-small.toml").write_text('extends = "cortex-m4f-ext"\nname = "m4f-ext-small"\n')
    profile = targets.get("m4f-ext-small")
    assert profile.path == boards / "m4f-ext-small.toml" and "m4f-ext-small" in targets.names()
    assert profile.linker_script == targets.get("cortex-m4f-ext").linker_script
    assert profile.annotation_dirs() == (targets.PROFILE_DIR / "annotations", boards / "annotations")
    assert targets.get("cortex-m4f").annotation_dirs() == (targets.PROFILE_DIR / "annotations",)

    install(site, "assay-sim2", {"assay.runners": {"sim2": "assay_sim2"}},
            {"assay_sim2": "CAPABILITIES = frozenset()\n"})
    clear_caches()
    (boards / "simulated.toml").write_text('extends = "host"\nname = "simulated"\nkind = "sim2"\n'
                                           'emulator = "my-simulator"\nemulator_package = "my-simulator"\n')
    assert targets.get("simulated").emulator == "my-simulator"

    (boards / "host.toml").write_text('extends = "cortex-m4f"\nname = "host"\n')
    with pytest.raises(ConfigError, match=f"target 'host' is defined twice: {targets.PROFILE_DIR / 'host.toml'} "
                                          f"and {boards / 'host.toml'}; remove one of them"):
        targets.get("cortex-m4f")


def test_a_target_folder_entry_point_that_is_no_folder_is_refused(site):
    install(site, "assay-nofolder", {"assay.targets": {"nofolder": "assay_nofolder:PROFILES"}},
            {"assay_nofolder": "PROFILES = 42\n"})
    with pytest.raises(ConfigError, match=r"target folder 'nofolder' of assay-nofolder 1.0 "
                                          r"\(assay_nofolder:PROFILES\) is not a folder: 42"):
        targets.names()


# --- a plugin generator, reference and command run by `assay`, unchanged -------------------------------------------

WRAPPED = '''"""A generator that hands over C generated elsewhere (a dir: folder), a reference that is ONNX Runtime under
another name, and a command that lists the generators."""

from harness import generators, references
from harness.generators import Adapter

FOLDER = {folder!r}


class Wrapped(Adapter):
    def __init__(self):
        self.prebuilt = generators.get(generators.PREBUILT_PREFIX + FOLDER)

    def version(self):
        return "1.0"

    def variants(self, model):
        return ["c"]

    def generate(self, model, variant, out_dir):
        return self.prebuilt.generate(model, "prebuilt", out_dir)

    def identity(self, model, variant):
        return {{**super().identity(model, variant), "c": self.prebuilt.identity(model, "prebuilt")}}


class SameAsOnnxRuntime:
    def supports(self, model):
        return references.get("onnxruntime").supports(model)

    def run(self, model, inputs):
        return references.get("onnxruntime").run(model, inputs)


def add_command(subparsers):
    parser = subparsers.add_parser("generators", help="list the generators")
    parser.set_defaults(func=lambda args: print(" ".join(generators.names())) or 0)
'''


def test_a_plugin_generator_reference_and_command_run_in_assay_unchanged(tmp_path):
    work, c = tmp_path / "work", tmp_path / "c"
    made = assay("generate", "--model", "acas-reg50", "--out", str(c), "--work", str(work), site=tmp_path)
    assert made.returncode == 0, made.stderr
    site = install(tmp_path / "site", "assay-wrapped",
                   {"assay.generators": {"wrapped-c": "assay_wrapped:Wrapped"},
                    "assay.references": {"ort-again": "assay_wrapped:SameAsOnnxRuntime"},
                    "assay.commands": {"generators": "assay_wrapped"}},
                   {"assay_wrapped": WRAPPED.format(folder=str(c))})
    listed = assay("generators", site=site)
    assert listed.returncode == 0 and "wrapped-c" in listed.stdout.split() and "assay-v2" in listed.stdout.split()
    assert "generators" in assay("--help", site=site).stdout

    out = tmp_path / "out"
    result = assay("semantic", "--models", "acas-reg50", "--generators", "wrapped-c", "--references",
                   "onnxruntime,ort-again", "--targets", "host", "--inputs", "5", "--quiet", "--out", str(out),
                   "--work", str(work), site=site)
    assert result.returncode == 0, result.stdout + result.stderr
    records = json.loads((out / "results.json").read_text())["records"]
    assert sorted((r["generator"], r["variant"], r["reference"], r["verdict"]) for r in records) == [
        ("wrapped-c", "c", "onnxruntime", "pass"), ("wrapped-c", "c", "ort-again", "pass")]
    assert {r["provenance"]["generator_version"] for r in records} == {"1.0"}


# --- the generator recipe of docs/architecture.md, exactly as docs/recipes.md writes it (the others: test_recipes.py)


def recipe() -> tuple[str, dict[str, dict[str, str]]]:
    """The module and the entry points of docs/recipes.md's "A generator, in full"."""
    text = (ROOT / "docs" / "recipes.md").read_text().split("## A generator, in full", 1)[1]
    module = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    declared = tomllib.loads(re.search(r"```toml\n(.*?)```", text, re.S).group(1))
    return module, declared["project"]["entry-points"]


@pytest.mark.tor("TOR-RES-001")
def test_the_generator_recipe_runs_and_an_edited_option_recomputes(tmp_path):
    module, entry_points = recipe()
    (name, value), = entry_points["assay.generators"].items()
    site = install(tmp_path / "site", "assay-mygen", entry_points, {value.split(":")[0]: module})
    source = site / f"{value.split(':')[0]}.py"
    out, work = tmp_path / "out", tmp_path / "work"

    def campaign() -> dict[tuple, dict]:
        result = assay("semantic", "--models", "acas-reg50", "--generators", name, "--references", "onnxruntime",
                       "--targets", "host", "--inputs", "5", "--quiet", "--out", str(out), "--work", str(work),
                       site=site)
        assert result.returncode == 0, result.stdout + result.stderr
        return {(r["variant"], r["reference"]): r for r in json.loads((out / "results.json").read_text())["records"]}

    first = campaign()
    assert sorted(first) == [("keras", "onnxruntime"), ("onnx", "onnxruntime")]
    assert all(r["generator"] == name and r["verdict"] == "pass" for r in first.values())
    manifest = json.loads(next(work.rglob("manifest.json")).read_text())
    assert manifest["generator"]["name"] == name and manifest["generator"]["options"]["strategy"] == "v2"

    assert campaign() == first  # unchanged: every record reused as stored

    source.write_text(source.read_text().replace('"strategy": "v2"', '"strategy": "v3"'))
    edited = campaign()
    for key, record in edited.items():
        assert record["verdict"] == "pass" and record["fingerprint"] != first[key]["fingerprint"]
        assert record["provenance"]["sources_sha256"] != first[key]["provenance"]["sources_sha256"]
    manifest = json.loads(next(work.rglob("manifest.json")).read_text())
    assert manifest["generator"]["name"] == name and manifest["generator"]["options"]["strategy"] == "v3"
