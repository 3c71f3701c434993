"""The analyzer end to end: OTAWA's figures exactly, known worst paths, regions, errors, and a generated
model whose WCET must bound what QEMU measured under the same timing model.

OTAWA (tests/wcet/otawa-recordings/README.md): ``owcet -s trivial`` gave WCET[main] = 22715 cycles on
arm7tdmi/dense.elf (bounds "dense" + 0xa0 8, + 0x74 16, in F4 and in an FFX call context) and
WCET[layer] = 15755 on cortex-m4/fdense_m4.elf ("layer" + 0x6a 8, + 0x52 16).
"""

import shutil
import subprocess

import programs
import pytest

from wcet import armcode, timing
from wcet.analyzer import analyze, find_unbounded_loops, reachable_loops
from wcet.errors import AnalysisError, UnboundedLoopsError
from wcet.facts import FlowFacts, LoopBound
from wcet.program import load_program
from recordings import OTAWA, needs_recordings

needs_gcc = pytest.mark.skipif(not programs.HAVE_GCC, reason="arm-none-eabi-gcc not installed (.ci/setup)")
_QEMU = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm", "gcc")
needs_qemu = pytest.mark.skipif(not all(shutil.which(t) for t in _QEMU), reason="ARM toolchain or QEMU missing")

DENSE = FlowFacts(loops=(LoopBound("dense", 0xA0, 8), LoopBound("dense", 0x74, 16)))
DENSE_IN_CONTEXT = FlowFacts(loops=(LoopBound("dense", 0xA0, 8, context=(0x8114,)),
                                    LoopBound("dense", 0x74, 16, context=(0x8114,))))
LAYER = FlowFacts(loops=(LoopBound("layer", 0x6A, 8), LoopBound("layer", 0x52, 16)))


# --------------------------------------------------------------------------- OTAWA's figures, exactly


@pytest.mark.tor("TOR-WCET-002")
@needs_recordings
@pytest.mark.parametrize("facts", [DENSE, DENSE_IN_CONTEXT], ids=["f4", "ffx-context"])
def test_dense_main_is_22715_cycles_as_otawa_trivial(facts):
    result = analyze(OTAWA / "arm7tdmi" / "dense.elf", "main", facts, "trivial")
    assert result.wcet_cycles == 22715 and result.exact
    assert result.functions == ["main", "dense", "mac"]
    assert sorted((loop.function, loop.offset, loop.bound) for loop in result.loops) == \
        [("dense", 0x74, 16), ("dense", 0xA0, 8)]
    assert {loop.source_line for loop in result.loops} == {("dense.c", 14), ("dense.c", 16)}


@pytest.mark.tor("TOR-WCET-002")
@needs_recordings
def test_fdense_layer_is_15755_cycles_as_otawa_trivial():
    result = analyze(OTAWA / "cortex-m4" / "fdense_m4.elf", "layer", LAYER, "trivial")
    assert result.wcet_cycles == 15755 and result.exact
    assert result.counts[0x800006A] == 9 and result.counts[0x8000052] == 8 * 17  # the tests run bound + 1 times


@needs_recordings
def test_a_bound_in_another_context_does_not_apply():
    facts = FlowFacts(loops=(LoopBound("dense", 0xA0, 8, context=(0x9999,)), LoopBound("dense", 0x74, 16)))
    with pytest.raises(UnboundedLoopsError, match=r"dense \+ 0xa0 \(header 0x80dc, dense.c:14\)"):
        analyze(OTAWA / "arm7tdmi" / "dense.elf", "main", facts, "trivial")


@needs_recordings
def test_other_timing_models_and_regions_on_dense():
    elf = OTAWA / "arm7tdmi" / "dense.elf"
    program = load_program(elf)
    mac, dense = program.functions["mac"], program.functions["dense"]
    regions = {"mac": [(mac.start, mac.end)], "dense": [(dense.start, dense.end)], "none": []}
    trivial = analyze(program, "main", DENSE, "trivial", regions)
    # main's 9 instructions are in no region, dense's calls of mac count in mac (a region of its own)
    assert trivial.regions == {"mac": 128 * 15 * 5, "dense": 22715 - 9 * 5 - 128 * 15 * 5, "none": 0}
    native = analyze(program, "main", DENSE, timing.get("arm7tdmi"), regions)
    assert 4543 < native.wcet_cycles < 22715 and native.timing.startswith("arm7tdmi")
    assert native.regions["mac"] < native.regions["dense"] < native.wcet_cycles


