import re

import pytest

from harness import targets
from harness.errors import ConfigError
from harness.runners import RunError


def test_host_profile_loads_with_o0_default():
    profile = targets.get("host")
    assert profile.flags()[0] == "-O0"
    assert "-ffp-contract=off" in profile.flags("-O3")


@pytest.mark.tor("TOR-CLI-002")
def test_unknown_target_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown target 'z80'; known targets: .*host"):
        targets.get("z80")


def test_the_tested_configuration_beside_the_profiles_is_not_a_target():
    assert (targets.PROFILE_DIR / "tested.toml").is_file() and "tested" not in targets.names()
    with pytest.raises(ConfigError, match="unknown target 'tested'"):
        targets.get("tested")


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


def test_cxx_compiler_comes_with_its_package_and_a_missing_one_names_it(tmp_path):
    assert (targets.get("host").cxx_compiler, targets.get("cortex-m4f-ext").cxx_compiler) == \
        ("g++", "arm-none-eabi-g++")  # cortex-m4f-ext extends cortex-m4f
    with pytest.raises(ConfigError, match="'cxx_compiler' and 'cxx_package' go together"):
        targets.load_profile(_edited(tmp_path, "host", 'cxx_package = "g++"\n', ""))
    profile = targets.load_profile(_edited(tmp_path, "host", 'cxx_compiler = "g++"', 'cxx_compiler = "no-such-c++"'))
    with pytest.raises(ConfigError, match=re.escape("C++ compiler 'no-such-c++' not found; install the Debian "
                                                    "package 'g++'")):
        profile.cxx_compiler_path()


def test_missing_compiler_names_the_package(tmp_path):
    text = targets.get("host").path.read_text().replace('compiler = "gcc"', 'compiler = "no-such-cc"')
    path = tmp_path / "host.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="install the Debian package 'gcc'"):
        targets.load_profile(path).compiler_path()


@pytest.mark.parametrize("name,kind", [("arm7tdmi", "qemu-user"), ("cortex-a15", "qemu-user"),
                                       ("cortex-m4f", "qemu-system")])
def test_arm_profiles_load_with_o0_default_and_no_fp_contraction(name, kind):
    profile = targets.get(name)
    assert profile.kind == kind
    assert profile.flags()[0] == "-O0" and "-O3" in profile.opt_levels
    assert "-ffp-contract=off" in profile.flags("-O3")
    assert profile.emulator and profile.emulator_package and profile.runtime_package


def test_arm_memory_regions_are_read_in_bytes():
    lpc = targets.get("arm7tdmi")
    assert (lpc.region("flash").size, lpc.region("ram").size, lpc.region("ram").origin) == (512 * 1024, 32 * 1024, None)
    m4 = targets.get("cortex-m4f")
    assert (m4.region("ram").origin, m4.region("ram").size) == (0x20000000, 4 * 1024 * 1024)
    assert targets.get("cortex-a15").region("flash") is None


def _edited(tmp_path, name, old, new):
    text = targets.get(name).path.read_text()
    assert old in text
    path = tmp_path / f"{name}.toml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize("name,old,new,message", [
    # keys of other kinds are refused
    ("host", 'libs = ["-lm"]', 'libs = ["-lm"]\nemulator = "qemu-arm"', "unknown key.*emulator for kind 'host'"),
    # keys a kind needs
    ("arm7tdmi", 'emulator = "qemu-arm"\n', "", "missing key 'emulator' \\(required for kind 'qemu-user'\\)"),
    ("cortex-m4f", "[memory.flash]", "[unused.flash]", "unknown key.*unused"),
    ("cortex-m4f", "origin = 0x20000000\n", "", "missing key 'memory.ram.origin'"),
    # types and values
    ("arm7tdmi", 'emulator_args = ["-cpu", "arm926"]', 'emulator_args = "-cpu arm926"',
     "key 'emulator_args' must be a list"),
    ("arm7tdmi", 'emulator_args = ["-cpu", "arm926"]', 'emulator_args = ["-cpu", 926]',
     "key 'emulator_args' must be a list of strings"),
    ("arm7tdmi", "size = 0x8000 ", "size = 0 ", "key 'memory.ram.size' must be a positive integer"),
    ("arm7tdmi", "size = 0x8000 ", 'size = "32K" ', "key 'memory.ram.size' must be a positive integer"),
    ("arm7tdmi", "[memory.ram]", "[memory.sram]", "unknown memory region\\(s\\) sram"),
    ("arm7tdmi", "size = 0x8000 ", "start = 0\nsize = 0x8000 ", "unknown key\\(s\\) start in 'memory.ram'"),
    ("cortex-m4f", "origin = 0x20000000", "origin = -1", "key 'memory.ram.origin' must be a non-negative integer"),
])
def test_kind_specific_keys_are_validated_naming_the_file_and_key(tmp_path, name, old, new, message):
    path = _edited(tmp_path, name, old, new)
    with pytest.raises(ConfigError, match=f"{path}: .*{message}"):
        targets.load_profile(path)


