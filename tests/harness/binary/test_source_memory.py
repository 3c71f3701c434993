"""Stack arrays and heap allocation read from C that cannot be compiled (keras2c's code without its backend)."""

import shutil

import pytest

from harness.binary.source_memory import analyse

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="host gcc (preprocessor) not installed")

# The shape of keras2c's output: a backend header that is not there, its tensor type, a function with its
# arrays as locals (stack variant), and an initialiser that mallocs them (malloc variant).
K2C_C = """\
#include <math.h>
#include <string.h>
#include "./include/k2c_include.h"
void net(k2c_tensor* input, k2c_tensor* output, float* big)
{
    float conv_output_array[96] = {0};
    static float kept[1000];
    size_t stride[2] = {1, 1};
    k2c_tensor conv_output = { conv_output_array, 1, 96, { 96, 1, 1, 1, 1 } };
    k2c_conv2d(&conv_output, input, stride);
    helper(output);
}
void helper(k2c_tensor* output)
{
    double scratch[4][8];
    k2c_dense(output, scratch);
}
void net_initialize(float** big)
{
    *big = (float*)malloc(4000 * sizeof(float));
}
"""


def test_local_arrays_on_the_deepest_path_and_the_allocator_paths(tmp_path):
    (tmp_path / "net.c").write_text(K2C_C)
    found = analyse([tmp_path / "net.c"], ["net_initialize", "net", "missing_function"], ["k2c_tensor"])
    assert found["functions"]["net"] == {"local_array_bytes": 96 * 4 + 2 * 4, "calls": ["helper", "k2c_conv2d"]}
    assert found["functions"]["helper"]["local_array_bytes"] == 4 * 8 * 8  # static arrays are not on the stack
    entries = {entry["entry"]: entry for entry in found["entries"]}
    assert set(entries) == {"net_initialize", "net"}
    assert entries["net"]["deepest_path"] == ["net", "helper"]
    assert found["stack_lower_bound"] == 96 * 4 + 2 * 4 + 4 * 8 * 8
    assert entries["net_initialize"]["heap"] == ["net_initialize -> malloc"] and entries["net"]["heap"] == []
    assert found["allocators"] == ["malloc"]


def test_without_the_opaque_type_the_source_is_unreadable(tmp_path):
    (tmp_path / "net.c").write_text(K2C_C)
    from wcet.csource import SourceError

    with pytest.raises(SourceError, match="net.c"):
        analyse([tmp_path / "net.c"], ["net"])
