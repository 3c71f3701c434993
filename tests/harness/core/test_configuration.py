"""The running configuration against the tested one (``assay doctor``): one difference per mismatch, notes for
what is built on first use, clear errors for a malformed tested.toml, and Assay's identity in or out of git."""

from __future__ import annotations

import hashlib
import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import configuration
from harness.core import tested as tested_file
from harness.core.configuration import Difference
from harness.digests import digest
from harness.errors import ConfigError
from harness.generators import peers
from harness.runners import countplugin as plugin

REAL_LOCK = Path(configuration.LOCK)
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def lock_of_this_environment(path: Path, change: str | None = None) -> Path:
    """A lock pinning every installed distribution at its version (``change``: that one at 0.0.1 instead)."""
    installed = configuration.installed_distributions()
    lines = [f"{name}=={'0.0.1' if name == change else version}" for name, version in sorted(installed.items())
             if name not in configuration.NOT_LOCKED]
    path.write_text("# test lock\n" + "\n".join(lines) + "\n")
    return path


def write_tested(path: Path, python: str | None = None, system: str | None = None, where: str = "debian 12",
                 roles: dict[str, str] | None = None, **versions: str) -> Path:
    """A tested.toml for the running interpreter and platform (unless given), its ``versions`` (keyword names with
    ``_`` for ``-``) tested on ``where``, each package ``results`` and installed by ``main`` unless ``roles`` names
    it ``test-only`` (``"test-only"``) or installed only by --test (``"results test"``)."""
    python = python or RUNNING
    system = system or f"{sys.platform} {platform.machine()}"
    names = {name.replace("_", "-"): version for name, version in versions.items()}
    rows = ""
    for name in names:
        role, _, install = (roles or {}).get(name, "results").partition(" ")
        rows += f'{name} = {{ role = "{role}", install = "{install or "main"}" }}\n'
    tested = "".join(f'{name} = "{version}"\n' for name, version in names.items())
    path.write_text(f'[python]\nversions = ["{python}"]\nplatform = "{system}"\n\n[packages]\n{rows}\n'
                    f'[tested."{where}"]\n{tested}')
    return path


@pytest.mark.tor("TOR-CFG-001")
def test_a_locked_version_changed_is_one_difference_naming_the_package(tmp_path):
    lock = lock_of_this_environment(tmp_path / "requirements.lock")
    assert configuration.python_packages(lock) == []
    name, version = next((n, v) for n, v in sorted(configuration.installed_distributions().items())
                         if n not in configuration.NOT_LOCKED)
    lock_of_this_environment(lock, change=name)
    (difference,) = configuration.python_packages(lock)
    assert difference == Difference(name, f"0.0.1 in {lock}", f"{version} installed")
    assert str(difference) == f"{name}: {version} installed, 0.0.1 in {lock}"


@pytest.mark.tor("TOR-CFG-001")
def test_a_copy_of_requirements_lock_with_one_version_changed_adds_one_line(tmp_path):
    """Whatever this environment is, changing pycparser's pin adds exactly one line, and it names pycparser."""
    if not REAL_LOCK.is_file():
        pytest.skip("no requirements.lock beside the sources")
    lock = tmp_path / "requirements.lock"
    shutil.copyfile(REAL_LOCK, lock)
    before = {str(d) for d in configuration.python_packages(lock)}
    text = lock.read_text()
    pinned = next(line for line in text.splitlines() if line.startswith("pycparser=="))
    lock.write_text(text.replace(pinned, "pycparser==0.0.1 \\"))
    added = [str(d) for d in configuration.python_packages(lock) if str(d) not in before]
    assert len(added) == 1 and added[0].startswith("pycparser: ") and "0.0.1 in " in added[0], added


