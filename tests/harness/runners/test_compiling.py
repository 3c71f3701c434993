"""C++ sources (Aidge's export, docs/peers.md) are built by the target's real C++ compiler under the C flags, beside
the C driver, on the host and on the Cortex-M4F; a header in a subfolder is part of what rebuilds the code."""

import dataclasses
import json
import shutil

import numpy as np
import pytest
from elftools.elf.elffile import ELFFile

from harness import targets
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, compiling, host, qemu, sanitized

# A template in a header of a subfolder, the standard library's std::clamp (C++17), and an extern "C" entry;
# the C file is the wrapper, as a peer adapter writes it. Clamped affine maps of small integers: exact in float.
KERNEL = """
#include <algorithm>
#include <cstddef>
template <std::size_t N>
void affine(const float *in, float *out, float scale, float low, float high) {
    for (std::size_t i = 0; i < N; ++i) out[i] = std::clamp(scale * in[i] + 1.0f, low, high);
}
"""
FORWARD = """
#include "kernels/affine.hpp"
static float buffer[4];
extern "C" void forward(const float *in, float **out) {
    affine<4>(in, buffer, 2.0f, -3.0f, 5.0f);
    *out = buffer;
}
"""
WRAPPER = """
void forward(const float *in, float **out);
void net(const float *input, float *output) {
    float *result;
    forward(input, &result);
    for (int i = 0; i < 4; ++i) output[i] = result[i];
}
"""
INPUTS = np.array([[-4, -1, 0, 1], [2, 3, 0.5, -0.5]], dtype=np.float32)


def cxx_code(tmp_path) -> GeneratedCode:
    directory = tmp_path / "code"
    (directory / "kernels").mkdir(parents=True)
    (directory / "src").mkdir()
    (directory / "kernels" / "affine.hpp").write_text(KERNEL)
    (directory / "src" / "forward.cpp").write_text(FORWARD)
    (directory / "net.c").write_text(WRAPPER)
    (directory / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 4, "output_size": 4,
                                                      "sources": ["net.c", "src/forward.cpp"]}))
    return GeneratedCode.from_directory(directory)


def expected(scale: float = 2.0) -> np.ndarray:
    return np.clip(scale * INPUTS + 1, -3, 5)


def test_cxx_sources_are_compiled_by_the_cxx_compiler_and_linked_with_the_c_driver(tmp_path):
    code = cxx_code(tmp_path)
    built = host.build(code, tmp_path / "build")
    objects = tmp_path / "build" / compiling.OBJECTS
    assert [path.name for path in objects.glob("*.o")] == ["src__forward.o"]
    assert built.command[0].endswith("gcc") and "-lstdc++" in built.command
    np.testing.assert_array_equal(host.run(built, INPUTS).outputs, expected())


def test_cxx_object_gets_the_c_flags_with_the_cxx_standard(tmp_path):
    """What the compiler itself recorded (DWARF's producer): -O0 and -ffp-contract=off as for C, C++17, no
    exceptions and no RTTI."""
    host.build(cxx_code(tmp_path), tmp_path / "build")
    with (tmp_path / "build" / compiling.OBJECTS / "src__forward.o").open("rb") as stream:
        unit = next(ELFFile(stream).get_dwarf_info().iter_CUs())
        producer = unit.get_top_DIE().attributes["DW_AT_producer"].value.decode()
    assert producer.startswith("GNU C++17")
    for flag in ("-O0", "-ffp-contract=off", "-std=c++17", "-fno-exceptions", "-fno-rtti"):
        assert flag in producer.split()


def test_forgetting_the_builds_forgets_the_objects_too(tmp_path):
    code = cxx_code(tmp_path)
    host.build(code, tmp_path / "build")
    obj = tmp_path / "build" / compiling.OBJECTS / "src__forward.o"
    assert compiling.stamp_path(obj).is_file()
    compiling.forget_builds(tmp_path / "build")
    assert not compiling.stamp_path(obj).is_file() and not list((tmp_path / "build").glob("*.key"))


def test_a_changed_header_in_a_subfolder_rebuilds(tmp_path):
    code = cxx_code(tmp_path)
    assert "kernels/affine.hpp" in code.source_hashes() and "src/forward.cpp" in code.source_hashes()
    host.build(code, tmp_path / "build")
    (code.directory / "kernels" / "affine.hpp").write_text(KERNEL.replace("scale * in[i]", "3.0f * in[i]"))
    rebuilt = host.build(code, tmp_path / "build")
    np.testing.assert_array_equal(host.run(rebuilt, INPUTS).outputs, expected(scale=3.0))


def test_the_sanitized_build_takes_cxx_and_sees_its_overflow(tmp_path):
    code = cxx_code(tmp_path)
    np.testing.assert_array_equal(sanitized.run(sanitized.build(code, tmp_path / "clean"), INPUTS), expected())
    (code.directory / "src" / "forward.cpp").write_text(FORWARD.replace("affine<4>", "affine<5>"))
    with pytest.raises(RunError, match=r"AddressSanitizer: .* in forward at forward\.cpp"):  # input read past its end
        sanitized.run(sanitized.build(code, tmp_path / "overflow"), INPUTS)


def test_a_profile_without_a_cxx_compiler_refuses_cxx_by_name(tmp_path):
    profile = dataclasses.replace(targets.get(targets.HOST), cxx_compiler=None, cxx_package=None)
    with pytest.raises(ConfigError, match="names no 'cxx_compiler'"):
        host.build(cxx_code(tmp_path), tmp_path / "build", profile)


def test_a_cxx_compile_error_is_the_verdicts_cause(tmp_path):
    code = cxx_code(tmp_path)
    (code.directory / "src" / "forward.cpp").write_text(FORWARD.replace("affine<4>", "affine<4, 5>"))
    with pytest.raises(RunError, match=r"compile error: .*forward\.cpp"):
        host.build(code, tmp_path / "build")


@pytest.mark.skipif(shutil.which("arm-none-eabi-g++") is None or shutil.which("qemu-system-arm") is None
                    or shutil.which("qemu-arm") is None, reason="arm-none-eabi-g++ or QEMU not installed; run .ci/setup")
@pytest.mark.parametrize("target", ["cortex-m4f", "arm7tdmi", "cortex-a15"])  # picolibc's libstdc++, newlib's
def test_cxx_runs_on_the_arm_targets_with_their_c_librarys_libstdcxx(tmp_path, target):
    built = qemu.build(cxx_code(tmp_path), tmp_path / "build", targets.get(target))
    np.testing.assert_array_equal(qemu.run(built, INPUTS).outputs, expected())
