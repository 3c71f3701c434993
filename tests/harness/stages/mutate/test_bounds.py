"""The static subscript bounds check on small C: it reports an index that leaves its array only on a
data-dependent path, narrows the box by padding guards, and leaves alone what it cannot decide."""

import pytest

from harness.stages.mutate.bounds import check, extents, spans

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


ARENA_CODE = """
static float net_arena[32];
void net(const float *input, float *output) {
    /* layer 0: dense */
    for (int o = 0; o < 8; ++o) {
        net_arena[16 + o] = input[o % 4];
    }
    /* layer 1: flatten, a view */
    /* layer 2: dense over the view */
    for (int o = 0; o < 10; ++o) {
        float acc = 0.0f;
        for (int i = 0; i < 8; ++i) {
            acc += net_arena[16 + i];
        }
        net_arena[o] = acc;
    }
    /* layer 3: softmax */
    {
        float m = -INFINITY;
        for (int k = 0; k < MAX_BOUND; ++k) {
            m = net_arena[k] > m ? net_arena[K_READ] : m;
        }
        for (int k = 0; k < 10; ++k) {
            output[k] = net_arena[k] - m;
        }
    }
}
"""


def _layer(index: int, lines: list[int], inputs: list, symbol: str, offset: int, size: int) -> dict:
    return {"index": index, "name": f"l{index}", "file": "net.c", "lines": lines, "inputs": inputs,
            "output": {"symbol": symbol, "offset": offset, "size": size}}


ARENA_MANIFEST = {
    "entry": {"symbol": "net", "file": "net.c"}, "inputs": [{"size": 4}], "outputs": [{"size": 10}],
    "arena": {"symbol": "net_arena", "floats": 32},
    "layers": [_layer(0, [4, 7], [None], "net_arena", 16, 8),
               _layer(1, [8, 8], [0], "net_arena", 16, 8),  # the view: its source's place
               _layer(2, [9, 16], [1], "net_arena", 0, 10),
               _layer(3, [17, 26], [2], "output", 0, 10)],
}


def run_arena(max_bound: str = "10", k_read: str = "k", manifest: dict = ARENA_MANIFEST):
    text = ARENA_CODE.replace("MAX_BOUND", max_bound).replace("K_READ", k_read)
    arrays, entry, buffers = extents([text], manifest)
    return check(text, arrays, "net.c", entry, buffers, spans(manifest, "net.c"))


def test_reads_inside_the_tensors_a_layer_takes_are_accepted_through_a_view():
    report = run_arena()
    assert report.violations == () and (report.checked, report.unchecked) == (7, 1)  # input[o % 4] is not affine


@pytest.mark.parametrize("max_bound, k_read, text", [
    ("11", "k", "line 21: net_arena[k] indexes 0..10, outside the tensors layer 3 l3 takes and makes there (0..9)"),
    ("10", "k + 1", "line 21: net_arena[k + 1] indexes 1..10, outside the tensors layer 3 l3 takes and makes "
                    "there (0..9)"),
])
def test_a_read_one_past_the_logits_inside_the_arena_is_reported(max_bound, k_read, text):
    """The lenet5 onnx survivors' shape: the softmax's logits live in the arena, the read stays in its array."""
    found = [str(v) for v in run_arena(max_bound, k_read).violations]
    assert text in found and all("has 32 elements" not in v for v in found)


def test_a_read_running_from_the_input_into_the_output_is_reported():
    text = ARENA_CODE.replace("net_arena[16 + i]", "net_arena[17 + i]").replace("MAX_BOUND", "10")
    manifest = {**ARENA_MANIFEST, "layers": [*ARENA_MANIFEST["layers"][:2], _layer(2, [9, 16], [1], "net_arena",
                                                                                     24, 10)]}
    text = text.replace("net_arena[o] = acc", "net_arena[24 + o] = acc").replace("K_READ", "k")
    arrays, entry, buffers = extents([text], manifest)
    (violation,) = [v for v in check(text, arrays, "net.c", entry, buffers, spans(manifest, "net.c")).violations
                    if v.line == 13]
    assert (violation.low, violation.high, violation.allowed) == (17, 24, ((16, 24), (24, 34)))


def test_two_inputs_laid_end_to_end_are_one_range_and_parallel_code_is_not_checked():
    manifest = {**ARENA_MANIFEST, "layers": [_layer(0, [4, 7], [None], "net_arena", 16, 4),
                                             _layer(1, [8, 8], [None], "net_arena", 20, 4),
                                             _layer(2, [9, 16], [0, 1], "net_arena", 0, 10),
                                             _layer(3, [17, 26], [2], "output", 0, 10)]}
    assert [str(v) for v in run_arena(manifest=manifest).violations if v.line == 13] == []
    assert [v.line for v in run_arena(manifest={**manifest, "layers": manifest["layers"][1:]}).violations] == [13]
    assert spans({**ARENA_MANIFEST, "parallel": {}}, "net.c") == [] and spans(MANIFEST, "net.c") == []


def test_an_integer_arena_is_checked_per_tensor_as_the_float_arena_is():
    """Quantized C (``integer_arenas``, docs/quantized.md): a loop bound + 1 that writes one row past a layer's int8
    output, into arena bytes no later layer reads, is reported; the clean layer is not."""
    manifest = {key: value for key, value in ARENA_MANIFEST.items() if key != "arena"}
    manifest["integer_arenas"] = [{"symbol": "net_arena", "dtype": "int8", "size": 32}]
    assert run_arena(manifest=manifest).violations == ()
    text = ARENA_CODE.replace("MAX_BOUND", "10").replace("K_READ", "k").replace("o < 8", "o < 9")
    arrays, entry, buffers = extents([text], manifest)
    found = [str(v) for v in check(text, arrays, "net.c", entry, buffers, spans(manifest, "net.c")).violations]
    assert found == ["line 6: net_arena[16 + o] indexes 16..24, outside the tensors layer 0 l0 takes and makes "
                     "there (16..23)"]
