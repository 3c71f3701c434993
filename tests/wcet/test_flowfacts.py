"""Flow facts for generated code: manifest and C agree on every loop, mapped to the binary; errors name loops.

Builds (arm-none-eabi-gcc, -O0) acas-reg50 and lenet5 for arm7tdmi and
cortex-m4f, and small hand-written "generated" directories for the error
cases (a bound changed in the C or in the manifest, a while loop, an indirect
call, recursion). The facts for the zoo models are written as F4 and FFX and
read back by the strict parsers (the grammar OTAWA reads).
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from harness import targets
from harness.generators.generated import GeneratedCode
from harness.runners import qemu
from wcet.annotations import Toolchain
from wcet.ffformat import content, otawa_checksum, parse_f4, parse_ffx, write_f4, write_ffx
from wcet.flowfacts import SOURCE_ORIGIN, FlowFactError, facts_for_generated

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_TOOLS = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "qemu-arm": "qemu-user", "qemu-system-arm": "qemu-system-arm",
          "gcc": "gcc"}
_MISSING = [f"{tool} ({package})" for tool, package in _TOOLS.items() if shutil.which(tool) is None]
pytestmark = [pytest.mark.arm,
              pytest.mark.skipif(bool(_MISSING), reason=f"not installed: {', '.join(_MISSING)}; run .ci/setup")]

TARGETS = ("arm7tdmi", "cortex-m4f")
# libgcc soft-float loops reached on the ARM7TDMI (toolchains/annotations/arm-none-eabi-gcc-12.2.1.toml)
LIBRARY_LOOPS = {"acas-reg50": {("__aeabi_fmul", 0xE0, 22), ("__aeabi_fmul", 0xFC, 22)},
                 "lenet5": {("__aeabi_fmul", 0xE0, 22), ("__aeabi_fmul", 0xFC, 22), ("__aeabi_fdiv", 0x4C, 5),
                            ("__aeabi_fdiv", 0xD0, 22), ("__aeabi_fdiv", 0xEC, 22)}}


def build(directory: Path, target: str) -> Path:
    code = GeneratedCode.from_directory(directory)
    return qemu.build(code, directory.parent / f"{directory.name}-build-{target}", targets.get(target), "-O0").elf


def manifest_and_sources(directory: Path) -> tuple[dict, tuple[Path, ...]]:
    """The manifest and sources the wcet library takes, as plain data."""
    code = GeneratedCode.from_directory(directory)
    return code.manifest, code.sources


@pytest.fixture(scope="module")
def zoo_builds(generated_zoo):
    return {(name, target): (source, build(source, target))
            for name, source in generated_zoo.items() for target in TARGETS}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", ["acas-reg50", "lenet5"])
def test_zoo_facts_bound_every_loop_and_are_accepted_by_the_grammar(zoo_builds, model, target):
    source, elf = zoo_builds[model, target]
    manifest = json.loads((source / "manifest.json").read_text())
    facts = facts_for_generated(elf, *manifest_and_sources(source), toolchain=Toolchain.of_profile(targets.get(target)))
    entry = manifest["entry"]["symbol"]
    generated = {(l.source[1], l.max) for l in facts.loops if l.function == entry}
    assert generated == {(loop["line"], loop["bound"]) for layer in manifest["layers"] for loop in layer["loops"]}
    assert all(l.origin == "manifest+source" for l in facts.loops if l.function == entry)
    library = {(l.function, l.offset, l.max) for l in facts.loops if l.function != entry}
    assert library == (LIBRARY_LOOPS[model] if target == "arm7tdmi" else set())
    assert all(l.justification for l in facts.loops)
    assert facts.checksum == ("assay.elf", otawa_checksum(elf))
    # written in both formats, read back by the strict parsers: the same facts
    f4, ffx = write_f4(facts, elf, entry), write_ffx(facts, elf, entry)
    assert content(parse_f4(f4, source=f"{model}.ff")) == content(facts)
    assert content(parse_ffx(ffx, source=f"{model}.ffx"))[:-1] == content(facts)[:-1]  # FFX has no checksum
    # the compiler version in the ELF selects the same annotations when no profile is given
    assert content(facts_for_generated(elf, *manifest_and_sources(source))) == content(facts)


def copy_source(zoo_builds, tmp_path, model="acas-reg50") -> Path:
    source, _ = zoo_builds[model, "arm7tdmi"]
    copy = tmp_path / "src"
    shutil.copytree(source, copy)
    return copy


def edit_line(path: Path, line: int, old: str, new: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    assert old in lines[line - 1], lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new)
    path.write_text("".join(lines))


@pytest.mark.tor("TOR-WCET-004")
def test_a_bound_changed_in_the_c_is_a_disagreement_naming_the_loop(zoo_builds, tmp_path):
    source = copy_source(zoo_builds, tmp_path)
    edit_line(source / "acas_reg50_inference.c", 13, "i < 5;", "i < 6;")
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(build(source, "arm7tdmi"), *manifest_and_sources(source))
    (problem,) = caught.value.problems
    assert "acas_reg50_inference.c:13 in acas_reg50_inference" in problem
    assert "the manifest (L1) says bound 5, the C says 6" in problem


@pytest.mark.tor("TOR-WCET-004")
def test_a_bound_changed_in_the_manifest_is_a_disagreement(zoo_builds, tmp_path):
    source = copy_source(zoo_builds, tmp_path)
    manifest = json.loads((source / "manifest.json").read_text())
    manifest["layers"][7]["loops"][1]["bound"] = 49
    manifest["layers"][0]["loops"].append({"id": "L99", "var": "j", "bound": 3, "line": 15, "parent": "L0"})
    (source / "manifest.json").write_text(json.dumps(manifest))
    _, elf = zoo_builds["acas-reg50", "arm7tdmi"]
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elf, *manifest_and_sources(source))
    problems = caught.value.problems
    assert problems == [
        "manifest loop L99 (dense1, acas_reg50_inference) at acas_reg50_inference.c:15 has no counted for loop on "
        "that line of the C",
        "loop at acas_reg50_inference.c:83 in acas_reg50_inference (for (int i = 0; i < 50; ++i)): the manifest "
        "(L15) says bound 49, the C says 50"]


@pytest.mark.tor("TOR-WCET-004")
def test_a_while_loop_in_generated_code_is_an_error(zoo_builds, tmp_path):
    source = copy_source(zoo_builds, tmp_path)
    path = source / "acas_reg50_inference.c"
    edit_line(path, 13, "for (int i = 0; i < 5; ++i) {", "int i = 0; while (i < 5) {")
    edit_line(path, 14, "];", "]; ++i;")
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(build(source, "arm7tdmi"), *manifest_and_sources(source))
    text = "\n".join(caught.value.problems)
    assert "acas_reg50_inference.c:13 in acas_reg50_inference: 'while' loop: not a counted loop" in text
    assert "manifest loop L1 (dense1, acas_reg50_inference) at acas_reg50_inference.c:13" in text
    # the binary's loop on that line is named with its address: nothing is silently unbounded
    assert "in generated code has no bound: no counted for loop at acas_reg50_inference.c:13" in text
    assert "acas_reg50_inference + 0x" in text


@pytest.mark.tor("TOR-WCET-006")
def test_library_loops_without_annotations_are_errors(zoo_builds):
    source, elf = zoo_builds["acas-reg50", "arm7tdmi"]
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elf, *manifest_and_sources(source), toolchain=Toolchain("arm-none-eabi-gcc", "0.0.0", "."))
    problems = caught.value.problems
    assert len(problems) == 2
    assert all("library loop __aeabi_fmul + 0x" in p and "no annotation file" in p for p in problems)
    assert "ieee754-sf.S:552" in problems[0] + problems[1]


NET_C = """\
typedef void (*op_t)(float *);
static void twice(float *x) { x[0] *= 2.0f; }
static void inc(float *x) { x[0] += 1.0f; }
static op_t ops[2] = {twice, inc};
void net(const float *input, float *output)
{
    output[0] = input[0];
    for (int k = 0; k < 2; ++k) {
        ops[k](output);
    }
}
"""


def small_manifest(**extra) -> dict:
    return {"schema": "assay-manifest/1",
            "entry": {"symbol": "net", "signature": "void net(const float *input, float *output)", "file": "net.c"},
            "inputs": [{"name": "x", "shape": [1], "layout": "C", "size": 1, "dtype": "float32"}],
            "outputs": [{"name": "y", "shape": [1], "layout": "C", "size": 1, "dtype": "float32"}],
            "sources": ["net.c"], "symbols": {"code": ["net", "twice", "inc"], "data": ["ops"]},
            "layers": [{"index": 0, "name": "ops", "op": "Ops", "function": "net", "file": "net.c", "lines": [7, 10],
                        "loops": [{"id": "L0", "var": "k", "bound": 2, "line": 8, "parent": None}]}], **extra}


@pytest.mark.parametrize("target", TARGETS)
def test_indirect_calls_take_their_targets_from_the_manifest(tmp_path, target):
    source = tmp_path / "src"
    source.mkdir()
    (source / "net.c").write_text(NET_C)
    (source / "manifest.json").write_text(json.dumps(small_manifest()))
    elf = build(source, target)
    with pytest.raises(FlowFactError, match=r"unresolved indirect branch at net \+ 0x\w+ \(net.c:9\)"):
        facts_for_generated(elf, *manifest_and_sources(source))
    (source / "manifest.json").write_text(json.dumps(small_manifest(
        indirect_calls=[{"function": "net", "file": "net.c", "line": 9, "targets": ["twice", "inc"]}])))
    facts = facts_for_generated(elf, *manifest_and_sources(source))
    from wcet.otawa import function_symbols

    symbols = function_symbols(elf)
    assert list(facts.multicalls.values()) == [(symbols["twice"], symbols["inc"])]
    assert [(l.function, l.max, l.source) for l in facts.loops] == [("net", 2, ("net.c", 8))]
    assert "multicall 0x" in write_f4(facts)


def test_recursion_is_an_error(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "net.c").write_text("static float down(float x, int n) { return n > 0 ? down(x * 0.5f, n - 1) : x; }\n"
                                  "void net(const float *input, float *output) { output[0] = down(input[0], 3); }\n")
    manifest = small_manifest()
    manifest["layers"][0]["loops"] = []
    manifest["symbols"]["code"] = ["net", "down"]
    (source / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FlowFactError, match=r"recursion \(no bound on its depth\): down -> down"):
        facts_for_generated(build(source, "cortex-m4f"), *manifest_and_sources(source))


@pytest.fixture(scope="module")
def v1_build(tmp_path_factory):
    """acas-reg50 by assay-v1 (layer table, shared library, function pointers), built for the ARM7TDMI."""
    pytest.importorskip("keras")
    import codegen
    from harness.models import zoo

    root = tmp_path_factory.mktemp("v1")
    model = zoo.load("acas-reg50", cache_dir=root / "zoo")
    codegen.generate(model.files["keras"], root / "src", name="acas-reg50", frontend="keras", strategy="v1")
    return root / "src", build(root / "src", "arm7tdmi")


@pytest.mark.tor("TOR-WCET-004")
def test_v1_run_time_bounds_come_per_layer_from_the_c_table(v1_build):
    """Context-insensitive: the largest value over the layers (OTAWA's view); per dispatch execution: that
    layer's own values and its single activation, read from acas_reg50_net in the C."""
    source, elf = v1_build
    manifest, sources = manifest_and_sources(source)
    facts = facts_for_generated(elf, manifest, sources)
    by_line = {l.source[1]: l for l in facts.loops if l.source and l.source[0] == "assay_v1_lib.c"}
    dense = manifest["layers"][0]["loops"]  # dense1: out_h, out_w, out_c, k_n; then its relu
    k_n = dense[3]
    assert (k_n["bound_expr"], k_n["bound"], by_line[k_n["line"]].max) == ("layer->k_n", 5, 50)
    copy = next(l for l in facts.loops if l.function == "acas_reg50_inference" and l.total is not None)
    assert (copy.max, copy.total) == (50, 7 * 50 + 5)  # net[i].layer_size per iteration of the layer loop
    (site,) = facts.executions
    executions = facts.executions[site]
    assert len(executions) == 8 == len(facts.sequences[site])
    k_n_header = (by_line[k_n["line"]].function, by_line[k_n["line"]].offset)
    assert [next(l.max for l in e.loops if (l.function, l.offset) == k_n_header) for e in executions] == \
        [5] + [50] * 7
    from wcet.otawa import function_symbols

    symbols = function_symbols(elf)
    relu, linear = symbols["assay_v1_relu"], symbols["assay_v1_linear"]
    assert [tuple(e.multicalls.values()) for e in executions] == [((linear if k == 7 else relu,),) for k in range(8)]
    assert "// execution 7 at" in write_f4(facts, elf, "acas_reg50_inference")


@pytest.mark.tor("TOR-WCET-004")
def test_v1_manifest_that_disagrees_with_the_c_table_is_refused(v1_build, tmp_path):
    source, elf = v1_build
    manifest, sources = manifest_and_sources(source)
    manifest = json.loads(json.dumps(manifest))
    manifest["layers"][0]["loops"][3]["bound"] = 4  # dense1's k_n: the C table says 5
    manifest["indirect_calls"][1]["sequence"][0] = "assay_v1_linear"  # dense1's activation: the C says relu
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elf, manifest, sources)
    problems = caught.value.problems
    assert any("assay_v1_lib.c:12 in assay_v1_dense (L3, dense1): the manifest says layer->k_n = 4, the C's "
               "acas_reg50_net gives [5]" in p for p in problems), problems
    assert any("the actv_function call in assay_v1_dense: the manifest's sequence ['assay_v1_linear'" in p
               for p in problems), problems


