"""OTAWA's flow-fact formats: the recorded real files read, round trips, the strict grammar, the checksum.

The recorded files are tests/wcet/otawa-recordings/ (real OTAWA 1.2 runs: dense.ff and
dense-context.ffx gave WCET[main] = 22715 cycles, fdense_m4.ff 15755,
mkff-output.ff is mkff's template, unbounded.ff made owcet stop with exit 2).
"""


import pytest

from wcet.facts import FlowFacts, LoopBound
from wcet.ffformat import (
    FlowFactFormatError,
    content,
    otawa_checksum,
    parse_f4,
    parse_f4_statements,
    parse_ffx,
    write_f4,
    write_ffx,
)
from recordings import OTAWA, needs_recordings



@needs_recordings
@pytest.mark.parametrize("elf, expected", [("arm7tdmi/dense.elf", 0x5C167506), ("cortex-m4/fdense_m4.elf", 0xD4FEB4D0)])
def test_checksum_is_the_one_mkff_wrote(elf, expected):
    assert otawa_checksum(OTAWA / elf) == expected


def test_checksum_folds_every_360_bytes_and_keeps_32_bits():
    assert otawa_checksum(b"") == 0xFFFFFFFF  # both sums 0xffff, folded: 0xffff
    # by hand: sum1 = 0xffff + 1 = 0x10000, sum2 = 0xffff + 0x10000 = 0x1ffff; folded once: 1 and 0x10000;
    # (0x10000 << 16 | 1) keeps 32 bits: 1
    assert otawa_checksum(b"\x01\x00") == 1
    data = bytes(range(256)) * 9
    value = otawa_checksum(data)
    assert 0 <= value <= 0xFFFFFFFF
    assert otawa_checksum(data + b"\x00\x00") != value  # one more half changes sum2
    # an odd length: elm adds the last byte with the high byte left from the previous half
    assert otawa_checksum(b"\x10\x20\x30") == otawa_checksum(b"\x10\x20\x30\x20")


@needs_recordings
def test_dense_ff_reads_into_flow_facts():
    facts = parse_f4(OTAWA / "arm7tdmi/dense.ff")
    assert facts.checksum == ("dense.elf", 0x5C167506)
    assert {(l.function, l.offset, l.max, l.total, l.context) for l in facts.loops} == {
        ("dense", 0xA0, 8, None, ()), ("dense", 0x74, 16, None, ())}


@needs_recordings
def test_fdense_m4_ff_reads_into_flow_facts():
    facts = parse_f4((OTAWA / "cortex-m4/fdense_m4.ff").read_text(), source="fdense_m4.ff")
    assert facts.checksum == ("fdense_m4.elf", 0xD4FEB4D0)
    assert sorted((l.function, l.offset, l.max) for l in facts.loops) == [("layer", 0x52, 16), ("layer", 0x6A, 8)]


@needs_recordings
def test_dense_context_ffx_gives_call_context_bounds():
    facts = parse_ffx(OTAWA / "arm7tdmi/dense-context.ffx", root="main")
    assert sorted((l.function, l.offset, l.max, l.context) for l in facts.loops) == [
        ("dense", 0x74, 16, (0x8114,)), ("dense", 0xA0, 8, (0x8114,))]
    # written back with the entry, it is the recorded structure again
    text = write_ffx(facts, OTAWA / "arm7tdmi/dense.elf", "main")
    assert '<function label="main">' in text and '<call address="0x8114">' in text
    assert content(parse_ffx(text)) == content(facts)


@needs_recordings
def test_mkff_template_is_an_error_listing_every_unbounded_loop():
    with pytest.raises(FlowFactFormatError) as caught:
        parse_f4(OTAWA / "cortex-m4/mkff-output.ff")
    assert len(caught.value.problems) == 2
    assert "mkff-output.ff:4" in caught.value.problems[0] and '"layer" + 0x6a' in caught.value.problems[0]
    assert "mkff-output.ff:5" in caught.value.problems[1] and '"layer" + 0x52' in caught.value.problems[1]
    # the statements themselves are F4: the template reads as statements with unknown bounds
    loops = [s for s in parse_f4_statements(OTAWA / "cortex-m4/mkff-output.ff") if s.kind == "loop"]
    assert [(s.address.label, s.address.offset, s.unknown) for s in loops] == [("layer", 0x6A, True),
                                                                               ("layer", 0x52, True)]


@needs_recordings
def test_unbounded_ff_is_an_error_naming_the_loop_owcet_named():
    with pytest.raises(FlowFactFormatError) as caught:
        parse_f4(OTAWA / "cortex-m4/unbounded.ff")
    (problem,) = caught.value.problems
    assert problem.startswith("unbounded.ff:2:") and '"layer" + 0x52' in problem and "?" in problem


