"""The QEMU runner cross-builds real C for the ARM targets, runs it under QEMU,
turns faults into RunError causes, and agrees with the host runner bit for bit
on IEEE arithmetic."""

import dataclasses
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from harness import targets
from harness.stages.semantic import bitcompare
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, host, qemu

ARM_TARGETS = ["arm7tdmi", "cortex-a15", "cortex-m4f"]
USER_MODE = ["arm7tdmi", "cortex-a15"]
_TOOLS = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "qemu-arm": "qemu-user", "qemu-system-arm": "qemu-system-arm"}
_MISSING = [f"{tool} ({package})" for tool, package in _TOOLS.items() if shutil.which(tool) is None]
needs_tools = pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}; run .ci/setup")

# +, -, *, / and sqrtf are correctly rounded IEEE operations: identical bits everywhere.
ARITHMETIC = """
#include <math.h>
void net(const float *input, float *output) {
    for (int i = 0; i < 4; ++i) {
        const float a = input[i], b = input[(i + 1) % 4];
        output[i] = a * b + a;
        output[4 + i] = (a - b) * 0.1f;
        output[8 + i] = a / (b + 3.5f);
        output[12 + i] = sqrtf(fabsf(a));
    }
}
"""

# Library functions: each C library has its own implementation.
TRANSCENDENTAL = """
#include <math.h>
void net(const float *input, float *output) {
    for (int i = 0; i < 4; ++i) {
        output[i] = expf(input[i]);
        output[4 + i] = tanhf(input[i]);
    }
}
"""

# Largest ULP distance from the host's glibc, observed on 160,000 values per
# function (docs/targets.md); the test below checks 8,000. newlib (arm7tdmi) and
# picolibc (cortex-m4f) use float-only expf when the FPU has no double
# precision: 1 ULP on ~10 % of the values. newlib's cortex-a15 libm was compiled
# with fused multiply-add, which moves tanhf (through expm1f) by up to 3 ULP on
# ~0.02 % of the values, all in (-1, 1).
MAX_ULP = {"arm7tdmi": {"expf": 1, "tanhf": 0},
           "cortex-a15": {"expf": 0, "tanhf": 3},
           "cortex-m4f": {"expf": 1, "tanhf": 0}}


def prebuilt(tmp_path, body, input_size=4, output_size=16, name="net"):
    directory = tmp_path / name
    directory.mkdir()
    (directory / "net.c").write_text(body)
    (directory / "assay.json").write_text(json.dumps({"entry": "net", "input_size": input_size,
                                                      "output_size": output_size}))
    return GeneratedCode.from_directory(directory)


def special_inputs(count=20, seed=0):
    """Random values plus signed zeros, subnormals, tiny and huge ones (a flush-to-zero FPU would differ)."""
    rng = np.random.default_rng(seed)
    inputs = rng.normal(scale=4.0, size=(count, 4)).astype(np.float32)
    inputs[0] = [0.0, -0.0, 1e-45, -3e-39]
    inputs[1] = [1.17549435e-38, -2.5e-38, 3.4e38, -1e-30]
    return inputs


def host_outputs(code, tmp_path, inputs):
    return host.run(host.build(code, tmp_path / "build-host"), inputs).outputs


def arm_build(code, tmp_path, target, opt=None):
    return qemu.build(code, tmp_path / f"build-{target}{opt or ''}", targets.get(target), opt)


def arm_run(code, tmp_path, target, inputs, opt=None, timeout=60.0):
    return qemu.run(arm_build(code, tmp_path, target, opt), inputs, timeout)


@pytest.mark.tor("TOR-SEM-011")
@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("opt", ["-O0", "-O3"])
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_arithmetic_matches_the_host_bit_for_bit(tmp_path, target, opt):
    code = prebuilt(tmp_path, ARITHMETIC)
    inputs = special_inputs()
    outcome = arm_run(code, tmp_path, target, inputs, opt)
    assert outcome.outputs.shape == (20, 16) and outcome.outputs.dtype == np.float32
    comparison = bitcompare.compare(outcome.outputs, host_outputs(code, tmp_path, inputs))
    assert comparison.identical, comparison
    assert 0 < outcome.c_seconds <= outcome.wall_seconds


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_expf_and_tanhf_stay_within_the_observed_ulp_of_the_host(tmp_path, target):
    code = prebuilt(tmp_path, TRANSCENDENTAL, output_size=8)
    rng = np.random.default_rng(1)
    inputs = np.concatenate([rng.uniform(-20, 20, (1000, 4)), rng.uniform(-1, 1, (1000, 4))]).astype(np.float32)
    outputs, expected = arm_run(code, tmp_path, target, inputs).outputs, host_outputs(code, tmp_path, inputs)
    for name, columns in (("expf", slice(0, 4)), ("tanhf", slice(4, 8))):
        comparison = bitcompare.compare(outputs[:, columns], expected[:, columns])
        assert comparison.nan_mismatches == 0
        assert comparison.max_ulp <= MAX_ULP[target][name], (name, comparison)


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target,cause", [("arm7tdmi", "crashed with SIGSEGV"), ("cortex-a15", "crashed with SIGSEGV"),
                                          ("cortex-m4f", r"crashed with hardfault \(PC 0x[0-9a-f]+\)")])
