"""Worker process: loads a generated shared library with cffi and runs one batch.

It runs in its own process so that a segfault or a hang in generated code ends
this worker, not the campaign, and in the sandbox (``sandbox.py``), which is why
it is started as a script: what it may read is this file, the interpreter and
cffi, not Assay's source tree. It imports neither NumPy nor the harness (their
import would cost more than a LeNet-5 batch's harness budget): inputs and
outputs are raw little-endian float32 files handed to C as cffi buffers.
Usage:
    python -I harness/runners/host_worker.py LIB IN_SIZE OUT_SIZE INPUTS.f32 OUTPUTS.f32
It prints one JSON line with the time spent inside the C call and, when the
driver found a guard word damaged (batch_driver.c), which one and at which call.
"""

from __future__ import annotations

import json
import sys
import time

from cffi import FFI

FLOAT32_NAN = b"\x00\x00\xc0\x7f"  # outputs the C never writes stay NaN, which the oracle reports


def main(argv: list[str]) -> int:
    lib_path, in_size, out_size, inputs_path, outputs_path = argv
    ffi = FFI()
    ffi.cdef("int assay_batch(const float *inputs, float *outputs, int n, int *call);")
    lib = ffi.dlopen(lib_path)
    with open(inputs_path, "rb") as stream:
        inputs = bytearray(stream.read())
    count, rest = divmod(len(inputs), 4 * int(in_size))
    if rest:
        print(f"inputs file has {len(inputs)} bytes, not a multiple of {in_size} floats", file=sys.stderr)
        return 3
    outputs = bytearray(FLOAT32_NAN * (count * int(out_size)))
    call = ffi.new("int *")
    start = time.perf_counter()
    guard = lib.assay_batch(ffi.from_buffer("float[]", inputs), ffi.from_buffer("float[]", outputs), count, call)
    c_seconds = time.perf_counter() - start
    with open(outputs_path, "wb") as stream:
        stream.write(outputs)
    print(json.dumps({"c_seconds": c_seconds, "guard": guard, "call": call[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