RICH = FlowFacts(
    loops=(LoopBound("dense", 0xA0, 8, source=("dense.c", 14), origin="manifest+source", justification="L0"),
           LoopBound("dense", 0x74, 16, total=128),
           LoopBound(None, 0x8000, 3),
           LoopBound("__aeabi_fmul", 0xE0, 22, justification="23-bit mantissa -- shifted */ left")),
    multicalls={0x8114: (0x803C, 0x8000)}, multibranches={0x8018: (0x8040, 0x804C, 0x80E8)},
    sequences={0x8114: (0x803C, 0x8000, 0x803C)},
    noreturn=frozenset({"abort"}), nocall=frozenset({"trace"}), ignorecontrol=frozenset({0x8040}),
    checksum=("net.elf", 0xDEADBEEF))


def test_f4_round_trip():
    text = write_f4(RICH, entry="net")
    assert content(parse_f4(text)) == content(RICH)
    assert "multicall 0x8114 to 0x803c, 0x8000;" in text
    assert "multibranch 0x8018 to 0x8040, 0x804c, 0x80e8;" in text
    assert "// sequence at 0x8114 (one target per execution, Assay's precise bound only): 0x803c, 0x8000, 0x803c" \
        in text  # OTAWA has no such fact: a comment, not read back
    assert 'loop "dense" + 0x74 max 16 total 128;' in text
    assert "checksum \"net.elf\" 0xdeadbeef;" in text


def test_ffx_round_trip_with_call_contexts():
    facts = FlowFacts(loops=(LoopBound("dense", 0xA0, 8), LoopBound("dense", 0x74, 16, total=100, context=(0x8114,)),
                             LoopBound("inner", 0x10, 4, context=(0x8114, 0x8050))),
                      noreturn=frozenset({"abort"}), nocall=frozenset({"trace"}))
    text = write_ffx(facts, entry="main", call_targets={0x8114: "dense"})
    assert content(parse_ffx(text, root="main")) == content(facts)


def test_ffx_round_trip_with_multicall_multibranch_and_ignorecontrol():
    # the form of OTAWA's FlowFactLoader::scanMultiCall / scanMultiBranch: <target> children of the branch
    text = write_ffx(RICH, entry="net")
    assert '<multicall address="0x8114">\n\t\t<target address="0x803c"/>\n\t\t<target address="0x8000"/>\n' \
           '\t</multicall>' in text
    assert '<multibranch address="0x8018">' in text and '<ignorecontrol address="0x8040"/>' in text
    back = parse_ffx(text)
    assert back.multicalls == RICH.multicalls and back.multibranches == RICH.multibranches
    assert back.ignorecontrol == RICH.ignorecontrol and not back.sequences


@pytest.mark.parametrize("text, message", [
    ('<multicall address="0x10"/>', "has no target"),
    ('<multicall><target address="0x20"/></multicall>', "without a location"),
    ('<multibranch address="0x10"><call address="0x20"/></multibranch>', "holds <target> elements, not <call>"),
    ('<multibranch address="0x10"><target label="f"/></multibranch>', "needs the ELF's symbols"),
    ('<ignorecontrol label="f"/>', "needs the ELF's symbols"),
])
def test_ffx_multi_targets_are_parsed_strictly(text, message):
    with pytest.raises(FlowFactFormatError, match=message):
        parse_ffx(f"<flowfacts>{text}</flowfacts>")


def test_formats_refuse_what_they_cannot_express():
    with pytest.raises(FlowFactFormatError, match="call-context bound needs the analysed function"):
        write_f4(FlowFacts(loops=(LoopBound("f", 4, 2, context=(0x100,)),)))
    with pytest.raises(FlowFactFormatError, match="multicall at 0x1 has no target"):
        write_ffx(FlowFacts(multicalls={1: ()}))
    with pytest.raises(FlowFactFormatError, match="multibranch at 0x1 has no target"):
        write_f4(FlowFacts(multibranches={1: ()}))
    with pytest.raises(FlowFactFormatError, match="analysed function"):
        write_ffx(FlowFacts(loops=(LoopBound("f", 4, 2, context=(0x100,)),)))
    with pytest.raises(FlowFactFormatError, match="F4 integers"):
        write_f4(FlowFacts(loops=(LoopBound("f", 4, 2**31),)))
    with pytest.raises(FlowFactFormatError, match="F4 string"):
        write_f4(FlowFacts(loops=(LoopBound('f"', 4, 2),)))