# --------------------------------------------------------------------------- hand-written programs


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    directory = tmp_path_factory.mktemp("shapes")
    return {target: load_program(programs.build("shapes.c", target, directory)) for target in ("arm7tdmi", "cortex-m4")}


def shape_facts(program):
    marks = programs.loop_lines()
    by_line = {loop.source_line[1]: loop for loop in reachable_loops(program, "entry")}
    return FlowFacts(loops=tuple(LoopBound(by_line[line].function, by_line[line].offset, bound, total)
                                 for line, bound, total in marks.values()))


def block_at_line(program, function, line):
    """The start of the block of ``function``'s CFG that holds the first instruction of source ``line``."""
    cfg = program.cfg(function)
    for start, block in sorted(cfg.blocks.items()):
        if any(program.code.line(insn.address) == ("shapes.c", line) for insn in block.instructions):
            return start
    raise AssertionError(f"no block for line {line}")


@needs_gcc
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4"])
def test_known_worst_paths(shapes, target):
    program = shapes[target]
    facts = shape_facts(program)
    # a diamond takes its longer arm
    diamond = analyze(program, "diamond", facts, "trivial")
    assert diamond.counts[block_at_line(program, "diamond", 12)] == 1
    assert diamond.counts[block_at_line(program, "diamond", 16)] == 0
    # nested loops: the inner body runs 4 x 3 times
    nested = analyze(program, "nested", facts, "trivial")
    assert nested.counts[block_at_line(program, "nested", 25)] == 12
    # an early exit is never worse than running the loop out
    early = analyze(program, "early_exit", facts, "trivial")
    assert early.counts[block_at_line(program, "early_exit", 34)] == 10
    # a call in a loop: the callee's WCET once per iteration
    calls = analyze(program, "calls_in_loop", facts, "trivial")
    bare = analyze(program, "calls_in_loop", FlowFacts(loops=facts.loops, nocall=frozenset({"diamond"})), "trivial")
    assert calls.wcet_cycles - bare.wcet_cycles == 5 * diamond.wcet_cycles
    # a total bound caps the triangular inner loop at 10 iterations over all 4 entries
    triangular = analyze(program, "triangular", facts, "trivial")
    loose = FlowFacts(loops=tuple(b if b.total is None else LoopBound(b.function, b.offset, b.max) for b in facts.loops))
    inner = program.loops("triangular")[1]
    per_iteration = 5 * sum(len(program.cfg("triangular").blocks[start].instructions) for start in inner.blocks)
    assert analyze(program, "triangular", loose, "trivial").wcet_cycles - triangular.wcet_cycles == 6 * per_iteration


@needs_gcc
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4"])
def test_regions_bound_the_time_in_their_code_and_their_callees(shapes, target):
    """A region counts its own instructions and, as the measurement does, the code in no region that it
    calls; a callee's code in another region counts there (V3: layers are functions of their own)."""
    program = shapes[target]
    facts = shape_facts(program)

    def span(name):
        function = program.functions[name]
        return [(function.start, function.end)]

    names = ["entry", "nested", "early_exit", "calls_in_loop", "diamond", "triangular", "choose"]
    regions = {name: span(name) for name in names}
    result = analyze(program, "entry", facts, "trivial", regions)
    wcet = {name: analyze(program, name, facts, "trivial").wcet_cycles for name in names}
    own_entry = 5 * len([i for b in program.cfg("entry").blocks.values() for i in b.instructions])  # one path
    assert result.regions["entry"] == own_entry  # its callees are regions of their own
    assert result.regions["calls_in_loop"] == wcet["calls_in_loop"] - 5 * wcet["diamond"]
    assert result.regions["diamond"] == 7 * wcet["diamond"]  # 5 in calls_in_loop, 1 direct, 1 through choose
    assert result.regions["nested"] == 2 * wcet["nested"]  # direct, and choose's worst path
    assert sum(result.regions.values()) >= result.wcet_cycles  # a partition of the code: the parts cover it
    # code in no region counts in the region it is called from: entry alone holds every callee
    assert analyze(program, "entry", facts, "trivial", {"entry": span("entry")}).regions == {
        "entry": result.wcet_cycles}
    alone = analyze(program, "entry", facts, "trivial", {"entry": span("entry"), "diamond": span("diamond")})
    assert alone.regions["diamond"] == 7 * wcet["diamond"]  # also when called from code in no region
    assert alone.regions["entry"] + alone.regions["diamond"] >= result.wcet_cycles
    assert alone.regions["entry"] < result.wcet_cycles
    # diamond, in no region, called from calls_in_loop's code: counted there, not in entry's region
    nested = analyze(program, "entry", facts, "trivial", {"entry": span("entry"), "loop": span("calls_in_loop")})
    assert nested.regions["loop"] == wcet["calls_in_loop"]
    assert nested.regions["entry"] + nested.regions["loop"] == result.wcet_cycles  # one path: a partition