def test_missing_and_unlocked_distributions_are_differences(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("alpha==1.0 \\\n    --hash=sha256:" + "0" * 64 + "\nbeta==2.0\n")
    found = configuration.python_packages(lock, installed={"alpha": "1.0", "gamma": "3.0", "pip": "26.0",
                                                           "assay": "0.1.0"})
    assert [str(d) for d in found] == [f"beta: not installed, 2.0 in {lock}", f"gamma: 3.0 installed, not in {lock}"]


def test_no_lock_file_is_one_difference(tmp_path):
    (difference,) = configuration.python_packages(tmp_path / "requirements.lock")
    assert "not found" in str(difference) and "requirements.lock" in str(difference)


@pytest.mark.tor("TOR-CFG-001")
def test_a_wrong_gcc_version_is_one_line_naming_gcc(tmp_path):
    tested = configuration.load_tested(write_tested(tmp_path / "tested.toml", gcc="4:12.2.0-3",
                                                   libc6_dev="2.36-9+deb12u14"))
    found, notes = configuration.debian_packages(tested, {"gcc": "4:12.2.0-4", "libc6-dev": "2.36-9+deb12u14"},
                                                 "debian 12")
    assert [str(d) for d in found] == [f"gcc: 4:12.2.0-4 installed, 4:12.2.0-3 in {tmp_path / 'tested.toml'}"]
    assert notes == []


@pytest.mark.tor("TOR-CFG-001")
def test_a_test_only_package_that_moved_is_a_note_not_a_difference(tmp_path):
    """The failure of 2026-12-06: Debian's security archive moved chromium on; that changes no result."""
    tested = configuration.load_tested(write_tested(
        tmp_path / "tested.toml", roles={"chromium": "test-only"}, gcc="4:12.2.0-3",
        chromium="156.0.8078.108-1~deb12u1"))
    found, notes = configuration.debian_packages(
        tested, {"gcc": "4:12.2.0-3", "chromium": "156.0.8078.114-1~deb12u1"}, "debian 12")
    assert found == []
    assert notes == [f"chromium (test-only: cannot change a result): 156.0.8078.114-1~deb12u1 installed, "
                     f"156.0.8078.108-1~deb12u1 in {tmp_path / 'tested.toml'}"]


@pytest.mark.tor("TOR-CFG-001")
def test_on_a_distribution_without_tested_versions_results_packages_are_differences(tmp_path):
    tested = configuration.load_tested(write_tested(tmp_path / "tested.toml", roles={"graphviz": "test-only"},
                                                   gcc="4:12.2.0-3", graphviz="2.42"))
    found, notes = configuration.debian_packages(tested, {"gcc": "4:14.2.0-1", "graphviz": "2.42.4"}, "debian 13")
    assert [str(d) for d in found] == [f"gcc: 4:14.2.0-1 installed, no tested version for debian 13 in "
                                       f"{tmp_path / 'tested.toml'} (tested on debian 12)"]
    assert len(notes) == 1 and notes[0].startswith("graphviz (test-only: cannot change a result): 2.42.4 installed")


def test_missing_packages_a_main_results_one_is_a_difference_a_test_one_a_note(tmp_path):
    tested = configuration.load_tested(write_tested(tmp_path / "tested.toml", roles={"clang-19": "results test"},
                                                   gcc="1", clang_19="2"))
    found, notes = configuration.debian_packages(tested, {}, "debian 12")
    assert [str(d) for d in found] == [f"gcc: not installed, 1 in {tmp_path / 'tested.toml'}"]
    assert notes == ["clang-19: not installed ('bash .ci/setup --test' installs it)"]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="not a Debian system")
def test_an_unknown_debian_package_is_a_line_not_a_crash(tmp_path):
    path = write_tested(tmp_path / "tested.toml", where=tested_file.distribution(), assay_no_such_package="1.0")
    (difference,), _, _ = configuration.compare(lock_of_this_environment(tmp_path / "lock"), path)
    assert str(difference) == f"assay-no-such-package: not installed, 1.0 in {tmp_path / 'tested.toml'}"


def test_without_dpkg_query_the_debian_packages_are_one_line(tmp_path, monkeypatch):
    tested = configuration.load_tested(write_tested(tmp_path / "tested.toml", gcc="1", graphviz="2"))
    monkeypatch.setenv("PATH", str(tmp_path))
    installed = tested_file.machine_versions(tested, "debian 12")
    (difference,), notes = configuration.debian_packages(tested, installed, "debian 12")
    assert installed is None and notes == []
    assert str(difference).startswith("Debian packages: not checked (no dpkg-query") and "2 in " in str(difference)


