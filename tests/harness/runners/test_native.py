"""Host executables with the targets' driver (``harness.runners.native``): outputs, and one line per failure
(a damaged guard word, a crash, a message before a non-zero exit, a hang)."""

import json
import subprocess

import numpy as np
import pytest

from harness.generators.generated import GeneratedCode
from harness.runners import RunError, native

BODIES = {
    "ok": "output[0] = input[0] + input[1]; output[1] = input[0] * input[1];",
    "past_output": "output[0] = input[0]; output[1] = input[1]; output[2] = 1.0f;",
    "crash": "output[0] = *(volatile float *)0; output[1] = 0.0f;",
    "message": 'fprintf(stderr, "arena float 3 written by layer 1\\n"); exit(70);',
    "hang": "for (;;) { }",
}


def executable(tmp_path, body: str) -> tuple:
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    (code_dir / "net.c").write_text("#include <stdio.h>\n#include <stdlib.h>\n"
                                    f"void net(const float *input, float *output) {{ {body} }}\n")
    (code_dir / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 2, "output_size": 2}))
    exe = tmp_path / "build" / "net"
    exe.parent.mkdir()
    subprocess.run(["gcc", "-std=c99", "-O0", f"-I{native.DRIVER.parent}", "-DASSAY_ENTRY=net", "-DASSAY_IN=2",
                    "-DASSAY_OUT=2", str(code_dir / "net.c"), str(native.DRIVER), "-o", str(exe), "-lm"], check=True)
    return exe, GeneratedCode.from_directory(code_dir)


def test_outputs_of_every_input_in_order(tmp_path):
    exe, code = executable(tmp_path, BODIES["ok"])
    outputs = native.run(exe, code, np.array([[1, 2], [3, 4], [0.5, -2]], dtype=np.float32), timeout=10)
    assert outputs.tolist() == [[3, 2], [7, 12], [-1.5, -1]]


@pytest.mark.parametrize("kind, cause", [("past_output", "^guard word after output overwritten at call #0$"),
                                         ("crash", "^crashed with SIGSEGV$"),
                                         ("message", "^exited with status 70: arena float 3 written by layer 1$"),
                                         ("hang", r"^timed out after 1 s \(1 inputs\)$")])
def test_a_failure_is_one_line_naming_its_cause(tmp_path, kind, cause):
    exe, code = executable(tmp_path, BODIES[kind])
    with pytest.raises(RunError, match=cause):
        native.run(exe, code, np.ones((1, 2), dtype=np.float32), timeout=1)
