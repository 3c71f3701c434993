"""``table2.md`` from ``met.json`` only: measured execution (paper Table 2, and Table 3 for -O3)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.core.report import group_digits, model_order
from harness.core.oracle import PASS
from harness.stages.met.run import open_store

_OPT_TITLES = {"-O0": "Table 2: measured execution with -O0", "-O3": "Table 3: measured execution with -O3"}


def _cell(record: dict | None, what: str) -> str:
    if record is None:
        return "–"
    if record["verdict"] != PASS:
        return record["verdict"].upper()  # ERROR, NOT SUPPORTED
    figures = record[what]
    if figures["min"] == figures["max"]:
        return group_digits(figures["median"])
    return f"{group_digits(figures['median'])} ({group_digits(figures['min'])} – {group_digits(figures['max'])})"


def table2(records: list[dict]) -> str:
    """Markdown: per optimisation level, cycles per model (columns) and generator/target/timing (rows)."""
    lines = ["# Measured execution", "",
             "Instructions executed inside the inference function, counted exactly under QEMU "
             "(TCG plugin, docs/met.md), priced per instruction by a timing model (`wcet/timing.py`). "
             "Cells: median (min – max) over the inputs.", ""]
    models = model_order(records)
    for opt in sorted({r["opt"] for r in records}, key=lambda o: (o != "-O0", o != "-O3", o)):
        chosen = [r for r in records if r["opt"] == opt]
        lines += [f"## {_OPT_TITLES.get(opt, f'Measured execution with {opt}')}", ""]
        tables = (("cycles", "Execution time [cycles]", ("generator", "variant", "target", "timing")),
                  ("instructions", "Instructions executed", ("generator", "variant", "target")))
        for what, title, row_fields in tables:
            rows: dict[tuple, dict[str, dict]] = {}
            for record in sorted(chosen, key=lambda r: r["verdict"] == PASS):  # a measured record wins a shared cell
                rows.setdefault(tuple(record[f] for f in row_fields), {})[record["model"]] = record
            lines += [f"### {title}", "",
                      "| " + " | ".join((*row_fields, *models)) + " |",
                      "|" + "---|" * (len(row_fields) + len(models))]
            for key in sorted(rows):
                cells = [_cell(rows[key].get(model), what) for model in models]
                lines.append("| " + " | ".join((*key, *cells)) + " |")
            lines.append("")
        lines += _provenance_lines(chosen)
        lines += _layer_tables(chosen)
    errors = [r for r in records if r["verdict"] != PASS]
    if errors:
        lines += ["## Errors", ""]
        seen = set()
        for record in errors:
            key = (record["model"], record["generator"], record["variant"], record["target"], record["opt"])
            if key not in seen:
                seen.add(key)
                lines.append(f"- {'/'.join(key)}: {record['cause']}")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _provenance_lines(records: list[dict]) -> list[str]:
    lines = ["Measured on:", ""]
    seen = set()
    for record in records:
        if record["verdict"] != PASS:
            continue
        provenance = record.get("provenance", {})
        described = (record["target"], record["opt"], record["n_inputs"], record["seed"],
                     " ".join(provenance.get("flags", [])), provenance.get("compiler", ""),
                     provenance.get("emulator", ""))
        if described not in seen:
            seen.add(described)
            target, opt, n, seed, flags, compiler, emulator = described
            lines.append(f"- {target}: {n} inputs (seed {seed}), `{flags}`, {compiler}; counted under {emulator}")
    timings = sorted({(r["timing"], json.dumps(r.get("timing_params", {}), sort_keys=True)) for r in records})
    for name, params in timings:
        options = ", ".join(f"{k}={v}" for k, v in json.loads(params).items())
        lines.append(f"- timing model `{name}`" + (f": {options}" if options else ""))
    return lines + [""]


def _layer_tables(records: list[dict]) -> list[str]:
    lines = []
    items: dict[tuple, list[dict]] = {}
    for record in records:
        if record["verdict"] == PASS:
            key = (record["model"], record["generator"], record["variant"], record["target"])
            items.setdefault(key, []).append(record)
    for key in sorted(items):
        group = sorted(items[key], key=lambda r: r["timing"])
        lines += [f"### Per layer: {'/'.join(key)} {group[0]['opt']} (medians)", "",
                  "| layer | op | instructions | " + " | ".join(f"cycles ({r['timing']})" for r in group) + " |",
                  "|---|---|---|" + "---|" * len(group)]
        for position, layer in enumerate(group[0]["layers"]):
            cells = [group_digits(r["layers"][position]["cycles"]["median"]) for r in group]
            lines.append(f"| {layer['name']} | {layer['op'] or ''} | {group_digits(layer['instructions']['median'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return lines


def write_table2(store_path: Path, out_dir: Path) -> Path:
    """Write ``out_dir/table2.md`` from a met.json; return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "table2.md"
    path.write_text(table2(open_store(store_path).records()))
    return path