@pytest.mark.tor("TOR-CFG-001")
def test_python_line_and_platform(tmp_path):
    tested = configuration.load_tested(write_tested(tmp_path / "tested.toml", python="3.11", system="linux x86_64"))
    assert configuration.interpreter(tested, "3.11", "linux x86_64") == []
    found = [str(d) for d in configuration.interpreter(tested, "3.10", "linux aarch64")]
    assert found == [f"python: 3.10 running, 3.11 in {tested.source}",
                     f"platform: linux aarch64 running, linux x86_64 in {tested.source}"]


def test_the_repository_tested_toml_is_valid():
    tested = configuration.load_tested()
    assert tested.pythons == ("3.11", "3.12", "3.13") and tested.platform == "linux x86_64"
    assert tested.source == "toolchains/tested.toml"
    assert {"gcc", "gcc-arm-none-eabi", "qemu-system-arm", "clang-19", "lp-solve"} <= {
        p.name for p in tested.role("results")}
    # libxml2 and libxslt1.1 only parse OTAWA's XML and move with every Debian security release: test-only
    assert {"chromium", "chromium-driver", "openssh-server", "graphviz", "libsqlite3-0", "libxml2", "libxslt1.1"} == {
        p.name for p in tested.role("test-only")}
    assert {p.name for p in tested.packages.values() if p.install == "otawa"} == {  # OTAWA's runtime libraries
        "lp-solve", "libxml2", "libxslt1.1", "libsqlite3-0"}
    assert set(tested.versions["debian 12"]) == set(tested.packages)


@pytest.mark.tor("TOR-CFG-001")
@pytest.mark.parametrize("text, key", [
    ("[python\n", "not TOML"),
    ('[packages]\n[tested]\n', "missing table [python]"),
    ('[python]\nversions = ["3"]\nplatform = "linux x86_64"\n[packages]\n[tested]\n', "'python.versions'"),
    ('[python]\nversions = ["3.11"]\n[packages]\n[tested]\n', "'python.platform'"),
    ('[python]\nversions = ["3.11"]\nplatform = "l"\n[packages]\ngcc = { role = "x", install = "main" }\n'
     '[tested]\n', "'packages.gcc.role'"),
    ('[python]\nversions = ["3.11"]\nplatform = "l"\n[packages]\ngcc = { role = "results", install = "main" }\n'
     '[tested."debian 12"]\ngcc = 12\n', "'tested.\"debian 12\".gcc'"),
    ('[python]\nversions = ["3.11"]\nplatform = "l"\n[packages]\n[tested."debian 12"]\ngcc = "1"\n',
     "names no package"),
    ('[python]\nversions = ["3.11"]\nplatform = "l"\n[packages]\n[tested]\n[extra]\n', "unknown key 'extra'"),
    ('packages = "gcc"\n[python]\nversions = ["3.11"]\nplatform = "l"\n[tested]\n', "'packages' must be a table"),
])
def test_a_malformed_tested_toml_is_a_config_error_naming_file_and_key(tmp_path, text, key):
    path = tmp_path / "tested.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as raised:
        configuration.load_tested(path)
    assert str(raised.value).startswith(f"{path}: ") and key in str(raised.value)


def test_a_missing_tested_toml_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the tested configuration"):
        configuration.load_tested(tmp_path / "nope.toml")


def test_peer_freeze_against_its_lock():
    pins = {"numpy": "1.26.4", "Typing_Extensions": "4.5.0", "setuptools": "70.0"}
    freeze = ["numpy==1.26.4", "typing-extensions==4.6.0", "extra==1.0"]  # pip freeze does not list setuptools
    found = [str(d) for d in configuration.freeze_differences("keras2c", freeze, pins, "keras2c.txt")]
    assert found == ["typing-extensions (peer keras2c): 4.6.0 installed, 4.5.0 in keras2c.txt",
                     "extra (peer keras2c): 1.0 installed, not in keras2c.txt"]


