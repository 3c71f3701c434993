"""Loop bounds read from the C with pycparser: counted loops and their trip counts, everything else refused.

The generated C of acas-reg50 and lenet5 must give exactly the manifest's loops
(line, variable, bound, nesting): two independent sources of the same facts.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

from wcet.csource import SourceError, initialisers, source_loops

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="host gcc (preprocessor) not installed")


def loops_of(tmp_path, body: str, prelude: str = ""):
    source = tmp_path / "net.c"
    source.write_text(f"#include <math.h>\n#include <stdint.h>\n{prelude}\nvoid net(const float *in, float *out)\n{{\n"
                      f"{body}\n}}\n")
    return source_loops([source])


@needs_gcc
@pytest.mark.parametrize("head, trips", [
    ("for (int i = 0; i < 8; ++i)", 8),
    ("for (int i = 0; i < 8; i++)", 8),
    ("for (int i = 0; i <= 8; ++i)", 9),
    ("for (int i = 3; i < 10; i += 3)", 3),
    ("for (int i = 3; i <= 9; i += 3)", 3),
    ("for (int i = 0; i < 10; i = i + 4)", 3),
    ("for (int i = 0; i < 0x10; ++i)", 16),
    ("for (int i = -2; i < 2; ++i)", 4),
    ("for (int i = 5; i < 5; ++i)", 0),
    ("for (int i = 9; i > 0; --i)", 9),
    ("for (int i = 9; i >= 0; i -= 2)", 5),
    ("for (unsigned i = 0u; i < 7u; ++i)", 7),
    ("int i; for (i = 0; i < 6; i++)", 6),
])
def test_counted_loop_forms_and_their_trip_counts(tmp_path, head, trips):
    result = loops_of(tmp_path, f"    {head} {{ out[0] += in[0]; }}")
    assert result.problems == []
    (loop,) = result.loops
    assert (loop.bound, loop.var, loop.function, loop.file, loop.line) == (trips, "i", "net", "net.c", 6)


@needs_gcc
@pytest.mark.parametrize("body, message", [
    ("int i = 0; while (i < 8) { ++i; }", "'while' loop"),
    ("int i = 0; do { ++i; } while (i < 8);", "'do ... while' loop"),
    ("again: out[0] += 1.0f; if (out[0] < 4.0f) goto again;", "'goto again'"),
    ("for (int i = 0; i < (int)in[0]; ++i) { out[0] += 1.0f; }", "limit is not an integer literal"),
    ("for (int i = 0; i < 8; ++i) { i += 2; }", "body changes 'i'"),
    ("for (int i = 0; i < 8; ++i) { int *p = &i; *p = 9; }", "body changes 'i'"),
    ("for (;;) { break; }", "initialisation"),
    ("for (int i = 0; i < 8; --i) { }", "moves away from the limit"),
    ("for (int i = 0; in[i] > 0.0f; ++i) { }", "condition"),
    ("for (float x = 0.0f; x < 1.0f; x += 0.5f) { }", "not an integer"),
    ("for (int i = 0; i < 8; i *= 2) { }", "step"),
])
@pytest.mark.tor("TOR-WCET-004")
def test_anything_but_a_counted_loop_is_a_problem_naming_file_line_and_function(tmp_path, body, message):
    result = loops_of(tmp_path, "    " + body)
    assert result.loops == []
    assert len(result.problems) == 1 and message in result.problems[0], result.problems
    assert result.problems[0].startswith("net.c:6 in net:"), result.problems


@needs_gcc
def test_nesting_and_only_the_chosen_functions(tmp_path):
    prelude = "static void helper(void) { int i = 0; while (i < 3) ++i; }"
    result = loops_of(tmp_path, "    for (int o = 0; o < 4; ++o) {\n        for (int i = 0; i < 5; ++i) { }\n"
                                "    }\n    for (int k = 0; k < 2; ++k) { }", prelude)
    assert [(l.line, l.var, l.bound, l.parent) for l in result.loops if l.function == "net"] == [
        (6, "o", 4, None), (7, "i", 5, 6), (9, "k", 2, None)]
    assert any("helper" in p for p in result.problems)
    chosen = source_loops([tmp_path / "net.c"], functions={"net"})
    assert chosen.problems == [] and len(chosen.loops) == 3
    assert set(chosen.functions) == {"helper", "net"}


@needs_gcc
def test_bodies_without_loops_are_skipped_and_every_line_keeps_its_number(tmp_path):
    """V3 code: megabytes of loop-free statements are not parsed; the functions after them keep their lines,
    and braces or loop words inside literals, structures and initialisers change nothing."""
    from wcet import csource

    prelude = ("struct s { int a; int b[2]; };\nstatic const struct s table = { 1, { 2, 3 } };\n"
               "static void plain(float *out) {\n    const char *t = \"for { while\"; char c = '}';\n"
               "    { out[0] = 1.0f; }\n#pragma GCC diagnostic push\n    out[1] = (float)t[0] + c;\n}\n"
               "static void looping(float *out) {\n    int i = 0; while (i < 3) { out[i] = 0.0f; ++i; }\n}")
    result = loops_of(tmp_path, "    for (int k = 0; k < 2; ++k) { }", prelude)
    assert [(l.line, l.function, l.bound) for l in result.loops] == [(16, "net", 2)]
    assert [p.split(": ", 1)[0] for p in result.problems] == ["net.c:12 in looping"]
    assert list(result.functions) == ["plain", "looping", "net"] and result.functions["plain"] == ("net.c", 5)
    text = "int f(void) {\n  int a = 1;\n# 3 \"x.c\"\n  return a;\n}\nint g(void) { for (;;) { } }\n"
    skipped = csource._without_loop_free_bodies(text)
    assert skipped == "int f(void) {\n\n# 3 \"x.c\"\n\n}\nint g(void) { for (;;) { } }\n"


LAYER = "struct layer { void (*run)(const struct layer *); int rows; int cols[2]; float scale; };"


@needs_gcc
def test_a_struct_field_limit_is_a_run_time_bound_and_the_table_gives_its_values(tmp_path):
    """assay-v1's library: the bound is read at run time (``layer->rows``), the value from the table's C."""
    source = tmp_path / "lib.c"
    source.write_text(f"{LAYER}\nvoid f(const struct layer *layer, float *out) {{\n"
                      "    for (int i = 0; i < layer->rows; ++i) { out[i] = 0.0f; }\n"
                      "    for (int i = 0; i < layer->rows; ++i) { layer = 0; }\n"
                      "    for (int i = 1; i < layer->rows; ++i) { }\n}\n"
                      "static const struct layer net[3] = {[1] = {.run = f, .rows = 7, .cols = {1, -2}}, "
                      "{.rows = 0x10, .scale = 0.5f}, [0] = {.rows = 2}};\n"
                      "void g(float *out) { for (int k = 0; k < 3; ++k) { for (int j = 0; j < net[k].rows; ++j) "
                      "{ out[j] = 1.0f; } } }\n")
    result = source_loops([source])
    first, table_loop = [loop for loop in result.loops if loop.line in (3, 8) and loop.var in ("i", "j")]
    assert (first.bound, first.bound_expr, first.text) == (None, "layer->rows", "for (int i = 0; i < layer->rows; ++i)")
    assert (table_loop.bound, table_loop.bound_expr) == (None, "net[k].rows")
    assert [p.split(": ", 1)[1] for p in result.problems] == [
        "'for (int i = 0; i < layer->rows; ++i)' is not a counted loop: the body changes 'layer', which the limit "
        "reads",
        "'for (int i = 1; i < layer->rows; ++i)' is not a counted loop: a limit read from a struct field needs "
        "'for (i = 0; i < field; ++i)'"]
    assert initialisers(source, "net") == [{"rows": 2}, {"run": "f", "rows": 7, "cols": [1, -2]},
                                           {"rows": 16, "scale": "0.5f"}]
    with pytest.raises(SourceError, match="no initialised array 'nothing'"):
        initialisers(source, "nothing")


@needs_gcc
def test_unparsable_c_is_a_source_error(tmp_path):
    source = tmp_path / "bad.c"
    source.write_text("void f(void) { for (int i = 0; i < 3; ++i) }\n")
    with pytest.raises(SourceError, match="bad.c"):
        source_loops([source])


@pytest.mark.tor("TOR-WCET-004")
@needs_gcc
@pytest.mark.parametrize("model", ["acas-reg50", "lenet5"])
def test_generated_c_gives_exactly_the_manifest_loops(generated_zoo, model):
    directory = generated_zoo[model]
    manifest = json.loads((directory / "manifest.json").read_text())
    result = source_loops([directory / name for name in manifest["sources"]])
    assert result.problems == []
    declared = {(Path(layer["file"]).name, loop["line"]): loop for layer in manifest["layers"] for loop in layer["loops"]}
    found = {(loop.file, loop.line): loop for loop in result.loops}
    assert found.keys() == declared.keys()
    for key, loop in found.items():
        expected = declared[key]
        parent = next((k[1] for k, l in declared.items() if l["id"] == expected["parent"]), None)
        assert (loop.var, loop.bound, loop.parent) == (expected["var"], expected["bound"], parent), key
    assert len(found) == {"acas-reg50": 16, "lenet5": 31}[model]


@needs_gcc
def test_do_while_zero_macro_idiom_is_no_loop(tmp_path):
    result = loops_of(tmp_path, "    do { out[0] = 1.0f; } while (0);\n    for (int i = 0; i < 3; ++i) { }")
    assert result.problems == [] and [loop.bound for loop in result.loops] == [3]


@needs_gcc
def test_functions_of_a_local_header_are_read_once_when_owned(tmp_path):
    """Header-only generated code (emlearn's eml_net.h, included with <>): its functions are analysed when the
    header is among the generated files, once however many .c files include it; its own <> includes are
    stood in for, not left to the system."""
    (tmp_path / "lib.h").write_text("#include <stdbool.h>\n"
                                    "static void scale(float *x, int n) { for (int i = 0; i < n; i++) x[i] *= 2; }\n")
    for name in ("a.c", "b.c"):
        (tmp_path / name).write_text("#include <lib.h>\nvoid f_%s(float *x) { scale(x, 4); }\n" % name[0])
    sources = [tmp_path / "a.c", tmp_path / "b.c"]
    assert source_loops(sources).problems == []  # not owned: the header's function belongs to no .c file
    owned = source_loops(sources, owned={"a.c", "b.c", "lib.h"})
    assert list(owned.functions) == ["scale", "f_a", "f_b"] and owned.functions["scale"] == ("lib.h", 2)
    (problem,) = owned.problems
    assert problem.startswith("lib.h:2 in scale:") and "limit is not an integer literal" in problem
    assert owned.problem_lines == {("lib.h", 2): 0}
