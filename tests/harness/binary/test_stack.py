"""The static stack analysis: instruction decoding on hand-assembled encodings,
gcc's .su/.ci parsing, and the call-graph bound on hand-written C compiled for
ARM (a call chain with known local arrays; recursion, function pointers,
variable-length arrays and a push in a loop give an explicit "unbounded")."""

import dataclasses
import json
import shutil

import pytest

from harness import targets
from harness.binary import elf, stack
from harness.generators.generated import GeneratedCode
from harness.runners import qemu

# --------------------------------------------------------------------------- decoding (no toolchain needed)


def effect_of(hex_bytes, thumb=False, frame_pointers=frozenset()):
    instructions, bad = stack.decode(bytes.fromhex(hex_bytes), 0x1000, thumb, frame_pointers)
    assert bad is None and len(instructions) == 1, (hex_bytes, instructions)
    return instructions[0].effect


@pytest.mark.parametrize("hex_bytes, thumb, grows, text", [
    ("f0402de9", False, 20, "push {r4, r5, r6, r7, lr}"),  # ARM push {r4-r7, lr}
    ("10d04de2", False, 16, "sub sp, sp, #0x10"),  # ARM sub sp, sp, #16
    ("04e02de5", False, 4, "str lr, [sp, #-4]!"),  # ARM push {lr} as gas encodes it
    ("048b2ded", False, 16, "vpush {d8, d9}"),  # ARM vpush {d8-d9}
    ("2de9f04f", True, 36, "push.w {r4, r5, r6, r7, r8, sb, sl, fp, lr}"),  # Thumb-2 push.w {r4-r11, lr}
    ("2ded048b", True, 16, "vpush {d8, d9}"),  # Thumb-2 vpush {d8-d9}
    ("2ded028a", True, 8, "vpush {s16, s17}"),  # single-precision registers: 4 bytes each
    ("84b0", True, 16, "sub sp, #0x10"),  # Thumb sub sp, #16
    ("adf5807d", True, 256, "sub.w sp, sp, #0x100"),
    ("4df804ed", True, 4, "str lr, [sp, #-0x4]!"),
])
def test_stack_decrements(hex_bytes, thumb, grows, text):
    instructions, _ = stack.decode(bytes.fromhex(hex_bytes), 0x1000, thumb)
    assert instructions[0].text == text
    assert instructions[0].effect == stack.Effect("grow", bytes=grows)


@pytest.mark.parametrize("hex_bytes, thumb, kind, final", [
    ("f040bde8", False, "shrink", False),  # pop {r4-r7, lr}
    ("08d08de2", False, "shrink", False),  # add sp, sp, #8
    ("048bbdec", False, "shrink", False),  # vpop {d8, d9}
    ("01b0", True, "shrink", False),  # add sp, #4
    ("03d04de0", False, "dynamic", False),  # sub sp, sp, r3
    ("1eff2fe1", False, "return", True),  # bx lr
    ("1eff2f11", False, "return", False),  # bxne lr: a conditional return goes on
    ("1080bde8", False, "return", True),  # pop {r4, pc}
    ("04f09de4", False, "return", True),  # ldr pc, [sp], #4 (pop {pc})
    ("0ef0a0e1", False, "return", True),  # mov pc, lr
    ("5df804fb", True, "return", True),  # Thumb-2 ldr pc, [sp], #4
    ("7047", True, "return", True),  # Thumb bx lr
    ("33ff2fe1", False, "indirect-call", False),  # blx r3
    ("9847", True, "indirect-call", False),  # Thumb blx r3
    ("13ff2fe1", False, "indirect-jump", True),  # bx r3
    ("00f093e5", False, "indirect-jump", True),  # ldr pc, [r3]
    ("03f19fe7", False, "jump-table", True),  # ldr pc, [pc, r3, lsl #2]
    ("d0e803f0", True, "jump-table", True),  # tbb [r0, r3]
])
def test_control_flow_and_other_stack_effects(hex_bytes, thumb, kind, final):
    effect = effect_of(hex_bytes, thumb)
    assert (effect.kind, effect.final) == (kind, final)


def test_direct_calls_and_branches_carry_their_target():
    assert effect_of("feffffeb") == stack.Effect("call", target=0x1000)  # bl .
    assert effect_of("fefffffa") == stack.Effect("call", target=0x1000)  # blx . (switches to Thumb)
    assert effect_of("fff7feff", thumb=True) == stack.Effect("call", target=0x1000)
    assert effect_of("feffffea") == stack.Effect("branch", target=0x1000, final=True)  # b .
    assert effect_of("feffff0a") == stack.Effect("branch", target=0x1000, final=False)  # beq .
    assert effect_of("10b1", thumb=True).kind == "branch"  # cbz r0