@pytest.mark.tor("TOR-SEM-004")
def test_write_to_an_invalid_address_becomes_a_crash_cause(tmp_path, target, cause):
    # 0xF0000000: unmapped in qemu-arm's address space and on the MPS2 board (address 0 is RAM there)
    code = prebuilt(tmp_path, "void net(const float *i, float *o) {\n"
                              "    (void)i; (void)o; *(volatile int *)0xF0000000u = 1;\n}\n")
    with pytest.raises(RunError, match=f"^{cause}$"):
        arm_run(code, tmp_path, target, np.zeros((2, 4), np.float32))


@pytest.mark.tor("TOR-SEM-004")
@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_abort_becomes_a_crash_cause(tmp_path, target):
    code = prebuilt(tmp_path, "#include <stdlib.h>\nvoid net(const float *i, float *o) { (void)i; (void)o; abort(); }")
    with pytest.raises(RunError, match=r"^crashed with SIGABRT \(abort\(\) called\)$"):
        arm_run(code, tmp_path, target, np.zeros((2, 4), np.float32))


@pytest.mark.tor("TOR-SEM-004")
@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_hang_is_stopped_by_the_timeout(tmp_path, target):
    code = prebuilt(tmp_path, "void net(const float *i, float *o) { (void)i; (void)o; for (;;) {} }")
    with pytest.raises(RunError, match=r"^timed out after 5 s \(3 inputs\)$"):
        arm_run(code, tmp_path, target, np.zeros((3, 4), np.float32), timeout=5)


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_compile_error_names_the_first_diagnostic(tmp_path, target):
    code = prebuilt(tmp_path, "void net(const float *i, float *o) { undeclared_thing = 1; }")
    with pytest.raises(RunError, match=r"^compile error: .*net\.c:1:.*undeclared_thing"):
        arm_build(code, tmp_path, target)


@pytest.mark.arm
@needs_tools
def test_link_error_names_the_missing_symbol(tmp_path):
    code = prebuilt(tmp_path, "void helper(void); void net(const float *i, float *o) { (void)i; (void)o; helper(); }")
    with pytest.raises(RunError, match="undefined reference to `helper'"):
        arm_build(code, tmp_path, "cortex-m4f")


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target,cause", [
    # user mode: the runner checks the linked sections against the LPC2138's 512 KiB flash
    ("arm7tdmi", (r"image too large for arm7tdmi: flash needs \d+ bytes \(code, constants and initial data\), "
                  r"the target has 524288")),
    # system mode: the linker script's regions overflow first
    ("cortex-m4f", r"image too large for cortex-m4f: flash region of 4194304 bytes overflowed by \d+ bytes")])
@pytest.mark.tor("TOR-MEM-005")
def test_image_too_large_for_flash_says_so_with_the_sizes(tmp_path, target, cause):
    code = prebuilt(tmp_path, "const float big[1100000] = {1};\n"
                              "void net(const float *i, float *o) { o[0] = big[(int)i[0]]; }")
    with pytest.raises(RunError, match=f"^{cause}$"):
        arm_build(code, tmp_path, target)


