"""The package's pages (harness/stages/evidence/html.py) on a small package written here: every document has its
rendering, links between files go to renderings, the trace pages go layer -> C lines; and the same package in a
real browser (browser_support): no console error, no link that leaves the package or names a missing file."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

from browser_support import check_package, needs_browser
from harness.stages.evidence import html

C_SOURCE = "void net(const float *x, float *y) {\n    /* layer 0: d (Dense) */\n    y[0] = x[0] > 0.0f ? x[0] : 0.0f;\n}\n"


def small_package(root: Path) -> Path:
    """A package with the files the pages are made from: an index, a Markdown table, the configuration index,
    generated C and a trace matrix with one layer whose line 3 the inputs never reached."""
    files = {
        "index.html": "<html><body><a href='results/semantic/table1.md'>Table 1</a> "
                      "<a href='trace/trace.json'>trace</a> <a href='sci/sci.json'>sci</a></body></html>",
        "results/semantic/table1.md": "# Table 1\n\nSee the [index](../../sci/sci.json).\n\n| model | error |\n"
                                      "|---|---:|\n| m | 1.2e-07 |\n",
        "sci/sci.json": json.dumps({"generated_code": [{"directory": "code/m/g-v", "model": "m", "variant": "v",
                                                        "generator": {"name": "g"}, "files": ["code/m/g-v/net.c"]}],
                                    "elsewhere": "/etc/hostname", "long": "x" * 300}),
        "code/m/g-v/net.c": C_SOURCE,
        "trace/trace.json": json.dumps({"schema": "assay-trace/1", "codes": {"m/g-v": {
            "layer_error": {"reference": "keras", "inputs": 3, "first_over_tolerance": None},
            "layers": [{"layer": "d", "op": "Dense", "index": 0, "requirement": "LLR-001", "c_file": "net.c",
                        "c_lines": [2, 3],
                        "lines_not_reached": [3], "object_code": {}, "tests": "3 inputs",
                        "error": {"compared": True, "within_tolerance": True, "max_abs_error": 1.2e-7}}],
            "untraced_lines": [{"file": "net.c", "line": 1, "text": "void net(const float *x, float *y) {"}]}}}),
        "trace/m/g-v/trace.csv": "layer,op\nd,Dense\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    html.render_package(root)
    return root


def hrefs(page: Path) -> list[str]:
    return re.findall(r"""href=["']([^"']+)["']""", page.read_text())


def test_every_document_has_a_page_and_links_go_to_pages(tmp_path):
    root = small_package(tmp_path)
    for name in ("results/semantic/table1.md", "sci/sci.json", "code/m/g-v/net.c", "trace/trace.json",
                 "trace/m/g-v/trace.csv"):
        assert (root / html.page_of(name)).is_file(), name
    assert hrefs(root / "index.html") == ["results/semantic/table1.md.html", "trace/trace.json.html",
                                          "sci/sci.json.html"]
    table = (root / "results/semantic/table1.md.html").read_text()
    assert "<table>" in table and 'href="../../sci/sci.json.html"' in table
    sci = (root / "sci/sci.json.html").read_text()
    assert 'href="../code/m/g-v/net.c.html"' in sci
    assert "/etc/hostname" in sci and 'href="../../etc/hostname' not in sci  # a path outside is not a link


def test_trace_pages_lead_from_layer_to_highlighted_c_lines(tmp_path):
    root = small_package(tmp_path)
    assert "../trace/m/g-v/trace.html" in hrefs(root / "trace/trace.json.html")
    matrix = root / "trace/m/g-v/trace.html"
    assert "../../../trace/m/g-v/layers/d.html" in hrefs(matrix) and "<td>LLR-001</td>" in matrix.read_text()
    assert "../../../code/m/g-v/net.c.html#L-2" in hrefs(matrix)
    layer = (root / "trace/m/g-v/layers/d.html").read_text()
    highlighted = [unescape(re.sub(r"<[^>]+>", "", line)) for line in re.findall(r'<span class="hll">(.*?)\n', layer)]
    assert highlighted == ["    y[0] = x[0] > 0.0f ? x[0] : 0.0f;"]  # line 3, never reached
    assert 'href="../../../../code/m/g-v/net.c.html#L-3"' in layer
    assert 'id="L-3"' in (root / "code/m/g-v/net.c.html").read_text()


def test_rendering_twice_gives_the_same_bytes(tmp_path):
    first = small_package(tmp_path / "a")
    second = small_package(tmp_path / "b")
    pages = sorted(p.relative_to(first) for p in first.rglob("*.html"))
    assert pages == sorted(p.relative_to(second) for p in second.rglob("*.html"))
    assert all((first / p).read_bytes() == (second / p).read_bytes() for p in pages)


@needs_browser
def test_the_pages_in_a_browser(tmp_path):
    root = small_package(tmp_path)
    shot = tmp_path / "layer.png"
    assert check_package(root, {"trace/m/g-v/layers/d.html": str(shot)}) == {}
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000
    # the check finds what it is for: a link to a missing file, a missing anchor, a link out of the package
    (root / "broken.html").write_text("<html><body><a href='nothing.md.html'>a</a> <a href='sci/sci.json.html#x9'>"
                                      "b</a> <a href='../outside.html'>c</a></body></html>")
    (tmp_path.parent / "outside.html").write_text("<html></html>")
    problems = check_package(root)
    assert list(problems) == ["broken.html"] and len(problems["broken.html"]) == 3, problems
