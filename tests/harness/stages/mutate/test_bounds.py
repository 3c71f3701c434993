"""The static subscript bounds check on small C: it reports an index that leaves its array only on a
data-dependent path, narrows the box by padding guards, and leaves alone what it cannot decide."""

import pytest

from harness.stages.mutate.bounds import check, extents

SOFTMAX = """
void net(const float *input, float *output) {
    {
        float m = -INFINITY;
        for (int k = 0; k < 10; ++k) {
            m = output[k] > m ? output[K_READ] : m;
        }
        for (int k = 0; k < 10; ++k) {
            output[k] = expf(output[k] - m);
        }
    }
}
"""
MANIFEST = {"entry": {"symbol": "net"},
            "inputs": [{"size": 4}], "outputs": [{"size": 10}]}


def run(text: str):
    arrays, entry, buffers = extents([text], MANIFEST)
    return check(text, arrays, "net.c", entry, buffers)


def test_a_read_past_the_output_on_a_path_only_some_data_takes_is_reported():
    clean = run(SOFTMAX.replace("K_READ", "k"))
    assert clean.violations == () and clean.checked == 4 and clean.unchecked == 0
    (violation,) = run(SOFTMAX.replace("K_READ", "(k) + 1")).violations
    assert str(violation) == "line 6: output[k + 1] indexes 1..10, output has 10 elements"


def test_padding_guards_narrow_the_box_and_a_missing_guard_is_reported():
    pad = """
static float arena[36];
void net(const float *input, float *output) {
    for (int e0 = 0; e0 < 6; ++e0) {
        for (int e1 = 0; e1 < 6; ++e1) {
            const int i0 = e0 - 1;
            const int i1 = e1 - 1;
            arena[e0 * 6 + e1] = (i0 >= 0 && i0 < 2 && i1 >= 0 && i1 < 2) ? input[i0 * 2 + i1] : 0.0f;
        }
    }
    output[0] = arena[35];
}
"""
    assert run(pad).violations == () and run(pad).unchecked == 0
    (violation,) = run(pad.replace("i1 >= 0 && ", "")).violations
    assert violation.array == "input" and violation.low == -1 and violation.high == 3


def test_what_it_cannot_decide_is_left_unchecked_not_reported():
    text = """
static float a[4];
void net(const float *input, float *output) {
    for (int i = 0; i < 8; ++i) {
        if (i * i < 16) {
            a[i] = input[0];
        }
    }
    int j = 0;
    while (j < 4) {
        output[j + 6] = a[j];
        ++j;
    }
}
"""
    report = run(text)
    assert report.violations == () and report.unchecked == 3 and report.checked == 1  # input[0] is checked


def test_parameters_have_the_manifest_sizes_only_in_the_entry():
    text = """
static float output[2];
static void helper(float *output) {
    output[5] = 0.0f;
}
void net(const float *input, float *out2) {
    out2[9] = input[3];
    output[1] = 0.0f;
}
"""
    manifest = {"entry": "net", "input_size": 4, "output_size": 10}  # the small manifest, assay.json
    arrays, entry, buffers = extents([text], manifest)
    assert (entry, buffers) == ("net", [4, 10])
    report = check(text, arrays, "net.c", entry, buffers)
    assert report.violations == () and report.unchecked == 1  # helper's output is its parameter, size unknown


@pytest.mark.parametrize("bound, expected", [("<", None), ("<=", (0, 4))])
def test_loop_conditions_less_and_less_or_equal(bound, expected):
    text = f"static float a[4];\nvoid f(void) {{\n    for (int i = 0; i {bound} 4; ++i) {{ a[i] = 0.0f; }}\n}}\n"
    found = check(text, extents([text], {})[0]).violations
    assert (found[0].low, found[0].high) == expected if expected else found == ()
