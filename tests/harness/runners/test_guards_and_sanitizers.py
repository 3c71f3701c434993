"""Memory safety of generated code: guard words around the drivers' buffers (host and ARM targets) and the
sanitized host build (ASan + UBSan) each turn one hand-written fault into a one-line cause.

The C is written by hand so that each fault is exactly the one named; the compilers, QEMU and the
sanitizers are real.
"""

import json
import shutil

import numpy as np
import pytest

from harness import targets
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, host, qemu, sanitized

# 3 inputs, 2 outputs; each body is the whole of net()
CLEAN = "output[0] = input[0] + input[2]; output[1] = input[1];"
WRITE_PAST_OUTPUT = "for (int i = 0; i < 2; ++i) output[i] = input[i] * 2.0f;\n    output[2] = 1.0f;"
READ_PAST_INPUT = "output[0] = input[0] + input[3]; output[1] = input[1];"
ARENA_OVERFLOW = ("static float arena[4];\n    for (int i = 0; i <= 4; ++i) arena[i] = input[i % 3];\n"
                  "    output[0] = arena[0]; output[1] = arena[1];")
SIGNED_OVERFLOW = ("int count = 2147483600;\n    for (int i = 0; i < 100; ++i) count += (int)(input[0] * 0.0f) + 1;\n"
                   "    output[0] = (float)count; output[1] = 0.0f;")
INPUTS = np.ones((5, 3), np.float32)


def prebuilt(tmp_path, body):
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "net.c").write_text(f"void net(const float *input, float *output) {{\n    {body}\n}}\n")
    (directory / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 3, "output_size": 2}))
    return GeneratedCode.from_directory(directory)


def sanitized_run(tmp_path, body):
    code = prebuilt(tmp_path, body)
    return sanitized.run(sanitized.build(code, tmp_path / "build-sanitized"), INPUTS)


@pytest.mark.parametrize("body,cause", [
    (WRITE_PAST_OUTPUT, "AddressSanitizer: use-after-poison (a guard word around the input or output buffer), "
                        "WRITE of size 4 in net at net.c:3"),
    (READ_PAST_INPUT, "AddressSanitizer: use-after-poison (a guard word around the input or output buffer), "
                      "READ of size 4 in net at net.c:2"),
    (ARENA_OVERFLOW, "UndefinedBehaviorSanitizer: index 4 out of bounds for type 'float [4]' at net.c:3:"),
    (SIGNED_OVERFLOW, "UndefinedBehaviorSanitizer: signed integer overflow: 2147483647 + 1 cannot be represented "
                      "in type 'int' at net.c:3:"),
])
def test_each_fault_is_one_line_from_the_sanitizers(tmp_path, body, cause):
    with pytest.raises(RunError) as caught:
        sanitized_run(tmp_path, body)
    assert str(caught.value).startswith(cause) and "\n" not in str(caught.value)


def test_an_arena_overflow_without_bounds_checking_is_still_reported_by_asan(tmp_path):
    # through a pointer UBSan's bounds check cannot follow: ASan's redzone around the global catches it
    body = ("static float arena[4];\n    float *p = arena;\n    for (int i = 0; i <= 4; ++i) p[i] = input[i % 3];\n"
            "    output[0] = arena[0]; output[1] = arena[1];")
    with pytest.raises(RunError, match=r"^AddressSanitizer: global-buffer-overflow, WRITE of size 4 in net at net.c:4"):
        sanitized_run(tmp_path, body)


def test_clean_code_runs_without_a_report_and_gives_the_host_outputs(tmp_path):
    code = prebuilt(tmp_path, CLEAN)
    outputs = sanitized.run(sanitized.build(code, tmp_path / "build-sanitized"), INPUTS)
    assert np.array_equal(outputs, host.run(host.build(code, tmp_path / "build-host"), INPUTS).outputs)
    assert np.array_equal(outputs[0], [2.0, 1.0])


def test_host_guard_word_after_output_is_an_error_naming_the_call(tmp_path):
    code = prebuilt(tmp_path, "if (input[0] > 2.0f) output[2] = 0.0f;\n    " + CLEAN)
    inputs = np.ones((5, 3), np.float32)
    inputs[3, 0] = 3.0
    with pytest.raises(RunError, match=r"^guard word after output overwritten at call #3$"):
        host.run(host.build(code, tmp_path / "build"), inputs)


def test_host_guard_word_before_output_is_an_error(tmp_path):
    code = prebuilt(tmp_path, "output[-1] = 0.0f;\n    " + CLEAN)
    with pytest.raises(RunError, match=r"^guard word before output overwritten at call #0$"):
        host.run(host.build(code, tmp_path / "build"), INPUTS)


def test_host_read_past_the_input_reads_a_nan_guard(tmp_path):
    # the guard word is a NaN: a read past the input poisons the output, which the oracle reports
    outputs = host.run(host.build(prebuilt(tmp_path, READ_PAST_INPUT), tmp_path / "build"), INPUTS).outputs
    assert np.isnan(outputs[:, 0]).all() and (outputs[:, 1] == 1.0).all()


_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm")
needs_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in _TOOLS), reason="ARM tools not installed")


@pytest.mark.arm
@needs_tools
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_target_guard_word_after_output_is_an_error_naming_the_call(tmp_path, target):
    code = prebuilt(tmp_path, "if (input[0] > 2.0f) output[2] = 0.0f;\n    " + CLEAN)
    inputs = np.ones((5, 3), np.float32)
    inputs[2, 0] = 3.0
    built = qemu.build(code, tmp_path / "build", targets.get(target))
    with pytest.raises(RunError, match=r"^guard word after output overwritten at call #2$"):
        qemu.run(built, inputs, 60.0)
