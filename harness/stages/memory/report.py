"""``table5.md`` from ``memory.json`` only: the memory layout of the executables
(paper Table 5), one table per model and optimisation level, with rows the
segments and the stack, columns the (generator, variant, target) items.

Every table says which compiler and flags built the image and how the stack
figures were obtained, so a number never loses its provenance.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.core.oracle import PASS
from harness.core.report import configuration_lines, model_order
from harness.stages.memory.run import open_store

SEGMENTS = ("text", "rodata", "data", "bss")


def _number(value: int | None) -> str:
    return "–" if value is None else str(value)


def _segment(record: dict, kind: str) -> str:
    inference, image = record.get("inference") or {}, record.get("image") or {}
    if not image:
        return "–"
    return f"{_number(inference.get(kind))} / {_number(image.get(kind))}"


def _static(record: dict) -> str:
    static = (record.get("stack") or {}).get("static")
    if static is None and record.get("source"):  # not compiled: the local arrays its C declares
        return f"≥ {record['source']['stack_lower_bound']} (C source)"
    if static is None:
        return "–"
    return _number(static["bytes"]) if static["bounded"] else "unbounded"


def _measured(record: dict) -> str:
    measured = (record.get("stack") or {}).get("measured")
    return "not measured" if measured is None else str(measured["bytes"])


def _library(record: dict) -> str:
    library = (record.get("inference") or {}).get("library")
    return "–" if not library else f"{library['text']} ({len(library['functions'])} functions)"


def _heap(record: dict) -> str:
    heap = record.get("heap")
    if not heap:
        return "–"
    found = ", ".join(heap["allocators"]) or "none"
    return found if heap["origin"] != "C source" else f"{found} (C source)"


def _verdict(record: dict) -> str:
    return record["verdict"].upper() if record["verdict"] != PASS else PASS


ROWS = (
    *((f"`.{kind}` inference / image", lambda r, k=kind: _segment(r, k)) for kind in SEGMENTS),
    ("library `.text` reached from the entry", _library),
    ("stack, static bound", _static),
    ("stack, measured (QEMU)", _measured),
    ("heap allocation reachable from the entry", _heap),
    ("verdict", _verdict),
)


def tables(records: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """[(model, opt, records in column order)]."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for record in records:
        groups[(record["model"], record["opt"])].append(record)
    order = model_order(records)
    result = []
    for (model, opt), members in sorted(groups.items(), key=lambda g: (order.index(g[0][0]), g[0][1])):
        members.sort(key=lambda r: (r["generator"], r["variant"], r["target"]))
        result.append((model, opt, members))
    return result


def markdown(records: list[dict]) -> str:
    out = ["# Memory layout of the executables (paper Table 5)", "",
           ("Bytes. Segment cells: *inference / image*. *Inference* is the code and data the generator wrote "
           "(the manifest's `symbols`: the inference function, the parameters, the arena); *image* is the "
           "whole linked program (driver, C library, start-up code). The static bound is the worst-case "
           "stack of the entry function, libraries included; the measured figure is the deepest stack the "
           "entry used on the test inputs under QEMU (stack painting). Code that cannot be compiled "
           "(keras2c from PyPI, docs/peers.md K2) shows what its C declares: the bytes of local arrays on the "
           "deepest call path (a lower bound of the stack) and the allocators its calls reach. See "
           "docs/memory.md."), ""]
    for model, opt, members in tables(records):
        out += [f"## {model}, {opt}", "",
                "| | " + " | ".join(f"{r['generator']} ({r['variant']}) {r['target']}" for r in members) + " |",
                "|---|" + "---:|" * len(members)]
        for label, cell in ROWS:
            out.append(f"| {label} | " + " | ".join(cell(r) for r in members) + " |")
        out.append("")
    out += ["## Provenance", "", *(f"- {line}" for line in _provenance(records))]
    problems = _problems(records)
    if problems:
        out += ["", "## Failures, unbounded stacks, errors and heap use", "", *(f"- {line}" for line in problems)]
    return "\n".join(out) + "\n"


def _provenance(records: list[dict]) -> list[str]:
    lines = []
    builds = sorted({(r["target"], r["build"]["compiler"], " ".join(r["build"]["flags"]))
                     for r in records if r.get("build")})
    for target, compiler, flags in builds:
        lines.append(f"{target}: {compiler}, flags `{flags}`.")
    runs = sorted({(m["inputs"], m["seed"], m["painted"]) for r in records
                   if (m := (r.get("stack") or {}).get("measured"))})
    for inputs, seed, painted in runs:
        lines.append(f"Measured stack: {inputs} inputs (seed {seed}), {painted} bytes painted below main's "
                     f"stack pointer, driver built with `-DASSAY_STACK_PAINT={painted}` (same code otherwise).")
    lines.append("Static stack: gcc `-fstack-usage`/`-fcallgraph-info=su` for the generated code, capstone "
                 "disassembly of every function in the ELF (prologue sums, direct calls and tail calls) for "
                 "the libraries.")
    tools = next((r["provenance"]["tools"] for r in records if r.get("provenance", {}).get("tools")), {})
    if tools:
        lines.append("Tools: " + ", ".join(f"{k} {v}" for k, v in sorted(tools.items())) + ".")
    return lines + configuration_lines(records)


def _problems(records: list[dict]) -> list[str]:
    lines = [f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']}: "
             f"{r['verdict']}: {r['cause']}" for r in records if r["verdict"] != PASS]
    lines += [f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']}: heap allocation "
              f"reachable from the entry ({r['heap']['origin']}): {'; '.join(r['heap']['paths'])}"
              for r in records if (r.get("heap") or {}).get("allocators")]
    return sorted(lines)


def write_memory_report(results: Path, out_dir: Path) -> list[Path]:
    """Write ``out_dir/table5.md`` from the records in ``results``; the paths written."""
    records = open_store(results).records()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "table5.md"
    path.write_text(markdown(records))
    return [path]