@pytest.mark.parametrize("text, message", [
    ('loop "f" + 4 8', "expected ';'"),
    ('loop "f" + 4 8;\r\n', "'\\r' is not F4"),
    ('looop "f" 3;', "'looop' is not F4"),
    ('loop "f" + 08 3;', "expected ';'"),  # OTAWA's lexer reads 08 as 0 then 8
    ('loop "f" + 4 3 in "g" / "f";', "needs the ELF"),
    ('memory access 0x100 0x2000 0x3000;', "expected '..'"),
    ('force loop 0x100;', "'branch' or 'call' after 'force'"),
    ('multibranch 0x10 to ?;', "indirect jump at 0x10 has unknown targets"),
    ('multibranch 0x10 0x20;', "expected 'to'"),
    ('multicall 0x10 to 0x20,;', "expected an address"),
    ('loop "f" + 2 max 3 max 4;', "one 'max'"),
    ('loop "f.c" : 3 4;', "needs the ELF's DWARF line table"),
    ('loop "f" + 4 min 2 max 3 min 1;', "one 'min'"),
    ('multicall 0x10 to ?;', "unknown targets"),
    ('loop "f" + 4 2147483648;', "OTAWA can hold"),
    ('loop "f + 4 8;', "unterminated string"),
    ('/* never closed', "unterminated"),
    ('multicall "f" + 4 to 0x20;', "needs the ELF's symbols"),
    ('nocall 0x8000;', "needs the ELF's symbols"),
])
def test_f4_outside_the_grammar_is_refused_with_its_line(text, message):
    with pytest.raises(FlowFactFormatError) as caught:
        parse_f4("// first line\n" + text, source="bad.ff")
    assert any(message in p for p in caught.value.problems), caught.value.problems
    assert all(p.startswith("bad.ff:2:") for p in caught.value.problems), caught.value.problems


def test_f4_lexes_like_otawa():
    facts = parse_f4('/* a\n comment */ loop "f"+010 0b11; // octal offset, binary bound\n'
                     'no call "g"; ignore control 0X20; no return "h"; loop 0x8000 max 5 total 7;\n'
                     'multicall "f" + 4 to "g", 0x30;', symbols={"f": 0x100, "g": 0x200, "h": 0x300})
    assert content(facts)[0] == frozenset({("f", 8, 3, None, ()), (None, 0x8000, 5, 7, ())})
    assert facts.nocall == {"g"} and facts.noreturn == {"h"} and facts.ignorecontrol == {0x20}
    assert facts.multicalls == {0x104: (0x200, 0x30)}


def test_every_problem_is_listed_at_once():
    with pytest.raises(FlowFactFormatError) as caught:
        parse_f4('loop "a" + 4 ?;\nloop "b" + 8 ?;\nmulticall 0x10 to ?;\n')
    assert len(caught.value.problems) == 3


@pytest.mark.parametrize("text, message", [
    ("<flowfact/>", "not <flowfacts>"),
    ("<flowfacts><function label='f'><loop label='f' offset='x4' maxcount='3'/></function></flowfacts>",
     "not an integer"),
    ("<flowfacts><function label='f'><loop source='f.c' line='3' maxcount='3'/></function></flowfacts>",
     "needs the ELF's DWARF line table"),
    ("<flowfacts><call address='0x10'/></flowfacts>", "not an FFX element OTAWA reads at the top level"),
    ("<flowfacts><function label='f'><noreturn label='g'/></function></flowfacts>", "inside a function"),
    ("<flowfacts><preserve address='0x100'/></flowfacts>", "not an FFX element OTAWA reads at the top level"),
    ("<flowfacts><function label='f'>text</function></flowfacts>", "outside any attribute"),
    ("<flowfacts><function label='f'>", "not well-formed"),
])
def test_ffx_outside_the_grammar_is_refused(text, message):
    with pytest.raises(FlowFactFormatError) as caught:
        parse_ffx(text, source="bad.ffx")
    assert any(message in p for p in caught.value.problems), caught.value.problems


def test_ffx_functions_by_address_need_the_elf():
    by_address = '<flowfacts><function address="0x8000"><loop label="f" offset="0x10" maxcount="3"/></function></flowfacts>'
    with pytest.raises(FlowFactFormatError, match="call context from 0x8000 needs the ELF"):
        parse_ffx(by_address, source="top.ffx")


def _fletcher_one_half_at_a_time(data: bytes) -> int:
    """elm's loop as written (otawa_checksum's docstring), for the vectorised version to be checked against."""
    sum1 = sum2 = 0xFFFF
    length = high = 0
    for index in range(0, len(data), 2):
        low = data[index]
        if index + 1 < len(data):
            high = data[index + 1]
        sum1 += low | (high << 8)
        sum2 += sum1
        length += 2
        if length == 360:
            sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
            sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
            length = 0
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return ((sum2 << 16) | sum1) & 0xFFFFFFFF


@pytest.mark.parametrize("length", [0, 1, 2, 3, 359, 360, 361, 720, 721, 5000, 65537, 2 * 360 * 4096 + 7])
def test_checksum_equals_elms_loop_on_any_length(length):
    import random

    rng = random.Random(length)
    runs = bytes(rng.choice((0, 0, 0, 1, 255)) for _ in range(length))  # zero runs: folds with a zero low half
    for data in (bytes(rng.randrange(256) for _ in range(length)), b"\xff" * length, bytes(length), runs,
                 b"\x01\x00" + bytes(max(0, length - 2))):
        assert otawa_checksum(data) == _fletcher_one_half_at_a_time(data)
