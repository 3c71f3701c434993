"""The lock files agree with what they lock: pyproject.toml's ranges, the peers' tested closures."""

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from harness import lockfile
from harness.errors import ConfigError
from harness.generators import peers

ROOT = Path(__file__).resolve().parents[2]


def project_requirements() -> list[Requirement]:
    """Every requirement Assay's set-up installs: the dependencies and the ``dev`` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"] + project["optional-dependencies"]["dev"]]


def test_every_project_requirement_is_locked_at_a_version_its_range_admits():
    lock = lockfile.read(lockfile.LOCK)
    wrong = [f"{req}: {'not locked' if lockfile.canonical(req.name) not in lock else lock[lockfile.canonical(req.name)].version}"
             for req in project_requirements()
             if lockfile.canonical(req.name) not in lock
             or not req.specifier.contains(lock[lockfile.canonical(req.name)].version, prereleases=True)]
    assert wrong == [], "pyproject.toml and requirements.lock disagree: run bash .ci/lock (docs/configuration.md)"


@pytest.mark.parametrize("path", [lockfile.LOCK, *sorted((ROOT / "harness/generators/peers").glob("*.txt"))],
                         ids=lambda path: path.name)
def test_every_locked_package_has_hashes(path):
    assert [name for name, pin in lockfile.read(path).items() if not pin.hashes] == []


@pytest.mark.parametrize("name", peers.names())
def test_a_peer_lock_holds_exactly_its_tested_closure(name):
    """<name>.txt adds hashes to <name>.in; it must not re-resolve (another version is another configuration)."""
    tested = lockfile.read(peers.HERE / f"{name}.in")
    assert {package: pin.version for package, pin in tested.items()} == peers.PeerEnv(name).pins()


def test_a_requirement_that_is_not_an_exact_pin_is_refused_with_its_line(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\n# a comment\nscipy>=1.17\n")
    with pytest.raises(ConfigError, match=r"requirements.lock:4: not an exact pin 'name==version': scipy>=1.17"):
        lockfile.read(lock)


def test_hashes_belong_to_the_package_above_them_and_names_are_canonical(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("Typing_Extensions==4.16.0 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:"
                    + "b" * 64 + "\n    # via x\nsix==1.17.0 \\\n    --hash=sha256:" + "c" * 64 + "\n")
    assert lockfile.read(lock) == {
        "typing-extensions": lockfile.Pin("4.16.0", ("sha256:" + "a" * 64, "sha256:" + "b" * 64)),
        "six": lockfile.Pin("1.17.0", ("sha256:" + "c" * 64,))}


def test_a_hash_before_any_package_is_refused(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("    --hash=sha256:" + "a" * 64 + "\n")
    with pytest.raises(ConfigError, match="requirements.lock:1: a hash before any package"):
        lockfile.read(lock)