def test_sp_from_frame_pointer_is_an_epilogue_only_when_the_function_set_it():
    r7 = stack.arm.ARM_REG_R7
    assert effect_of("bd46", thumb=True, frame_pointers=frozenset({r7})).kind == "restore"  # mov sp, r7
    assert effect_of("bd46", thumb=True).kind == "dynamic"
    assert effect_of("04d04be2", frame_pointers=frozenset({stack.arm.ARM_REG_R11})).kind == "restore"  # sub sp, fp, #4
    instructions, _ = stack.decode(bytes.fromhex("00af"), 0, True)  # add r7, sp, #0
    assert instructions[0].sets_frame_pointer == r7


def test_armv4t_call_through_a_register_is_an_indirect_call():
    instructions, _ = stack.decode(bytes.fromhex("0fe0a0e1" "13ff2fe1"), 0, False)  # mov lr, pc; bx r3
    assert instructions[1].effect.kind == "indirect-call"


@pytest.mark.tor("TOR-MEM-003")
def test_frame_is_the_sum_of_decrements():
    # push {r4, fp, lr}; add fp, sp, #8; sub sp, sp, #228; ...; sub sp, fp, #8; pop {r4, fp, lr}; bx lr
    code = bytes.fromhex("10482de9" "08b08de2" "e4d04de2" "08d04be2" "1048bde8" "1eff2fe1")
    assert stack.frame_of(code, 0x8000, thumb=False) == 12 + 228


def test_undecodable_bytes_are_reported():
    instructions, bad = stack.decode(bytes.fromhex("f0402de9" "ffffffff"), 0x1000, False)
    assert len(instructions) == 1 and bad == 0x1004


# --------------------------------------------------------------------------- gcc's files


def test_su_and_ci_parsing(tmp_path):
    (tmp_path / "a.su").write_text("a.c:5:12:leaf\t48\tstatic\na.c:6:5:mid\t88\tstatic\n"
                                   "a.c:9:5:vla\t40\tdynamic\na.c:12:5:alloca_ok\t64\tdynamic,bounded\n")
    (tmp_path / "a.ci").write_text(
        'graph: { title: "a.c"\n'
        'node: { title: "a.c:leaf" label: "leaf\\na.c:5:12\\n48 bytes (static)" }\n'
        'node: { title: "mid" label: "mid\\na.c:6:5\\n88 bytes (static)" }\n'
        'edge: { sourcename: "mid" targetname: "a.c:leaf" label: "a.c:6:44" }\n'
        'node: { title: "__aeabi_fmul" label: "__aeabi_fmul\\n<built-in>" shape : ellipse }\n'
        'edge: { sourcename: "mid" targetname: "__aeabi_fmul" }\n'
        'node: { title: "__indirect_call" label: "Indirect Call Placeholder" shape : ellipse }\n'
        'edge: { sourcename: "apply" targetname: "__indirect_call" label: "a.c:2:33" }\n}\n')
    gcc = stack.read_gcc_stack([tmp_path / "a.su", tmp_path / "a.ci", tmp_path / "missing.su"])
    assert gcc.frames["leaf"] == (48, "static", "a.c:5")
    assert gcc.frames["vla"][1] == "dynamic"
    assert gcc.calls["mid"] == [("leaf", "a.c:6:44"), ("__aeabi_fmul", "?")]
    assert gcc.calls["apply"] == [(stack.INDIRECT_CALL, "a.c:2:33")]


def test_gcc_only_graph_for_the_host(tmp_path):
    (tmp_path / "n.su").write_text("n.c:1:6:net\t40\tstatic\nn.c:5:6:helper\t24\tstatic\n")
    (tmp_path / "n.ci").write_text('node: { title: "net" label: "net" }\nnode: { title: "helper" label: "helper" }\n'
                                   'edge: { sourcename: "net" targetname: "helper" label: "n.c:2:3" }\n'
                                   'edge: { sourcename: "helper" targetname: "tanhf" label: "n.c:6:3" }\n')
    gcc = stack.read_gcc_stack([tmp_path / "n.su", tmp_path / "n.ci"])
    image = elf.ElfImage(path=tmp_path / "x", machine="EM_X86_64", sections=[], symbols=[], mapping=[], code={})
    bound = stack.analyse(image, "net", gcc)
    assert not bound.bounded and "no stack data for tanhf" in bound.reason and "net -> helper" in bound.reason
    assert stack.analyse(image, "helper", stack.GccStack(frames={"helper": (24, "static", "n.c:5")})).bytes == 24


# --------------------------------------------------------------------------- real code, cross-compiled

_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm")
_MISSING = not all(shutil.which(tool) for tool in _TOOLS)