@pytest.mark.tor("TOR-WCET-003")
@needs_gcc
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4"])
def test_every_unbounded_loop_is_listed_at_once(shapes, target):
    program = shapes[target]
    with pytest.raises(UnboundedLoopsError) as error:
        analyze(program, "entry", FlowFacts(), "trivial")
    message = str(error.value)
    assert "\n" not in message and message.startswith("6 loops without a bound reachable from entry: ")
    for line, _, _ in programs.loop_lines().values():
        assert f"shapes.c:{line})" in message
    assert len(error.value.loops) == 6 and {loop.function for loop in error.value.loops} == \
        {"nested", "early_exit", "calls_in_loop", "triangular"}
    assert [loop.source_line[1] for loop in find_unbounded_loops(program, "entry")] == \
        sorted(line for line, _, _ in programs.loop_lines().values())
    partial = FlowFacts(loops=shape_facts(program).loops[:4])
    assert len(find_unbounded_loops(program, "entry", partial)) == 2


@pytest.mark.tor("TOR-WCET-003")
@needs_gcc
def test_indirect_calls_need_their_targets(shapes):
    for program in shapes.values():
        with pytest.raises(AnalysisError, match=r"unresolved indirect branch: indirect call at 0x[0-9a-f]+ in "
                                                r"pointer_call \(give the targets with a multicall flow fact\)"):
            analyze(program, "pointer_call", None, "trivial")
        site = next(a for a, _ in program.cfg("pointer_call").unresolved)
        targets = tuple(program.functions[n].start for n in ("twice", "square"))
        both = analyze(program, "pointer_call", FlowFacts(multicalls={site: targets}), "trivial")
        one = analyze(program, "pointer_call", FlowFacts(multicalls={site: targets[:1]}), "trivial")
        assert both.wcet_cycles > one.wcet_cycles  # square is the longer
        assert set(both.functions) == {"pointer_call", "twice", "square"}


@pytest.mark.tor("TOR-WCET-003")
@needs_gcc
def test_recursion_is_refused_naming_the_call(shapes):
    program = shapes["arm7tdmi"]
    with pytest.raises(AnalysisError, match=r"recursion: recursive -> recursive \(the call at 0x[0-9a-f]+ closes"):
        analyze(program, "recursive", None, "trivial")


@needs_gcc
def test_hand_written_flow_worst_cases(tmp_path):
    # counted by hand from arm_flow.S: entry 9, condret 12 (no conditional return taken), tailer 3 + 12,
    # sharer 6 (through owner's tail), pool 4, normalise 2 + 23 x 4 + 2, the veneer 1 + far_away 2
    program = load_program(programs.build("arm_flow.S", "arm7tdmi", tmp_path))
    result = analyze(program, "entry", FlowFacts(loops=(LoopBound("normalise", 8, 22),)), "trivial")
    assert result.wcet_cycles == 5 * (9 + 12 + 15 + 6 + 4 + 96 + 3)
    assert any("sharer: follows code outside its symbol" in note for note in result.notes)
    thumb = load_program(programs.build("thumb_flow.S", "cortex-m4", tmp_path))
    # entry 6, condret 14, tailer 2 + 14, sharer 5, pool 4
    assert analyze(thumb, "entry", None, "trivial").wcet_cycles == 5 * (6 + 14 + 16 + 5 + 4)