@pytest.mark.tor("TOR-MEM-005")
@pytest.mark.arm
@needs_tools
def test_image_too_large_for_ram_says_so_with_the_sizes(tmp_path):
    code = prebuilt(tmp_path, "float buffer[10000];\nvoid net(const float *i, float *o) { o[0] = buffer[(int)i[0]]; }")
    with pytest.raises(RunError, match=r"^image too large for arm7tdmi: ram needs \d+ bytes .*, the target has 32768$"):
        arm_build(code, tmp_path, "arm7tdmi")
    assert arm_build(code, tmp_path, "cortex-a15").size.ram > 40000  # no memory limit on the Cortex-A15


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_rebuild_is_reused_until_a_source_changes(tmp_path, target):
    code = prebuilt(tmp_path, ARITHMETIC)
    first = arm_build(code, tmp_path, target)
    mtime = first.elf.stat().st_mtime_ns
    assert arm_build(code, tmp_path, target).elf.stat().st_mtime_ns == mtime
    (code.directory / "net.c").write_text(ARITHMETIC.replace("0.1f", "0.5f"))
    rebuilt = arm_build(code, tmp_path, target)
    assert rebuilt.elf.stat().st_mtime_ns != mtime
    assert rebuilt.flags[0] == "-O0" and "-ffp-contract=off" in rebuilt.flags
    assert "arm-none-eabi-gcc" in rebuilt.compiler_version


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_empty_batch_and_input_width_checks(tmp_path, target):
    code = prebuilt(tmp_path, ARITHMETIC)
    built = arm_build(code, tmp_path, target)
    assert qemu.run(built, np.zeros((0, 4), np.float32)).outputs.shape == (0, 16)
    with pytest.raises(RunError, match="expects 4"):
        qemu.run(built, np.zeros((2, 5), np.float32))


@pytest.mark.tor("TOR-SEM-004")
@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_early_exit_leaves_too_few_outputs(tmp_path, target):
    code = prebuilt(tmp_path, "#include <stdlib.h>\n"
                              "void net(const float *i, float *o) { o[0] = i[0]; if (i[0] > 1.0f) exit(0); }",
                    output_size=1)
    # newlib flushes the first output at exit(), picolibc does not
    with pytest.raises(RunError, match=r"^outputs file has [01] values, expected 3 x 1$"):
        arm_run(code, tmp_path, target, np.array([[0.5, 0, 0, 0], [2, 0, 0, 0], [0, 0, 0, 0]], np.float32))


@pytest.mark.arm
@needs_tools
def test_cortex_a15_code_is_refused_by_the_arm7tdmi_emulator(tmp_path):
    """The arm7tdmi profile's QEMU CPU (arm926, ARMv5) rejects ARMv7 instructions."""
    code = prebuilt(tmp_path, ARITHMETIC)
    built = arm_build(code, tmp_path, "cortex-a15")
    wrong = dataclasses.replace(built, profile=targets.get("arm7tdmi"))
    with pytest.raises(RunError, match="^crashed with SIGILL$"):
        qemu.run(wrong, special_inputs())


@pytest.mark.arm
@needs_tools
def test_missing_emulator_names_the_package(tmp_path):
    text = targets.get("cortex-m4f").path.read_text().replace('emulator = "qemu-system-arm"',
                                                                 'emulator = "no-such-qemu"')
    path = tmp_path / "cortex-m4f.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="emulator 'no-such-qemu' not found; install the Debian package "
                                          "'qemu-system-arm'"):
        qemu.build(prebuilt(tmp_path, ARITHMETIC), tmp_path / "build", targets.load_profile(path))


@pytest.mark.arm
@needs_tools
def test_missing_c_library_names_the_package(tmp_path):
    text = targets.get("arm7tdmi").path.read_text().replace("rdimon.specs", "no-such-libc.specs")
    path = tmp_path / "arm7tdmi.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="install the Debian package 'libnewlib-arm-none-eabi'"):
        qemu.build(prebuilt(tmp_path, ARITHMETIC), tmp_path / "build", targets.load_profile(path))


def test_missing_cross_compiler_names_the_package(tmp_path):
    text = targets.get("arm7tdmi").path.read_text().replace('compiler = "arm-none-eabi-gcc"',
                                                              'compiler = "no-such-gcc"')
    path = tmp_path / "arm7tdmi.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="install the Debian package 'gcc-arm-none-eabi'"):
        qemu.build(prebuilt(tmp_path, ARITHMETIC), tmp_path / "build", targets.load_profile(path))


def test_unknown_target_lists_the_arm_targets():
    with pytest.raises(ConfigError, match="unknown target 'cortex-m7'; known targets: ") as raised:
        targets.get("cortex-m7")
    for name in ("arm7tdmi", "arm7tdmi-ext", "cortex-a15", "cortex-m4f", "host"):
        assert name in str(raised.value)