LIB_H = """\
#include <stdint.h>
#define CHECK(x) do { if (!(x)) return; } while (0)
static void scale(float *x)
{
    for (int32_t i = 0; i < SCALE_N; i++) {
        x[i] *= 2.0f;
    }
}
"""
PEER_C = """\
#define SCALE_N @N@
#include <lib.h>
void net(const float *input, float *output)
{
    float buffer[4];
    CHECK(input != 0);
    for (int k = 0; k < 4; ++k) {
        buffer[k] = input[0];
    }
    scale(buffer);
    output[0] = buffer[3];
}
"""


def peer_directory(tmp_path: Path, n: str) -> Path:
    """Another tool's code: a header-only library included with <>, a manifest that declares no loops."""
    source = tmp_path / f"peer-{n}"
    source.mkdir()
    (source / "lib.h").write_text(LIB_H)
    (source / "net.c").write_text(PEER_C.replace("@N@", n))
    manifest = small_manifest(layers=[], headers=["lib.h"])
    del manifest["symbols"]
    (source / "manifest.json").write_text(json.dumps(manifest))
    return source


def peer_sources(source: Path) -> list[Path]:
    return [source / "net.c", source / "lib.h"]


def test_code_without_manifest_loops_is_bounded_from_its_source_alone(tmp_path):
    source = peer_directory(tmp_path, "4")
    elf = build(source, "cortex-m4f")
    facts = facts_for_generated(elf, json.loads((source / "manifest.json").read_text()), peer_sources(source))
    assert sorted((l.source, l.max, l.origin) for l in facts.loops) == [
        (("lib.h", 5), 4, SOURCE_ORIGIN), (("net.c", 7), 4, SOURCE_ORIGIN)]
    assert all(l.justification.startswith("C source: for (") for l in facts.loops)