def test_missing_emulator_names_the_package(tmp_path):
    profile = targets.load_profile(_edited(tmp_path, "cortex-a15", 'emulator = "qemu-arm"', 'emulator = "no-qemu"'))
    with pytest.raises(ConfigError, match="target cortex-a15: emulator 'no-qemu' not found; "
                                          "install the Debian package 'qemu-user'"):
        profile.emulator_path()


def test_each_profile_names_the_timing_model_of_its_cpu():
    from wcet import timing

    assert {name: targets.get(name).timing for name in ("host", "arm7tdmi", "cortex-m4f", "cortex-a15")} == {
        "host": "trivial", "arm7tdmi": "arm7tdmi", "cortex-m4f": "cortex-m4", "cortex-a15": "trivial"}
    for name in targets.names():
        profile = targets.get(name)
        assert profile.accepts_timing(profile.timing) and profile.accepts_timing("trivial")
    assert not targets.get("cortex-m4f").accepts_timing("arm7tdmi")
    assert targets.get("arm7tdmi-ext").accepts_timing("arm7tdmi")
    assert timing.model_class("trivial").generic


def test_unknown_timing_model_is_refused(tmp_path):
    path = tmp_path / "host.toml"
    path.write_text(targets.get("host").path.read_text().replace('timing = "trivial"', 'timing = "z80"'))
    with pytest.raises(ConfigError, match="timing model 'z80' is not one of"):
        targets.load_profile(path)


def test_extends_takes_the_parent_keys_and_overrides_some():
    base, ext = targets.get("arm7tdmi"), targets.get("arm7tdmi-ext")
    assert ext.cflags == base.cflags and ext.timing == base.timing and ext.emulator == base.emulator
    assert ext.region("flash").size > base.region("flash").size
    assert ext.name == "arm7tdmi-ext"


def test_extends_an_unknown_profile_or_in_a_cycle_is_refused(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "b"\n')
    (tmp_path / "b.toml").write_text('extends = "a"\n')
    with pytest.raises(ConfigError, match="'extends' cycle"):
        targets.load_profile(tmp_path / "a.toml")
    (tmp_path / "c.toml").write_text('extends = "nothere"\n')
    with pytest.raises(ConfigError, match="extends unknown target 'nothere'"):
        targets.load_profile(tmp_path / "c.toml")


def test_cortex_m4f_ext_keeps_the_core_and_moves_code_to_psram():
    base, ext = targets.get("cortex-m4f"), targets.get("cortex-m4f-ext")
    assert (ext.cflags, ext.timing, ext.emulator_args) == (base.cflags, base.timing, base.emulator_args)
    assert (ext.region("boot").origin, ext.region("flash").origin, ext.region("flash").size) == (
        0, 0x21000000, 16 * 1024 * 1024)  # vector table where the Cortex-M4 resets; code in MPS2 PSRAM
    assert ext.region("ram") == base.region("ram") and base.region("boot") is None
    assert ext.linker_script.is_file() and ext.linker_script.parent == targets.PROFILE_DIR
    assert not any(flag.startswith("-T") for flag in ext.ldflags)  # the script is the profile's, not picolibc's
    assert 0x21000000 in ext.read_only_memory() and 0x20 in ext.read_only_memory()
    assert 0x20000000 not in ext.read_only_memory() and ext.not_runnable_cause() is None


def test_an_analysis_only_profile_refuses_runs_with_one_line_naming_it():
    big = targets.get("cortex-m4f-big")
    assert big.region("flash").size == 1 << 30 and big.linker_script == targets.get("cortex-m4f-ext").linker_script
    with pytest.raises(RunError, match="^target cortex-m4f-big is not runnable \\(analysis only\\): no emulated "
                                       "board has this memory [^\n]*$"):
        big.check_runnable()
    targets.get("cortex-m4f-ext").check_runnable()  # a runnable profile passes


@pytest.mark.parametrize("old,new,message", [
    ('linker_script = "cortex-m4f-ext.ld"', 'linker_script = "nothere.ld"', "key 'linker_script': no file 'nothere.ld'"),
    ('linker_script = "cortex-m4f-ext.ld"', 'linker_script = "../cortex-m4f-ext.ld"', "key 'linker_script': no file"),
    ('linker_script = "cortex-m4f-ext.ld"', "linker_script = 3", "key 'linker_script' must be a str"),
    ("[memory.boot]\norigin = 0x00000000\n", "[memory.boot]\n", "missing key 'memory.boot.origin'"),
])
def test_linker_script_and_boot_region_are_validated(tmp_path, old, new, message):
    path = _edited(tmp_path, "cortex-m4f-ext", old, new)
    path.with_name("cortex-m4f.toml").write_text(targets.get("cortex-m4f").path.read_text())  # its parent
    with pytest.raises(ConfigError, match=f"{path}: {message}"):
        targets.load_profile(path)