@pytest.mark.parametrize("returncode,output,cause", [
    (-11, "qemu: uncaught target signal 11 (Segmentation fault) - core dumped", "crashed with SIGSEGV"),
    (1, "ARM fault: usagefault\n\tR0:   0x00000002\n\tPC:   0x000001a6\n", "crashed with usagefault (PC 0x000001a6)"),
    (70, "", "driver could not open the inputs file"),
    (73, "", "driver found a partial input at the end of the inputs file"),
    (134, "", "crashed with SIGABRT (abort() called)"),
    (3, "some output\nlast words\n", "exited with status 3: last words"),
])
def test_exit_status_becomes_a_one_line_cause(returncode, output, cause):
    assert qemu.exit_cause(returncode, output) == cause


# -- a real generated model, if the generator and the model zoo are there ---------------------------

@pytest.fixture(scope="module")
def acas_code(tmp_path_factory):
    pytest.importorskip("tensorflow")
    from harness.models import zoo

    work = tmp_path_factory.mktemp("acas")
    model = zoo.load("acas-reg50", cache_dir=work / "zoo")
    out = work / "src"
    result = subprocess.run([sys.executable, "-m", "codegen", "--name", "acas-reg50", str(model.files["keras"]),
                             str(out)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"codegen failed: {(result.stderr.strip().splitlines() or ['?'])[-1]}")
    code = GeneratedCode.from_directory(out)
    inputs = np.random.default_rng(0).uniform(-0.5, 0.5, (20, code.input_size)).astype(np.float32)
    return code, inputs, host.run(host.build(code, work / "build-host"), inputs).outputs


@pytest.mark.tor("TOR-SEM-011")
@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ARM_TARGETS)
def test_generated_acas_model_matches_the_host_bit_for_bit(acas_code, tmp_path, target):
    code, inputs, expected = acas_code
    comparison = bitcompare.compare(arm_run(code, tmp_path, target, inputs).outputs, expected)
    assert comparison.identical, comparison  # Dense + ReLU only: IEEE arithmetic, no libm


# 6.1 MB of constants, more than the 4 MiB at address 0 that cortex-m4f has for code and constants.
PSRAM_SIZED = """
const float big[1600000] = {[0] = 0.5f, [1599999] = 2.5f};
void net(const float *input, float *output) {
    for (int i = 0; i < 4; ++i) {
        output[i] = input[i] * big[1599999] + big[0];
        output[4 + i] = input[i] / big[(int)(input[i] != input[i])];
    }
}
"""


def _section_addresses(elf):
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as stream:
        return {section.name: (section["sh_addr"], section["sh_size"]) for section in ELFFile(stream).iter_sections()
                if section["sh_flags"] & 2}  # SHF_ALLOC


@pytest.mark.arm
@needs_tools
def test_cortex_m4f_ext_runs_code_and_constants_from_psram_bit_for_bit(tmp_path):
    code = prebuilt(tmp_path, PSRAM_SIZED, output_size=8)
    with pytest.raises(RunError, match="image too large for cortex-m4f: flash region of 4194304 bytes"):
        arm_build(code, tmp_path, "cortex-m4f")
    built = arm_build(code, tmp_path, "cortex-m4f-ext")
    sections = _section_addresses(built.elf)
    assert sections[".vectors"][0] == 0  # where the Cortex-M4 reads its reset vector
    psram = range(0x21000000, 0x22000000)  # QEMU's mps2-an386 PSRAM (hw/arm/mps2.c)
    assert sections[".text"][0] in psram and sections[".text"][0] + sections[".text"][1] - 0x400000 in psram
    assert built.size.flash > 6_400_000 and built.size.ram < 0x20000  # the vector table is not RAM
    inputs = special_inputs()
    outcome = qemu.run(built, inputs)
    comparison = bitcompare.compare(outcome.outputs, host_outputs(code, tmp_path, inputs))
    assert comparison.identical, comparison
    assert outcome.outputs[2, 0] == inputs[2, 0] * 2.5 + 0.5  # both ends of the table were read


@pytest.mark.arm
@needs_tools
def test_an_analysis_only_target_builds_but_refuses_to_run(tmp_path):
    built = arm_build(prebuilt(tmp_path, ARITHMETIC), tmp_path, "cortex-m4f-big")
    assert _section_addresses(built.elf)[".text"][0] == 0x60000000
    with pytest.raises(RunError, match="^target cortex-m4f-big is not runnable \\(analysis only\\): no emulated board"):
        qemu.run(built, special_inputs())
    assert not (built.elf.parent / qemu.LOG_FILE).exists()  # QEMU was never started
