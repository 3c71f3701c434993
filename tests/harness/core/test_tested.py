"""toolchains/tested.toml as data: each package's role and install group, its name per distribution, and the names
.ci/setup installs (``python -m harness.core.tested names``), read before any virtual environment exists."""

from __future__ import annotations

import subprocess
import sys

import pytest

from harness.core import tested

TOML = """
[python]
versions = ["3.11", "3.13"]
platform = "linux x86_64"

[packages]
gcc = { role = "results", install = "main" }
clang-19 = { role = "results", install = "test" }
chromium = { role = "test-only", install = "test", names = { "ubuntu 24.04" = "" } }
qemu-user = { role = "results", install = "main", names = { "other 1" = "qemu-user-static" } }

[tested."debian 12"]
gcc = "4:12.2.0-3"
"""


@pytest.fixture
def description(tmp_path):
    path = tmp_path / "tested.toml"
    path.write_text(TOML)
    return path


@pytest.mark.tor("TOR-CFG-001")
def test_roles_install_groups_and_names_per_distribution(description):
    found = tested.load(description)
    assert found.pythons == ("3.11", "3.13") and found.versions == {"debian 12": {"gcc": "4:12.2.0-3"}}
    assert [p.name for p in found.role(tested.RESULTS)] == ["gcc", "clang-19", "qemu-user"]
    assert [p.name for p in found.role(tested.TEST_ONLY)] == ["chromium"]
    assert found.packages["chromium"].name_on("debian 13") == "chromium"
    assert found.packages["chromium"].name_on("ubuntu 24.04") is None
    assert found.packages["qemu-user"].name_on("other 1") == "qemu-user-static"


def names(description, *options: str) -> str:
    done = subprocess.run([sys.executable, "-m", "harness.core.tested", "names", "--tested", str(description),
                           *options], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_the_names_setup_installs_by_group_and_distribution(description):
    """The first command installs only the main group; --test adds the rest; a package not packaged on a
    distribution is left out there, and another name is used where the distribution has one."""
    assert names(description, "--install", "main", "--distribution", "debian 12") == "gcc qemu-user"
    assert names(description, "--distribution", "debian 12") == "gcc clang-19 chromium qemu-user"
    assert names(description, "--distribution", "ubuntu 24.04") == "gcc clang-19 qemu-user"
    assert names(description, "--install", "main", "--distribution", "other 1") == "gcc qemu-user-static"


def test_the_repository_file_keeps_the_first_command_light():
    """What only the tests and the evidence package need is not installed by the main job's set-up."""
    main = names(tested.TESTED_FILE, "--install", "main", "--distribution", "debian 12").split()
    assert {"gcc", "gcc-arm-none-eabi", "qemu-system-arm", "bubblewrap"} <= set(main)
    assert not {"chromium", "chromium-driver", "openssh-server", "clang-19", "llvm-19"} & set(main)


def test_distribution_reads_os_release(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 13 (trixie)"\nID=debian\nVERSION_ID="13"\n')
    assert tested.distribution(release) == "debian 13"
    release.write_text('ID=ubuntu\nVERSION_ID="24.04"\n')
    assert tested.distribution(release) == "ubuntu 24.04"
    assert tested.distribution(tmp_path / "none") == "unknown"