def needs_arm(test):
    skip = pytest.mark.skipif(_MISSING, reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")
    return pytest.mark.arm(skip(test))

CHAIN = """
/* A call chain with known local arrays, and the cases that have no bound. */
static int leaf(volatile char *p) { volatile char buf[40]; buf[0] = p[0]; return buf[0]; }
__attribute__((noinline)) int middle(int x) { volatile char buf[100]; buf[0] = (char)x; return leaf(buf) + 1; }
__attribute__((noinline)) int top(int x) { volatile int buf[64]; buf[0] = x; return middle(buf[0]) + middle(x); }
int rec(int n) { return n > 0 ? rec(n - 1) + 1 : 0; }
int ping(int n);
int pong(int n) { return n > 0 ? ping(n - 1) : 0; }
int ping(int n) { return n > 0 ? pong(n - 1) : 1; }
typedef int (*op)(int);
int apply(op f, int x) { return f(x); }
int vla(int n) { volatile char a[n]; a[0] = 1; return a[0]; }
int push_loop(int n);
int local_sub(int n);
int local_rec(int n);
int pool_end(void);
void net(const float *input, float *output) {
    int x = (int)input[0];
    output[0] = (float)(top(x) + rec(x) + ping(x) + apply(rec, x) + vla(x + 1) + push_loop(x + 1)
                        + local_sub(x) + local_rec(x + 1) + pool_end());
}
"""

# Hand-written: a push inside a loop (the sum of decrements would not bound it).
PUSH_LOOP = """
    .syntax unified
    .text
    .global push_loop
    .type push_loop, %function
#ifdef __thumb__
    .thumb
    .thumb_func
#else
    .arm
#endif
push_loop:
    push {r4, r7}
    mov r7, sp
1:  push {r4}
    subs r0, r0, #1
    bne 1b
    mov sp, r7
    pop {r4, r7}
    bx lr
    .size push_loop, . - push_loop
"""

# Hand-written, as libgcc's soft double does: a `bl` to a label inside the function (a local subroutine, here
# pushing 4 bytes of its own), the same recursing into itself with a push on the way (no bound), and a
# function ending in alignment padding before its literal pool (Thumb-2's `nop.w`, as picolibc's `exp`).
LOCAL_SUBROUTINES = """
    .syntax unified
    .text
#ifdef __thumb__
#define FUNCTION(name) .global name; .type name, %function; .thumb_func; name:
    .thumb
#else
#define FUNCTION(name) .global name; .type name, %function; name:
    .arm
#endif
FUNCTION(local_sub)
    push {r4, lr}
    bl 2f
    pop {r4, pc}
2:  push {r5}
    pop {r5}
    bx lr
    .size local_sub, . - local_sub

FUNCTION(local_rec)
    push {r4, lr}
    bl 2f
    pop {r4, pc}
2:  push {lr}
    subs r0, r0, #1
    it ne
    blne 2b
    pop {pc}
    .size local_rec, . - local_rec

    .p2align 2
FUNCTION(pool_end)
    push {r4, lr}
    ldr r0, 3f
    pop {r4, pc}
#ifdef __thumb2__
    nop.w
#else
    nop
#endif
    .p2align 2
3:  .word 0x12345678
    .size pool_end, . - pool_end
"""


@pytest.fixture(scope="module", params=["arm7tdmi", "cortex-m4f", "cortex-a15"])
def chain_build(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"chain-{request.param}")
    source = root / "src"
    source.mkdir()
    (source / "chain.c").write_text(CHAIN)
    (source / "loop.S").write_text(PUSH_LOOP)
    (source / "local.S").write_text(LOCAL_SUBROUTINES)
    (source / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 1, "output_size": 1,
                                                   "sources": ["chain.c", "loop.S", "local.S"]}))
    code = GeneratedCode.from_directory(source)
    build_dir = root / "build"
    profile = targets.get(request.param)
    profile = dataclasses.replace(profile, cflags=(*profile.cflags, "-fstack-usage", "-fcallgraph-info=su",
                                                   "-dumpdir", f"{build_dir}/"))
    built = qemu.build(code, build_dir, profile, "-O0")
    gcc = stack.read_gcc_stack(stack.gcc_files(build_dir, [source / "chain.c"]))
    return elf.read(built.elf), gcc


@pytest.mark.tor("TOR-MEM-003")
@needs_arm
def test_call_chain_bound_is_the_sum_of_gcc_frames(chain_build):
    image, gcc = chain_build
    frames = {name: gcc.frames[name][0] for name in ("top", "middle", "leaf")}
    assert frames["leaf"] >= 40 and frames["middle"] >= 100 and frames["top"] >= 256
    bound = stack.analyse(image, "top", gcc)
    assert bound.bytes == frames["top"] + frames["middle"] + frames["leaf"]
    assert [step["function"] for step in bound.path] == ["top", "middle", "leaf"]
    assert bound.path[-1]["depth"] == bound.bytes
    for name in ("top", "middle", "leaf"):
        assert bound.functions[name].su == bound.functions[name].prologue == frames[name]


