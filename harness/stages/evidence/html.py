"""The package as web pages, so that ``index.html`` navigates all of it in a browser: every Markdown, JSON,
text, CSV, XML and C file of the package gets an HTML rendering beside it (``NAME.html``; the file itself stays,
it is what ``evidence.json`` hashes and what tools read), and each generated code gets a trace matrix page and a
page per layer that goes layer -> C lines (highlighted) -> object code (disassembly with, per instruction,
whether the test inputs executed it, whether a conditional branch went both ways, and its cycles under each
timing model the WCET stage used) -> tests -> results.

Markdown is rendered by markdown-it-py, C by Pygments, the pages by Jinja2 (autoescaped). What is ours is only
the wiring: which file links to which, read from the package's own files (``trace/trace.json``, the object-code
coverage files, ``results/wcet/wcet.json``, the archived images), never re-derived from the work folder.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path, PurePosixPath

import jinja2
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import CLexer

from harness.stages.evidence.trace import judgement
from wcet import armcode, timing

SUFFIX = ".html"
# the files rendered as pages, by suffix; anything else (images, ELF, NumPy, zip, gcovr's own HTML) is linked as is
MARKDOWN, JSON, SOURCE = {".md"}, {".json"}, {".c", ".h"}
TEXT = {".txt", ".csv", ".xml", ".ff", ".ffx", ".ld", ".f4", ".toml"}
TRACE = "trace/trace.json"
HIGHLIGHTED_BYTES = 256 * 1024  # larger C files (weight tables) are shown as plain text: Pygments takes seconds per MB
OBJECT_COVERAGE = "coverage/{code}/object-{target}.json"
WCET_RESULTS = "results/wcet/wcet.json"
SCI = "sci/sci.json"

_STYLE = """body{font-family:sans-serif;margin:1.5em;max-width:110em}table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:3px 7px;vertical-align:top}th{background:#f3f3f3}pre{background:#fafafa;
border:1px solid #ddd;padding:.6em;overflow-x:auto}nav{margin-bottom:1em;color:#555}.ok{background:#dfd}
.bad{background:#fdd}.never{background:#fdd}.oneway{background:#ffe7b3}.hl{background:#fff7c0}
td.num{text-align:right;font-family:monospace}code,.mono{font-family:monospace}
.source td.linenos{color:#888}.source a{color:inherit;text-decoration:none}:target{background:#ffef9e}"""

_PAGE = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined).from_string(
    """<!doctype html><html><head><meta charset="utf-8"><title>{{ title }}</title>
<link rel="icon" href="data:,"><style>{{ style }}{{ extra_style }}</style></head><body>
<nav><a href="{{ home }}">evidence package</a>{% for name, href in crumbs %} / {% if href %}<a href="{{ href }}">{{ name }}</a>{% else %}{{ name }}{% endif %}{% endfor %}</nav>
<h1>{{ title }}</h1>{{ body }}</body></html>
""")


def render_package(root: Path, skip: set[str] = frozenset()) -> list[Path]:
    """Write the rendering of every renderable file of the package but those in ``skip`` (package paths), and the
    trace pages; return the pages written. Links between files of the package point to renderings where one
    exists."""
    root = Path(root)
    files = sorted(p for p in root.rglob("*") if p.is_file() and not p.name.endswith(SUFFIX))
    rendered = {p.relative_to(root).as_posix() for p in files if _renderable(p)} - set(skip)
    pages = []
    for path in files:
        relative = path.relative_to(root).as_posix()
        if relative not in rendered:
            continue
        if path.suffix in MARKDOWN:
            body = _markdown(path.read_text(), relative, rendered)
        elif path.suffix in JSON:
            body = _json(path.read_text(), relative, rendered, root)
            if relative == TRACE:
                body = _trace_links(json.loads(path.read_text()), relative + SUFFIX) + body
        elif path.suffix in SOURCE and path.stat().st_size <= HIGHLIGHTED_BYTES:
            body = _source(path.read_text(), set())
        else:
            body = f"<pre>{_escape(path.read_text(errors='replace'))}</pre>"
        pages.append(_write(root, relative + SUFFIX, relative, body))
    if (root / TRACE).is_file():
        pages += _trace_pages(root, json.loads((root / TRACE).read_text()), rendered)
    index = root / "index.html"
    if index.is_file():
        index.write_text(_relink(index.read_text(), "index.html", rendered))
    return pages


def page_of(relative: str) -> str:
    """The package path of the page that renders the file ``relative``."""
    return relative + SUFFIX


def _renderable(path: Path) -> bool:
    return path.suffix in MARKDOWN | JSON | SOURCE | TEXT


def _href(target: str, page: str) -> str:
    """The relative link from the page at package path ``page`` to package path ``target`` (``#anchor`` kept)."""
    target, _, anchor = target.partition("#")
    depth = len(PurePosixPath(page).parts) - 1
    return "../" * depth + target + (f"#{anchor}" if anchor else "")


def _resolve(href: str, page: str) -> str | None:
    """The package path a relative link on the page at ``page`` names, or None for an absolute or outside one."""
    if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", href) or href.startswith(("/", "#")):
        return None
    parts: list[str] = list(PurePosixPath(page).parent.parts)
    for part in PurePosixPath(href.partition("#")[0]).parts:
        if part == "..":
            if not parts:
                return None
            parts.pop()
        elif part != ".":
            parts.append(part)
    return "/".join(parts)


def _relink(markup: str, page: str, rendered: set[str]) -> str:
    """Point the links of ``markup`` (on the page at ``page``) that name a rendered file to its rendering."""
    def swap(match: re.Match) -> str:
        href = match.group(2)
        target = _resolve(href, page)
        if target in rendered:
            path, _, anchor = href.partition("#")
            href = path + SUFFIX + (f"#{anchor}" if anchor else "")
        return f"{match.group(1)}{href}{match.group(3)}"
    return re.sub(r"""(href=['"])([^'"]+)(['"])""", swap, markup)


def _escape(text: str) -> str:
    return str(jinja2.utils.markupsafe.escape(text))


def _write(root: Path, page: str, title: str, body: str, crumbs: list[tuple[str, str | None]] | None = None,
           extra_style: str = "") -> Path:
    path = root / page
    path.parent.mkdir(parents=True, exist_ok=True)
    if crumbs is None:
        crumbs = [(title, None)]
        source = page[:-len(SUFFIX)]
        if (root / source).is_file():
            crumbs = [(title, None), ("raw file", _href(source, page))]
    path.write_text(_PAGE.render(title=title, style=_STYLE, extra_style=jinja2.utils.markupsafe.Markup(extra_style),
                                 home=_href("index.html", page), crumbs=crumbs,
                                 body=jinja2.utils.markupsafe.Markup(body)))
    return path


def _markdown(text: str, relative: str, rendered: set[str]) -> str:
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return _relink(body, relative + SUFFIX, rendered) if "href" in body else body


def _json(text: str, relative: str, rendered: set[str], root: Path) -> str:
    """Pretty-printed JSON; every string that names a file of the package (from the package root or from the
    JSON file's folder) is a link to it, or to its rendering."""
    page = relative + SUFFIX
    folder = PurePosixPath(relative).parent

    def link(match: re.Match) -> str:
        value = json.loads(match.group(0))
        for candidate in (value, (folder / value).as_posix()):
            path = PurePosixPath(candidate)
            if candidate and not path.is_absolute() and ".." not in path.parts and _is_file(root / candidate):
                target = candidate + SUFFIX if candidate in rendered else candidate
                return f"<a href=\"{_escape(_href(target, page))}\">{_escape(match.group(0))}</a>"
        return _escape(match.group(0))
    pretty = json.dumps(json.loads(text), indent=1, sort_keys=True, ensure_ascii=False)
    out, last = [], 0
    for match in re.finditer(r'"(?:[^"\\]|\\.)*"', pretty):
        out += [_escape(pretty[last:match.start()]), link(match)]
        last = match.end()
    return "<pre>" + "".join(out) + _escape(pretty[last:]) + "</pre>"


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a JSON string that cannot be a file name (too long for the system) is not."""
    try:
        return path.is_file()
    except OSError:
        return False


@lru_cache(maxsize=1)
def _source_style() -> str:
    return HtmlFormatter(cssclass="source").get_style_defs(".source")


def _source(text: str, marked: set[int], first: int = 1, link_to: str | None = None) -> str:
    """C source with numbered lines, each an anchor ``L<n>`` (or a link to ``link_to#L<n>``), ``marked`` lines
    highlighted."""
    formatter = HtmlFormatter(cssclass="source", linenos="table", lineanchors="L", anchorlinenos=True,
                              linenostart=first, hl_lines=[n - first + 1 for n in sorted(marked)])
    body = highlight(text, CLexer(), formatter)
    if link_to is not None:
        body = re.sub(r'href="#L-(\d+)"', lambda m: f'href="{link_to}#L-{m.group(1)}"', body)
        body = re.sub(r'(id|name)="L-\d+"', "", body)
    return body


def _trace_pages(root: Path, trace: dict, rendered: set[str]) -> list[Path]:
    """Per generated code, ``trace/<code>/trace.html`` (the matrix) and ``trace/<code>/layers/<layer>.html``."""
    pages = []
    wcet = json.loads((root / WCET_RESULTS).read_text())["records"] if (root / WCET_RESULTS).is_file() else []
    # which model, generator and variant a code folder holds: the configuration index says, not the folder's name
    items = {g["directory"].removeprefix("code/"): (g["model"], g["generator"]["name"], g["variant"])
             for g in json.loads((root / SCI).read_text())["generated_code"]} if (root / SCI).is_file() else {}
    for code, matrix in sorted(trace["codes"].items()):
        folder = f"trace/{code}"
        page = f"{folder}/trace.html"
        rows = []
        for row in matrix["layers"]:
            layer_page = f"{folder}/layers/{_slug(row['layer'])}.html"
            timings = [r for r in wcet if (r["model"], r["generator"], r["variant"]) == items.get(code)]
            pages.append(_layer_page(root, code, row, layer_page, timings, rendered))
            rows.append(_matrix_row(code, row, page, layer_page))
        untraced = "".join("<li>" + _line_link(code, u["file"], u["line"], page) + f" <code>{_escape(u['text'])}</code></li>"
                           for u in matrix.get("untraced_lines", []))
        error = matrix.get("layer_error", {})
        body = (f"<p>Per layer of the model: its C lines, its object code per target, the tests that exercised it and "
                f"its results. Per-layer error against <b>{_escape(str(error.get('reference', '-')))}</b>'s intermediate "
                f"outputs on {_escape(str(error.get('inputs', '-')))} inputs; first layer over the tolerance: "
                f"<b>{_escape(str(error.get('first_over_tolerance')))}</b>. Raw data: "
                f"<a href=\"{_escape(_href(TRACE + SUFFIX, page))}\">trace.json</a>, "
                f"<a href=\"{_escape(_href(f'{folder}/trace.csv' + SUFFIX, page))}\">trace.csv</a>.</p>"
                "<table><tr><th>layer</th><th>requirement</th><th>op</th><th>C lines</th><th>object code</th><th>tests</th>"
                "<th>lines not reached</th><th>error</th><th>WCET / max measured [cycles]</th></tr>"
                + "".join(rows) + "</table>"
                + (f"<h2>C lines outside every layer</h2><ul>{untraced}</ul>" if untraced else ""))
        pages.append(_write(root, page, f"Trace matrix: {code}", body,
                            crumbs=[("trace matrix", _href(TRACE + SUFFIX, page)), (code, None)]))
    return pages


def _line_link(code: str, c_file: str, line: int, page: str, suffix: str = "") -> str:
    """A link from ``page`` to line ``line`` of the rendered C file ``c_file`` of ``code``."""
    target = _href(f"code/{code}/{c_file}{SUFFIX}#L-{line}", page)
    return f"<a href=\"{_escape(target)}\">{_escape(c_file)}:{line}{suffix}</a>"


def _trace_links(trace: dict, page: str) -> str:
    links = "".join(f"<li><a href=\"{_escape(_href(f'trace/{code}/trace.html', page))}\">{_escape(code)}</a></li>"
                    for code in sorted(trace["codes"]))
    return f"<p>The trace matrix of each generated code, layer by layer:</p><ul>{links}</ul><h2>trace.json</h2>"


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


def _matrix_row(code: str, row: dict, page: str, layer_page: str) -> str:
    lines = row.get("c_lines")
    c_link = _line_link(code, row["c_file"], lines[0], page, f"-{lines[1]}") if lines and row.get("c_file") else "-"
    objects = "<br>".join(f"{_escape(t)}: {_escape(', '.join(r))}" for t, r in sorted(row.get("object_code", {}).items()))
    error = row.get("error")
    error_cell = ("<td>-</td>" if error is None else
                  f"<td class=\"{'ok' if error['compared'] and error['within_tolerance'] else 'bad'}\">"
                  + (f"{error['max_abs_error']:.3e}" if error["compared"] else _escape(error.get("reason", ""))) + "</td>")
    cycles = "<br>".join(f"{_escape(k)}: {v['wcet_cycles']} / {v['max_measured_cycles']}"
                         for k, v in sorted(row.get("cycles", {}).items()))
    return (f"<tr><td><a href=\"{_escape(_href(layer_page, page))}\">{_escape(row['layer'])}</a></td>"
            f"<td>{_escape(str(row.get('requirement') or '-'))}</td><td>{_escape(str(row.get('op') or '-'))}</td><td>{c_link}</td><td class=\"mono\">{objects or '-'}</td>"
            f"<td>{_escape(str(row.get('tests', '-')))}</td><td>{len(row.get('lines_not_reached', []))}</td>"
            f"{error_cell}<td class=\"num\">{cycles or '-'}</td></tr>")


def _layer_page(root: Path, code: str, row: dict, page: str, wcet: list[dict], rendered: set[str]) -> Path:
    parts = [f"<p>Operation <b>{_escape(str(row.get('op') or '-'))}</b>, layer index {_escape(str(row.get('index')))}"
             f", low-level requirement <b>{_escape(str(row.get('requirement') or '-'))}</b>.</p>"]
    lines, c_file = row.get("c_lines"), row.get("c_file")
    source = root / "code" / code / c_file if c_file else None
    if lines and source is not None and source.is_file():
        text = source.read_text().splitlines()[lines[0] - 1:lines[1]]
        unreached = set(row.get("lines_not_reached", []))
        whole = _href(f"code/{code}/{c_file}{SUFFIX}", page)
        parts.append(f"<h2>C lines {lines[0]}-{lines[1]} of <a href=\"{_escape(whole)}\">"
                     f"{_escape(c_file)}</a></h2><p>Highlighted: lines the test inputs never reached "
                     f"({len(unreached)}).</p>")
        parts.append(_source("\n".join(text) + "\n", unreached, first=lines[0],
                             link_to=whole))
    for target, ranges in sorted(row.get("object_code", {}).items()):
        parts.append(_disassembly(root, code, target, ranges, page, wcet))
    parts.append(f"<h2>Tests</h2><p>{_escape(str(row.get('tests', '-')))}</p><ul>"
                 + "".join(f"<li><a href=\"{_escape(_href(p + SUFFIX, page))}\">{_escape(p)}</a></li>"
                           for p in ("inputs/input-sets.json", "coverage/coverage-summary.json",
                                     "tool-qualification/tor-matrix.md") if p in rendered) + "</ul>")
    error = row.get("error")
    results = ["<li>error against the reference's intermediate output: "
               + (f"{error['max_abs_error']:.3e}; judged by {_escape(judgement(error))}"
                  if error and error["compared"] else _escape(str(error and error.get('reason')))) + "</li>"]
    results += [f"<li>{_escape(k)}: WCET {v['wcet_cycles']} cycles, largest measured {v['max_measured_cycles']}</li>"
                for k, v in sorted(row.get("cycles", {}).items())]
    results += [f"<li><a href=\"{_escape(_href(p + SUFFIX, page))}\">{_escape(p)}</a></li>"
                for p in ("results/semantic/table1.md", "results/wcet/layers.md", "results/wcet/table4.md",
                          "results/met/table2.md") if p in rendered]
    parts.append("<h2>Results</h2><ul>" + "".join(results) + "</ul>")
    return _write(root, page, f"{code}: layer {row['layer']}", "".join(parts),
                  crumbs=[("trace matrix", _href(f"trace/{code}/trace.html", page)), (row["layer"], None)],
                  extra_style=_source_style())


def _disassembly(root: Path, code: str, target: str, ranges: list[str], page: str, wcet: list[dict]) -> str:
    """The layer's instructions on ``target`` from the archived image, each with its source line, whether the
    test inputs executed it (the object-code coverage file lists those never executed and the conditional branches
    that did not go both ways) and its cycles under each timing model of the WCET stage's records."""
    image = root / "images" / code / f"{target}.elf"
    heading = f"<h2>Object code on {_escape(target)}: {_escape(', '.join(ranges))}</h2>"
    if not image.is_file():
        return heading + "<p>No image of this code for this target in the package.</p>"
    covered = root / OBJECT_COVERAGE.format(code=code, target=target)
    coverage = json.loads(covered.read_text()) if covered.is_file() else None
    never = {int(i["address"], 16) for i in coverage["never_executed"]} if coverage else set()
    one_way = {int(i["address"], 16): i["direction"] for i in coverage["branches_not_both_ways"]} if coverage else {}
    models = {r["timing"]: timing.get(r["timing"], **r.get("timing_params", {})) for r in wcet
              if r["target"] == target}
    arm = armcode.load_code(image)
    rows = []
    for text in ranges:
        start, end = (int(x, 16) for x in text.split("-"))
        address = start
        while address < end:
            if arm.kind(address) == "d":
                address += 2
                continue
            insn = arm.decode(address)
            line = arm.line(address)
            where = "-"
            if line is not None:
                where = (_line_link(code, line[0], line[1], page) if (root / "code" / code / line[0]).is_file()
                         else f"{_escape(line[0])}:{line[1]}")
            status, css = ("never executed", "never") if address in never else \
                (one_way[address], "oneway") if address in one_way else ("executed" if coverage else "-", "")
            costs = "".join(f"<td class=\"num\">{m.cycles(insn)}</td>" for m in models.values())
            instruction = _escape(f"{insn.mnemonic} {insn.op_str}".strip())
            rows.append(f"<tr class=\"{css}\"><td class=\"mono\">{address:#x}</td><td class=\"mono\">{instruction}"
                        f"</td><td>{where}</td><td>{_escape(status)}</td>{costs}</tr>")
            address += insn.size
    header = "".join(f"<th>cycles ({_escape(name)})</th>" for name in models)
    data = _href(covered.relative_to(root).as_posix() + SUFFIX, page)
    link = (f" Coverage data: <a href=\"{_escape(data)}\">{_escape(covered.name)}</a>." if coverage
            else " No object-code coverage file for this target.")
    return (heading + f"<p>{len(rows)} instructions.{link} Cycles: the timing model's price of the instruction, "
            "executed (docs/wcet.md).</p><table><tr><th>address</th><th>instruction</th><th>source</th>"
            f"<th>test inputs</th>{header}</tr>" + "".join(rows) + "</table>")
