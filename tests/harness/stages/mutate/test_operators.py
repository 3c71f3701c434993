"""Mutation operators on small C snippets: each mutant is the one precise edit named, equivalence rules hold
only where they are sound, and every mutant of real-looking code still compiles."""

import subprocess

import numpy as np
import pytest

from harness.stages.mutate.operators import code_mutants, weight_mutants

SNIPPET = """/* a comment with a + and a [ */
#include <math.h>
static float arena[8];
void net(const float *input, float *output) {
    for (int o = 0; o < 4; ++o) {
        float acc = 0.0f;
        for (int i = 0; i < 2; ++i) {
            acc += input[(i + 1) % 2] * -2.0f;
        }
        const float v = acc - 0.5f;
        arena[o] = (v > 0.0f ? v : 0.0f);
    }
    for (int k = 0; k < 4; ++k) {
        output[k] = tanhf(arena[k]) / 4.0f;
    }
}
"""


@pytest.fixture
def snippet(tmp_path):
    path = tmp_path / "net.c"
    path.write_text(SNIPPET)
    return path


def edits(path, operator=None):
    return {(m.line, m.original, m.replacement): m for m in code_mutants(path) if operator in (None, m.operator)}


def test_arithmetic_operators_are_binary_only_and_placed_exactly(snippet):
    found = edits(snippet, "arith")
    assert set(found) == {(8, "+", "-"), (8, "*", "/"), (10, "-", "+"), (14, "/", "*")}  # not the unary -2.0f
    mutant = found[(10, "-", "+")]
    assert "const float v = acc + 0.5f;" in mutant.apply(snippet.read_text())


def test_loop_bounds_move_by_one_and_less_than_is_not_also_made_less_or_equal(snippet):
    bounds = edits(snippet, "loop-bound")
    assert {(line, new) for line, _, new in bounds} == {(5, "5"), (5, "3"), (7, "3"), (7, "1"), (13, "5"), (13, "3")}
    relational = edits(snippet, "relational")
    assert not any(line in (5, 7, 13) and new == "<=" for line, _, new in relational)


def test_counting_loop_not_equal_is_judged_equivalent_only_when_nothing_else_writes_the_counter(tmp_path):
    path = tmp_path / "loops.c"
    path.write_text("void f(float *x) {\n"
                    "    for (int i = 0; i < 4; ++i) { x[i] = 0.0f; }\n"
                    "    for (int j = 0; j < 4; ++j) { x[j] = 1.0f; j += 1; }\n"
                    "}\n")
    found = edits(path, "relational")
    assert found[(2, "<", "!=")].equivalent.startswith("counting loop")
    assert found[(3, "<", "!=")].equivalent is None
    assert found[(2, "<", ">")].equivalent is None


def test_strict_and_non_strict_comparison_in_a_select_of_the_compared_values_is_equivalent(tmp_path, snippet):
    found = edits(snippet, "relational")
    assert found[(11, ">", ">=")].equivalent.startswith("select of the compared values")
    assert found[(11, ">", "<")].equivalent is None
    path = tmp_path / "max.c"
    path.write_text("void f(const float *a, float *m) {\n    *m = a[0] > a[1] ? a[0] : a[1];\n"
                    "    *m = a[0] > a[1] ? a[1] : a[2];\n}\n")
    found = edits(path, "relational")
    assert found[(2, ">", ">=")].equivalent is not None
    assert found[(3, ">", ">=")].equivalent is None  # not a select of the compared values


def test_indexes_are_offset_with_their_whole_subscript_and_writes_are_told_apart(snippet):
    reads, writes = edits(snippet, "read-index"), edits(snippet, "write-index")
    assert (8, "(i + 1) % 2", "((i + 1) % 2) + 1") in reads
    assert set(writes) == {(11, "o", "(o) + 1"), (11, "o", "(o) - 1"), (14, "k", "(k) + 1"), (14, "k", "(k) - 1")}
    text = writes[(14, "k", "(k) + 1")].apply(snippet.read_text())
    assert "output[(k) + 1] = tanhf(arena[k]) / 4.0f;" in text