def test_a_loop_the_source_does_not_bound_is_listed_once_as_a_finding(tmp_path):
    source = peer_directory(tmp_path, "((int32_t)x[0])")
    elf = build(source, "cortex-m4f")
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(elf, json.loads((source / "manifest.json").read_text()), peer_sources(source))
    assert caught.value.origin == SOURCE_ORIGIN
    (problem,) = caught.value.problems  # one entry per loop: the C's reason, then the binary loop's address
    assert problem.startswith("lib.h:5 in scale:") and "limit is not an integer literal" in problem
    assert "; loop scale + 0x" in problem and "no counted for loop at lib.h:5" in problem


def test_a_while_loop_of_another_tools_code_is_bounded_from_the_machine_code(tmp_path):
    """The C parser refuses ``while``; the binary's counter bounds it (wcet.binloops), and the C's problem is
    answered: nothing is left to report."""
    source = tmp_path / "peer-while"
    source.mkdir()
    (source / "net.c").write_text("void net(const float *input, float *output)\n{\n    int k = 0;\n"
                                  "    while (k < 4) {\n        output[0] += input[0];\n        k++;\n    }\n}\n")
    manifest = small_manifest(layers=[])
    del manifest["symbols"]
    (source / "manifest.json").write_text(json.dumps(manifest))
    facts = facts_for_generated(build(source, "cortex-m4f"), manifest, [source / "net.c"])
    (loop,) = facts.loops
    assert (loop.source, loop.max, loop.origin) == (("net.c", 4), 4, "binary-counter")


def test_a_run_time_field_bound_without_a_manifest_is_a_finding(tmp_path):
    """``i < layer->n`` (emlearn's layer table): parsed as a run-time bound, but no manifest gives its value."""
    source = tmp_path / "peer-field"
    source.mkdir()
    (source / "net.c").write_text(
        "struct layer { int n; };\n"
        "static const struct layer first = {3};\n"
        "static void run(const struct layer *layer, float *x)\n"
        "{\n"
        "    for (int i = 0; i < layer->n; ++i) {\n"
        "        x[i] += 1.0f;\n"
        "    }\n"
        "}\n"
        "void net(const float *input, float *output)\n"
        "{\n"
        "    output[0] = input[0];\n"
        "    run(&first, output);\n"
        "}\n")
    manifest = small_manifest(layers=[])
    del manifest["symbols"]
    (source / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FlowFactError) as caught:
        facts_for_generated(build(source, "cortex-m4f"), manifest, [source / "net.c"])
    assert caught.value.origin == SOURCE_ORIGIN
    (problem,) = caught.value.problems
    assert problem.startswith("net.c:5 in run: the bound layer->n is read at run time"), problem