# --------------------------------------------------------------------------- bad input


@needs_gcc
def test_bad_input_gives_one_line_errors_with_the_address(tmp_path):
    elf = programs.build("bad.S", "arm7tdmi", tmp_path)
    program = load_program(elf)
    cases = {
        ("nope", "trivial"): f"{elf}: no function 'nope'",
        ("mismatched", "trivial"): f"Thumb/ARM mismatch at {program.functions['mismatched'].start:#x}: the symbol "
                                   f"mismatched says ARM, the mapping symbols say Thumb",
        ("armv5", "arm7tdmi"): f"arm7tdmi timing model: no ARM7TDMI (ARMv4T) timing for 'clz r0, r0' at "
                               f"{program.functions['armv5'].start:#x}",
        ("undecodable", "trivial"): f"no instruction decodes at {program.functions['undecodable'].start + 4:#x}",
        ("indirect", "trivial"): f"indirect jump at {program.functions['indirect'].start + 4:#x} in indirect",
    }
    for (function, model), expected in cases.items():
        with pytest.raises(AnalysisError) as error:
            analyze(elf, function, None, model)
        assert expected in str(error.value) and "\n" not in str(error.value), function


@needs_gcc
def test_stripped_elf_is_refused(tmp_path):
    elf = programs.build("shapes.c", "arm7tdmi", tmp_path)
    stripped = tmp_path / "stripped.elf"
    subprocess.run(["arm-none-eabi-strip", "-o", str(stripped), str(elf)], check=True)
    with pytest.raises(AnalysisError, match=r"stripped\.elf: no symbol table \(stripped ELF\?\): cannot find 'entry'"):
        analyze(stripped, "entry", None, "trivial")


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(AnalysisError, match="no such file"):
        analyze(tmp_path / "absent.elf", "main", None, "trivial")


# --------------------------------------------------------------------------- a generated model vs QEMU

# libgcc's soft-float loops on the ARM7TDMI (bounds derived in docs/wcet.md): __aeabi_fmul normalises a
# denormal operand one bit per iteration, at most 22 back edges each; the analysis finds no others on
# acas-reg50.
LIBGCC = (LoopBound("__aeabi_fmul", 0xE0, 22), LoopBound("__aeabi_fmul", 0xFC, 22))


def manifest_facts(program, manifest, entry):
    """Bounds by hand from the manifest: loop ``bound`` at the binary loop whose header line is ``line``."""
    by_line = {loop.source_line[1]: loop for loop in program.loops(entry) if loop.source_line}
    bounds = [LoopBound(by_line[loop["line"]].function, by_line[loop["line"]].offset, loop["bound"])
              for layer in manifest["layers"] for loop in layer["loops"]]
    return FlowFacts(loops=(*bounds, *LIBGCC))


@pytest.mark.tor("TOR-WCET-001")
@needs_qemu
@pytest.mark.arm
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_generated_model_wcet_bounds_the_measured_cycles(tmp_path, target):
    from harness import targets
    from harness.measurement import cycles

    settings = cycles.Settings(n_inputs=5, work_dir=tmp_path, timeout=300)
    counts, code, _ = cycles.count_item(cycles.Item("acas-reg50", "assay-v2", "keras", target, ()), settings, "met")
    program = load_program(counts.code.path)
    facts = manifest_facts(program, code.manifest, code.entry)
    regions: dict[str, list] = {name: [] for name in counts.bucket_names}
    for piece in armcode.layer_ranges(counts.code, code.manifest, code.entry):
        regions[counts.bucket_names[piece.bucket]].append((piece.start, piece.end))
    for name in ("trivial", targets.get(target).timing):
        model = timing.get(name)
        figures = cycles.price(counts, model)
        result = analyze(program, code.entry, facts, model, regions)
        assert result.exact
        assert result.wcet_cycles >= figures.cycles.sum(axis=1).max(), name
        for bucket, layer in enumerate(counts.bucket_names):
            assert result.regions[layer] >= figures.cycles[:, bucket].max(), (name, layer)
        assert sum(result.regions.values()) >= result.wcet_cycles
