"""Worker process: loads a generated shared library with cffi and runs one batch.

It runs in its own process so that a segfault or a hang in generated code ends
this worker, not the campaign. It imports nothing heavy, to keep the per-batch
overhead small. Usage:
    python -m harness.runners.host_worker LIB IN_SIZE OUT_SIZE INPUTS.npy OUTPUTS.npy
It prints one JSON line with the time spent inside the C call.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
from cffi import FFI


def main(argv: list[str]) -> int:
    lib_path, in_size, out_size, inputs_path, outputs_path = argv
    ffi = FFI()
    ffi.cdef("void assay_batch(const float *inputs, float *outputs, int n);")
    lib = ffi.dlopen(lib_path)
    inputs = np.ascontiguousarray(np.load(inputs_path), dtype=np.float32)
    count = inputs.shape[0]
    if inputs.size != count * int(in_size):
        print(f"inputs have {inputs.size} floats, expected {count} x {in_size}", file=sys.stderr)
        return 3
    outputs = np.full((count, int(out_size)), np.nan, dtype=np.float32)
    start = time.perf_counter()
    lib.assay_batch(ffi.from_buffer("float[]", inputs), ffi.from_buffer("float[]", outputs), count)
    c_seconds = time.perf_counter() - start
    np.save(outputs_path, outputs)
    print(json.dumps({"c_seconds": c_seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
