import pytest

from harness import targets
from harness.errors import ConfigError


def test_host_profile_loads_with_o0_default():
    profile = targets.get("host")
    assert profile.flags()[0] == "-O0"
    assert "-ffp-contract=off" in profile.flags("-O3")


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown target 'z80'; known targets: .*host"):
        targets.get("z80")


def test_invalid_profiles_are_refused_with_the_key(tmp_path):
    good = targets.get("host").path.read_text()
    bad = tmp_path / "host.toml"
    bad.write_text(good.replace('compiler = "gcc"\n', ""))
    with pytest.raises(ConfigError, match="missing key 'compiler'"):
        targets.load_profile(bad)
    bad.write_text(good + 'colour = "blue"\n')
    with pytest.raises(ConfigError, match="unknown key"):
        targets.load_profile(bad)
    bad.write_text(good.replace('default_opt = "-O0"', 'default_opt = "-Ofast"'))
    with pytest.raises(ConfigError, match="default_opt"):
        targets.load_profile(bad)


def test_missing_compiler_names_the_package(tmp_path):
    text = targets.get("host").path.read_text().replace('compiler = "gcc"', 'compiler = "no-such-cc"')
    path = tmp_path / "host.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="install the Debian package 'gcc'"):
        targets.load_profile(path).compiler_path()