def test_statements_are_deleted_whole_and_activations_swapped(snippet):
    deleted = edits(snippet, "delete")
    assert {original for _, original, _ in deleted} == {"acc += input[(i + 1) % 2] * -2.0f;",
                                                        "arena[o] = (v > 0.0f ? v : 0.0f);",
                                                        "output[k] = tanhf(arena[k]) / 4.0f;"}
    swaps = {(line, new) for line, _, new in edits(snippet, "activation")}
    assert swaps == {(11, "v"), (11, "tanhf(v)"), (14, "arena[k]"), (14, "(arena[k] > 0.0f ? arena[k] : 0.0f)")}


def test_log_and_sqrt_of_the_new_ops_are_swapped(tmp_path):
    """LogSoftmax's logf and ReduceL2's sqrtf (issue 26) are activation points like tanhf and expf."""
    path = tmp_path / "ops.c"
    path.write_text("#include <math.h>\nvoid f(const float *x, float *y) {\n    y[0] = x[0] - logf(x[1]);\n"
                    "    y[1] = sqrtf(x[2]);\n}\n")
    swaps = {(line, new) for line, _, new in edits(path, "activation")}
    assert swaps == {(3, "x[1]"), (3, "expf(x[1])"), (4, "x[2]"), (4, "expf(x[2])")}


def test_every_mutant_applies_alone_and_compiles(snippet, tmp_path):
    mutants = code_mutants(snippet)
    assert len(mutants) > 30
    for number, mutant in enumerate(mutants):
        path = tmp_path / f"m{number}.c"
        path.write_text(mutant.apply(snippet.read_text()))
        done = subprocess.run(["gcc", "-std=c99", "-fsyntax-only", str(path)], capture_output=True, text=True)
        assert done.returncode == 0, (mutant, done.stderr)


def test_weights_are_perturbed_by_the_relative_amount_and_unchanged_float32_is_equivalent(tmp_path):
    path = tmp_path / "params.c"
    path.write_text("const float w[4] = {\n    0.5, -1.25, 3e-2, 2.0f\n};\nconst float other[1] = {7.0};\n")
    mutants = weight_mutants(path, ["w"], (1e-3, 1e-9), 4, np.random.default_rng(0))
    assert len(mutants) == 8
    for mutant in mutants:
        old, new = float(mutant.original.rstrip("f")), float(mutant.replacement)
        if mutant.relative == 1e-3:
            assert new == pytest.approx(old * 1.001, rel=1e-7) and mutant.equivalent is None
        else:
            assert np.float32(new) == np.float32(old) and mutant.equivalent is not None
    assert "7.0" not in {m.original for m in mutants}


ONE_CHANNEL = """void conv(const float *input, float *output) {
    for (int ow = 0; ow < 3; ++ow) {
        float acc = 0.0f;
        for (int kw = 0; kw < 2; ++kw) {
            for (int ic = 0; ic < 1; ++ic) {
                acc += input[ow + kw + ic] * 0.5f + input[kw * 2 + ic * 2] - input[ic + kw];
            }
        }
        for (int j = 0; j < 2; ++j) {
            acc += input[ow + j] + input[j * 3];
        }
        output[ow] = acc;
    }
}
"""


