"""The package's ``index.html``: the verdict of each part and links to every file (each one reachable from it, with
its rendered page), written from what the build wrote (no figure is typed here)."""

from __future__ import annotations

import html
from pathlib import Path

from harness.stages.evidence import kit
from harness.stages.evidence.package import VOLATILE

PARTS = (("sci/sci.json", "Software Configuration Index: models, generated code, toolchains, images, commands, "
                          "Assay's identity and the tested configuration (assay doctor)"),
         ("trace/trace.json", "Trace matrix: layer -> C lines -> object code -> tests -> coverage, cycles, WCET"),
         ("requirements/requirements.json", "Low-level requirements per layer (LLR ids), the input sets verifying each, "
                                            "neuron activation coverage per layer with the neurons not reached, and "
                                            "the coverage of the requirement-based sets alone"),
         ("coverage/coverage-summary.json", "Structural coverage of the generated code (statements, branches)"),
         ("inputs/input-sets.json", "Input sets (uniform, corners, thresholds, coverage-directed): seed, hash, "
                                    "verdict, coverage reached"),
         ("results/semantic/table1.md", "Semantic preservation (paper Table 1), tolerance and float64 arbiter"),
         ("results/semantic/bitcompare.md", "Bit comparison target vs host"),
         ("results/memory/table5.md", "Memory layout and stack (paper Table 5)"),
         ("results/met/table2.md", "Measured execution (paper Table 2)"),
         ("results/wcet/table4.md", "WCET with soundness against measurement (paper Table 4)"),
         ("results/wcet/layers.md", "Per-layer WCET and measured cycles"),
         ("tool-qualification/tor.md", "Tool Operational Requirements of Assay (DO-330)"),
         ("tool-qualification/tor-matrix.md", "TOR -> tests -> result matrix of Assay's own test run"),
         ("tool-qualification/junit.xml", "JUnit XML of Assay's own test run (durations and dates removed)"),
         *((f"{kit.FOLDER}/{name}", f"DO-330 kit: {title}") for name, title in kit.DOCUMENTS.items()),
         ("evidence.json", "Every file with its size and SHA-256; assay evidence verify rechecks them"))


def write_index_page(root: Path, built, coverage: dict[str, dict], trace: dict[str, dict]) -> Path:
    verdicts = "".join(f"<tr><td>{html.escape(part)}</td><td class='{'ok' if v == 'pass' else 'bad'}'>"
                       f"{html.escape(v)}</td></tr>" for part, v in sorted(built.verdicts.items()))
    links = "".join(f"<li><a href='{html.escape(path)}'>{html.escape(path)}</a>: {html.escape(text)}</li>"
                    for path, text in PARTS if (root / path).is_file())
    rows, objects = [], []
    for key, summary in sorted(coverage.items()):
        untraced = len(trace.get(key, {}).get("untraced_lines", []))
        mcdc = summary.get("mcdc", {})
        mcdc_text = mcdc["figure"] if mcdc.get("available") else "not available"
        rows.append(f"<tr><td>{html.escape(key)}</td><td>{summary['line_percent']}</td>"
                    f"<td>{summary['branch_percent']}</td><td>{html.escape(mcdc_text)}</td>"
                    f"<td>{len(summary['unreached_lines'])}</td>"
                    f"<td>{len(summary['unreached_branches'])}</td><td>{untraced}</td>"
                    f"<td><a href='coverage/{html.escape(key)}/coverage.html'>gcovr</a>, "
                    + (f"<a href='coverage/{html.escape(key)}/mcdc.txt'>MC/DC</a>, " if mcdc.get("available") else "")
                    + f"<a href='trace/{html.escape(key)}/trace.csv'>trace.csv</a></td></tr>")
        for target, figures in sorted(summary.get("object", {}).items()):
            link = f"coverage/{key}/{figures['file']}"
            objects.append(f"<tr><td>{html.escape(key)}</td><td>{html.escape(target)}</td>"
                           f"<td>{figures['instruction_percent']} ({figures['executed']}/{figures['instructions']})</td>"
                           f"<td>{figures['branch_percent']} ({figures['both_ways']}/{figures['conditional_branches']})"
                           f"</td><td>{figures['never_executed']}</td><td>{figures['branches_not_both_ways']}</td>"
                           f"<td><a href='{html.escape(link)}'>{html.escape(figures['file'])}</a></td></tr>")
    layers = []
    for key, matrix in sorted(trace.items()):
        reference = matrix.get("layer_error", {}).get("reference", "-")
        for row in matrix["layers"]:
            error = row.get("error")
            if error is not None:
                figure = f"{error['max_abs_error']:.3e}" if error["compared"] else f"not compared: {error['reason']}"
                good = error["compared"] and error["within_tolerance"]
                layers.append(f"<tr><td>{html.escape(key)}</td><td>{html.escape(row['layer'])}</td>"
                              f"<td>{html.escape(reference)}</td><td class='{'ok' if good else 'bad'}'>"
                              f"{html.escape(figure)}</td></tr>")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in built.notes)
    every = _every_file(root)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Assay evidence package</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px}}td.ok{{background:#dfd}}td.bad{{background:#fdd}}</style></head><body>
<h1>Evidence package</h1><p>Overall verdict: <b>{html.escape(built.verdict)}</b></p>
<table><tr><th>part</th><th>verdict</th></tr>{verdicts}</table>
<h2>Contents</h2><ul>{links}</ul>
<h2>Coverage and traceability per generated code</h2>
<table><tr><th>code</th><th>lines %</th><th>branches %</th><th>MC/DC %</th><th>lines not reached</th>
<th>branch outcomes not reached</th><th>untraced C lines</th><th>details</th></tr>{''.join(rows)}</table>
<h2>Per-layer error against the reference's intermediate outputs</h2>
<table><tr><th>code</th><th>layer</th><th>reference</th><th>max |C - reference|</th></tr>{''.join(layers)}</table>
<h2>Object-code coverage on the targets (QEMU)</h2>
<table><tr><th>code</th><th>target</th><th>instructions executed %</th><th>conditional branches both ways %</th>
<th>instructions never executed</th><th>branches not both ways</th><th>list</th></tr>{''.join(objects)}</table>
<p>Tool qualification (Assay's own tests against docs/tor.md): <b>{html.escape(built.tool_qualification)}</b></p>
<ul>{notes}</ul>
<h2>Every file of the package</h2><p>Each file, as a page where one is rendered (the page links the raw file);
evidence.json lists them all with their SHA-256.</p><ul>{every}</ul></body></html>
"""
    path = root / "index.html"
    path.write_text(page)
    return path



def _every_file(root: Path) -> str:
    """A link to every file of the package a reader may open (its volatile file and this page aside): the pages
    rendered next (``html.render_package``) take the place of their files' links, and each links its raw file."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    return "".join(f"<li><a href='{html.escape(f)}'>{html.escape(f)}</a></li>" for f in files
                   if f not in ("index.html", VOLATILE))