@pytest.mark.tor("TOR-MEM-003")
@needs_arm
def test_prologue_analysis_alone_gives_the_same_bound(chain_build):
    image, gcc = chain_build
    without_su = stack.analyse(image, "top", stack.GccStack())
    assert without_su.bytes == stack.analyse(image, "top", gcc).bytes
    assert {f.source for f in without_su.functions.values()} == {"prologue"}


@pytest.mark.tor("TOR-MEM-002")
@needs_arm
def test_recursion_is_unbounded_naming_the_cycle(chain_build):
    image, gcc = chain_build
    assert stack.analyse(image, "rec", gcc).describe() == "unbounded: cycle: rec -> rec"
    mutual = stack.analyse(image, "ping", gcc)
    assert mutual.describe() == "unbounded: cycle: ping -> pong -> ping"
    assert mutual.bytes is None and mutual.path == []


@pytest.mark.tor("TOR-MEM-002")
@needs_arm
def test_function_pointer_call_is_unbounded_with_its_address(chain_build):
    image, gcc = chain_build
    bound = stack.analyse(image, "apply", gcc)
    assert bound.describe().startswith("unbounded: indirect call at 0x"), bound.describe()
    assert "in apply" in bound.reason
    via_entry = stack.analyse(image, "net", gcc)
    assert not via_entry.bounded and "reached via net" in via_entry.reason


@pytest.mark.tor("TOR-MEM-002")
@needs_arm
def test_variable_length_array_is_a_dynamic_adjustment(chain_build):
    image, gcc = chain_build
    bound = stack.analyse(image, "vla", gcc)
    assert not bound.bounded and "dynamic" in bound.reason
    assert not stack.analyse(image, "vla", stack.GccStack()).bounded  # the disassembly sees it as well


@pytest.mark.tor("TOR-MEM-002")
@needs_arm
def test_push_in_a_loop_is_unbounded(chain_build):
    image, gcc = chain_build
    bound = stack.analyse(image, "push_loop", gcc)
    assert bound.describe().startswith("unbounded: stack adjustment inside a loop at 0x"), bound.describe()


@needs_arm
def test_unknown_entry(chain_build):
    image, gcc = chain_build
    assert stack.analyse(image, "no_such_function", gcc).reason == "entry function no_such_function not found"


@pytest.mark.tor("TOR-MEM-003")
@needs_arm
def test_function_pointer_call_with_the_manifest_targets_takes_the_deepest(chain_build):
    """An indirect call the manifest resolves (every target of the calls on its source line, as assay-v1's
    dispatch) is a call to each target: the deepest one bounds it; a target the ELF lacks stays unbounded."""
    image, gcc = chain_build
    line = next(n for n, text in enumerate(CHAIN.splitlines(), 1) if text.startswith("int apply("))
    calls = [{"file": "chain.c", "line": line, "targets": ["leaf", "middle"]}]
    bound = stack.analyse(image, "apply", gcc, calls)
    frames = {name: bound.functions[name].frame for name in ("apply", "middle", "leaf")}
    assert bound.bytes == frames["apply"] + frames["middle"] + frames["leaf"], bound.describe()
    assert [step["function"] for step in bound.path] == ["apply", "middle", "leaf"]
    assert any("the manifest's targets leaf, middle" in note for note in bound.notes)
    missing = stack.analyse(image, "apply", gcc, [{**calls[0], "targets": ["no_such"]}])
    assert not missing.bounded and "no function no_such" in missing.reason
    elsewhere = stack.analyse(image, "apply", gcc, [{**calls[0], "line": line + 1}])
    assert not elsewhere.bounded and elsewhere.reason.startswith("indirect call at 0x")


@pytest.mark.tor("TOR-MEM-002")
@needs_arm
def test_a_local_subroutine_is_the_functions_own_code_and_bounded_unless_it_recurses(chain_build):
    image, _ = chain_build
    local = stack.analyse(image, "local_sub", stack.GccStack())
    assert local.bytes == 8 + 4, local.describe()  # its push and the subroutine's, no call edge to itself
    assert any("local subroutine" in note for note in local.notes)
    recursing = stack.analyse(image, "local_rec", stack.GccStack())
    assert recursing.describe().startswith("unbounded: stack adjustment inside a loop at 0x"), recursing.describe()


@needs_arm
def test_padding_before_a_literal_pool_does_not_run_past_the_end(chain_build):
    image, _ = chain_build
    assert stack.analyse(image, "pool_end", stack.GccStack()).bytes == 8