@pytest.mark.tor("TOR-SEM-005")
def test_a_counter_fixed_at_zero_makes_only_its_sums_and_products_equivalent(tmp_path):
    path = tmp_path / "conv.c"
    path.write_text(ONE_CHANNEL)
    fixed = {(m.original, m.replacement, m.start) for m in code_mutants(path)
             if m.equivalent and m.equivalent.startswith("counter fixed at 0")}
    arith = {m.start: m for m in code_mutants(path) if m.operator == "arith"}
    line = ONE_CHANNEL.index("acc += input[ow + kw + ic]")

    def at(fragment: str, operator: str) -> int:
        return ONE_CHANNEL.index(fragment, line) + fragment.index(operator)

    # x + ic, kw * 2 + ic * 2 (right operand 0) and ic * 2 (left operand 0, constant divisor) are equivalent
    assert {start for _, _, start in fixed} == {at("kw + ic", "+"), at("kw * 2 + ic", "+ ic"), at("ic * 2", "*")}
    # ic + kw -> ic - kw is -kw: not equivalent; nor is anything in the loop over j (it runs twice)
    assert arith[at("ic + kw", "+")].equivalent is None
    assert arith[at("j * 3", "*")].equivalent is None and arith[at("ow + j", "+")].equivalent is None


SOFTMAX = """void softmax(float *output) {
    {
        float m = -INFINITY;
        float s = 0.0f;
        for (int k = 0; k < 10; ++k) {
            m = output[k] > m ? output[k] : m;
        }
        for (int k = 0; k < 10; ++k) {
            const float e = expf(output[k] - m);
            output[k] = e;
            s += e;
        }
        OTHER
    }
}
"""


@pytest.mark.parametrize("other, applies", [("", True), ("output[0] = output[0] + m;", False)])
def test_softmax_shift_rule_covers_only_changes_of_the_shift(tmp_path, other, applies):
    path = tmp_path / "softmax.c"
    path.write_text(SOFTMAX.replace("OTHER", other))
    rules = {(m.line, m.description): m.equivalent for m in code_mutants(path)}
    shift = [rules[(5, "loop bound 10 -> 9")], rules[(9, "- -> +")]]
    assert all(rule and rule.startswith("softmax shift invariance") for rule in shift) == applies
    assert applies or shift == [None, None]  # m read as anything but the shift: no rule
    assert rules[(5, "loop bound 10 -> 11")] is None  # reads past the block
    assert rules[(6, "output[k] -> index +1")] is None  # a different element, and past the block at k = 9


def test_integer_constants_get_their_classes_and_a_select_equal_at_its_boundary_is_equivalent(tmp_path):
    """Quantized C (docs/quantized.md): each integer array by its class (``INTEGER_CONSTANTS``), no change outside
    the element type's range; ``<stdint.h>`` types parse; a strictness swap whose select arms agree at the
    boundary is judged equivalent, one whose arms differ there is not."""
    params = tmp_path / "p.c"
    params.write_text("#include <stdint.h>\nconst int8_t m_l_kernel[2] = {127, -3};\nconst int m_l_shift[1] = {-7};\n"
                      "const int m_l_multiplier[1] = {1073741824};\nconst int m_l_bias[1] = {5};\n")
    found = weight_mutants(params, ["m_l_kernel", "m_l_shift", "m_l_multiplier", "m_l_bias"], (1e-3,), 2,
                           np.random.default_rng(0))
    assert sorted({(m.operator, m.replacement) for m in found}) == [
        ("int-bias", "4"), ("int-bias", "6"), ("int-weight", "-2"), ("int-weight", "-4"), ("int-weight", "126"),
        ("multiplier-1", "1073741823"), ("multiplier-1", "1073741825"), ("multiplier-1%", "1063004406"),
        ("multiplier-1%", "1084479242"), ("shift", "-6"), ("shift", "-8")]
    assert {m.dtype for m in found if m.operator == "int-weight"} == {"int8"}
    code = tmp_path / "c.c"
    code.write_text("#include <stdint.h>\nvoid f(const float *x, int8_t *y, int32_t v) {\n"
                    "    const float r = x[0];\n    y[0] = r > -128.0f ? (int8_t)r : -128;\n"
                    "    y[1] = (int8_t)(v < 0 ? 1 : 0);\n}\n")
    rules = {(m.line, m.replacement): m.equivalent for m in code_mutants(code) if m.operator == "relational"}
    assert "select equal at the boundary" in rules[(4, ">=")] and rules[(5, "<=")] is None
