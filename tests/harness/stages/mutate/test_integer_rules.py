"""The equivalence rules of integer C built on value ranges (``harness.stages.mutate.ranges``, docs/mutation.md
"Quantized models"): each proves the mutants it is sound for, and leaves alone the look-alike it is not."""

from harness.stages.mutate.operators import code_mutants, constant_spans

REQUANTIZE = """#include <stdint.h>
const int m_shift[2] = {-7, -8};
const int m_multiplier[2] = {1075097727, 1916898262};
void f(const int32_t *a, int8_t *y) {
    for (int o = 0; o < 2; ++o) {
        int32_t acc = a[o];
        int32_t v;
        {
            const int64_t p = (int64_t)acc * m_multiplier[o];
            const int64_t n = p >= 0 ? p + 1073741824 : p - 1073741823;
            const int64_t h = n >= 0 ? n >> 31 : -(-n >> 31);
            const int e = m_shift[o] < 0 ? -m_shift[o] : 0;
            const int64_t q = h >= 0 ? h >> e : ~(~h >> E);
            const int64_t mask = ((int64_t)1 << e) - 1;
            v = (int32_t)(q + ((h & mask) > (mask >> 1) + (h < 0 ? 1 : 0) ? 1 : 0));
        }
        y[o] = (int8_t)((v < LOW ? LOW : v > 255 ? 255 : v) - ZP);
    }
    for (int k = 0; k < 3; ++k) {
        const int i = k + 1;
        if (i >= 1 && i < 3) {
            y[i] = 0;
        }
        if (i < 4) {
            y[i] = 1;
        }
    }
}
"""


def rules(tmp_path, low: str = "0", zp: str = "128", e: str = "e", constants: bool = True) -> dict:
    path = tmp_path / "r.c"
    path.write_text(REQUANTIZE.replace("LOW", low).replace("ZP", zp).replace("E);", f"{e});"))
    spans = constant_spans([path], ["m_shift", "m_multiplier"]) if constants else {}
    return {(m.line, m.original, m.replacement): m.equivalent for m in code_mutants(path, spans)
            if m.operator in ("arith", "relational")}


def test_a_comparison_with_a_bound_its_value_never_passes_is_equivalent(tmp_path):
    """``i`` runs over 1..3: ``i < 3`` and ``i != 3`` agree on it (they differ above 3), ``i < 3`` and ``i <= 3`` do
    not (at 3); ``i < 4`` agrees with ``i != 4`` and ``i <= 4`` (4 is never reached); a constant array's test by its
    values, known only when the data are given."""
    found = rules(tmp_path)
    assert "compared value out of reach" in found[(21, "<", "!=")] and found[(21, "<", "<=")] is None
    assert "compared value out of reach" in found[(24, "<", "!=")] and "out of reach" in found[(24, "<", "<=")]
    assert found[(24, "<", ">")] is None
    assert "compared value out of reach" in found[(12, "<", "!=")]  # m_shift holds -7 and -8 only
    assert rules(tmp_path, constants=False)[(12, "<", "!=")] is None  # its values unknown: no proof


def test_a_select_of_an_arithmetic_shift_and_its_complemented_form_ignores_its_condition(tmp_path):
    found = rules(tmp_path)
    assert "select of equal arms" in found[(13, ">=", "<")] and "select of equal arms" in found[(13, ">=", ">")]
    assert found[(13, ">=", "<")] is not None
    other = rules(tmp_path, e="2")  # ~(~h >> 2) is not h >> e
    assert other[(13, ">=", "<")] is None


def test_a_conversion_to_int8_does_not_tell_minus_128_from_plus_128(tmp_path):
    assert "equal modulo 2^8" in rules(tmp_path)[(17, "-", "+")]
    assert not (rules(tmp_path, zp="127")[(17, "-", "+")] or "").startswith("equal modulo")  # 254 is not 0 mod 256


def test_the_rounding_of_a_negative_product_is_masked_by_a_relu_clamp_and_not_by_a_saturation(tmp_path):
    """Under ``v < 0 ? 0 : ...`` (a fused ReLU: every v <= 0 stores the same byte) the negative branch's rounding and
    the tie at 0 cannot show; under a saturation at -111 (no ReLU) the negative values are stored as they are."""
    relu = rules(tmp_path)
    for key in ((10, "-", "+"), (10, ">=", ">"), (15, "<", "<="), (15, "+", "-")):
        assert "masked downstream" in relu[key], key
    for key in ((10, "+", "-"), (10, ">=", "<"), (15, "<", "!=")):  # the positive side: shows
        assert relu[key] is None, key
    saturation = rules(tmp_path, low="-111", zp="17")
    assert saturation[(10, "-", "+")] is None and saturation[(15, "+", "-")] is None
    assert "masked downstream" in saturation[(10, ">=", ">")]  # at p = 0 both branches round to 0