@pytest.mark.tor("TOR-CFG-001")
def test_a_built_peer_whose_freeze_differs_from_its_lock(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path))
    name, *others = peers.names()
    env = peers.PeerEnv(name)
    pins = env.pins()
    changed = sorted(pins)[0]
    env.python.parent.mkdir(parents=True)
    env.python.touch()  # a stamp counts only beside its interpreter
    freeze = [f"{package}=={'0.0.1' if package == changed else version}" for package, version in pins.items()]
    (env.directory / peers.STAMP).write_text(json.dumps({"pins_sha256": digest(pins), "freeze": freeze}))
    differences, notes = configuration.peer_environments()
    assert [str(d) for d in differences] == [
        f"{changed} (peer {name}): 0.0.1 installed, {pins[changed]} in {configuration.shown(env.requirements)}"]
    assert notes == [f"peer {other}: not built (built on first use, or assay peers setup {other})" for other in others]


def test_the_qemu_plugin_not_built_is_a_note(tmp_path):
    (note,) = configuration.qemu_plugin(tmp_path)
    assert note.startswith("QEMU counting plugin: not built (built on first use")
    (tmp_path / "assay_count-0123456789abcdef.so").touch()
    (note,) = configuration.qemu_plugin(tmp_path)
    assert "1 build(s) of another assay_count.c" in note
    plugin.library_path(tmp_path).touch()
    assert configuration.qemu_plugin(tmp_path) == []


def sources(root: Path) -> Path:
    for name in ("harness", "codegen", "wcet", "toolchains"):
        (root / name).mkdir(parents=True)
        (root / name / "a.py").write_text(f"# {name}\n")
    return root


@pytest.mark.tor("TOR-CFG-001")
def test_identity_outside_git_is_a_digest_of_the_sources(tmp_path):
    root = sources(tmp_path / "tree")
    found = configuration.identity(root, root / "requirements.lock")
    assert found["commit"] is None and found["dirty"] is None and found["requirements_lock_sha256"] is None
    assert len(found["sources_sha256"]) == 64
    (root / "wcet" / "a.py").write_text("# changed\n")
    configuration.tree_digest.cache_clear()
    assert configuration.identity(root, root / "requirements.lock")["sources_sha256"] != found["sources_sha256"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_identity_in_git_is_the_commit_and_whether_the_tree_changed(tmp_path):
    root = sources(tmp_path / "tree")
    (root / "requirements.lock").write_text("six==1.17.0\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    clean = configuration.identity(root, root / "requirements.lock")
    assert clean["commit"] == head and clean["dirty"] is False and clean["sources_sha256"] is None
    assert clean["requirements_lock_sha256"] == hashlib.sha256(b"six==1.17.0\n").hexdigest()
    (root / "harness" / "a.py").write_text("# changed\n")
    changed = configuration.identity(root, root / "requirements.lock")
    assert changed["commit"] == head and changed["dirty"] is True and len(changed["sources_sha256"]) == 64


@pytest.mark.tor("TOR-CFG-001")
def test_report_of_a_tested_configuration_and_of_an_untested_one(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_PEERS_DIR", str(tmp_path / "peers"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lock = lock_of_this_environment(tmp_path / "requirements.lock")
    tested = write_tested(tmp_path / "tested.toml")
    report = configuration.report(lock, tested)
    assert json.loads(json.dumps(report)) == report
    assert report["schema"] == "assay-doctor/1" and report["verdict"] == "tested" and report["differences"] == []
    assert any(note.startswith("QEMU counting plugin: not built") for note in report["notes"])
    assert report["assay"]["requirements_lock_sha256"] is not None
    assert configuration.report(lock, tested) is report  # once per process

    wrong = write_tested(tmp_path / "wrong.toml", python="2.7")
    untested = configuration.report(lock, wrong)
    assert untested["verdict"] == "untested"
    assert untested["differences"] == [f"python: {RUNNING} running, 2.7 in {wrong}"]
    assert untested["qualified_by"] is None
