"""WCET reports from ``wcet.json``: paper Table 4 (models as columns) and per-layer tables.

The per-layer table follows Table 1 of the multi-core extension paper: one row
per layer with its WCET bound (the task weights for multi-core scheduling),
next to the largest cycle count measured for that layer.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from harness.core.report import group_digits, model_order
from harness.core.oracle import ERROR, NOT_MEASURED, NOT_SUPPORTED, PASS, UNBOUNDED
from harness.stages.wcet.run import open_store

ROW_FIELDS = ("generator", "variant", "target", "opt", "timing", "engine")


def _cell(record: dict | None) -> str:
    if record is None:
        return "–"
    if record["verdict"] in (ERROR, NOT_SUPPORTED):
        return record["verdict"].upper()
    if record["verdict"] == UNBOUNDED:
        loops = len(record["unbounded_loops"])
        return f"UNBOUNDED ({loops} loop{'s' if loops != 1 else ''}; measured max {_measured(record)})"
    if record["verdict"] == NOT_MEASURED:  # an analysis-only target: the bound, nothing to compare it with
        return f"{group_digits(record['wcet_cycles'])} (not measured)"
    text = f"{group_digits(record['wcet_cycles'])} ({record['tightness']:.2f}x)"
    precise = record.get("wcet_cycles_precise")
    if precise is not None and record.get("max_measured_cycles"):
        text += f" / precise {group_digits(precise)} ({precise / record['max_measured_cycles']:.2f}x)"
    return text if record["verdict"] == PASS else f"{text} UNSOUND"


def _measured(record: dict) -> str:
    """The largest measured cycle count, or "not measured" on a target no emulator can run."""
    measured = record.get("max_measured_cycles")
    return NOT_MEASURED if measured is None else group_digits(measured)


def table4(records: list[dict]) -> str:
    models = model_order(records)
    rows: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for record in records:
        rows[tuple(record[f] for f in ROW_FIELDS)][record["model"]] = record
    out = ["# WCET (paper Table 4 layout)", "",
           "WCET bound of the inference function in cycles, and in brackets its tightness: WCET / the largest "
           "cycle count measured under QEMU with the same timing model (a bound below a measurement is "
           "marked UNSOUND and fails). Code with indirect calls whose per-execution targets the generator's "
           "manifest gives (V1) has a second figure, `precise`: the layer loop virtually unrolled, each call "
           "charged its own target; the first figure charges every call its dearest target, as OTAWA does.", "",
           "| Generator (variant) | Target | Timing | Engine | " + " | ".join(models) + " |",
           "|---|---|---|---|" + "---:|" * len(models)]
    for (gen, variant, target, opt, timing_name, engine), cells in sorted(rows.items()):
        out.append(f"| {gen} ({variant}) | {target} {opt} | {timing_name} | {engine} | "
                   + " | ".join(_cell(cells.get(m)) for m in models) + " |")
    out += ["", *(f"- {line}" for line in _provenance(records))]
    out += sorted({f"- Not measured, {r['target']}: {r['cause']}." for r in records if r["verdict"] == NOT_MEASURED})
    problems = sorted({f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']} / "
                       f"{r['timing']} / {r['engine']}: {r['verdict']}: {r['cause']}"
                       for r in records if r["verdict"] not in (PASS, UNBOUNDED, NOT_MEASURED)})
    if problems:
        out += ["", "## Failures and errors", "", *(f"- {p}" for p in problems)]
    findings = unbounded_findings(records)
    if findings:
        out += ["", "## Loops Assay cannot bound (qualification findings)", "",
                "Code whose manifest declares no loop bounds (another tool's) is bounded from its C source alone: "
                "a `for` with literal bounds is bounded, anything else is listed here, per generator and variant "
                "(one timing model and engine each: the list does not depend on them).", ""]
        for (generator, variant), items in findings.items():
            out += [f"### {generator} ({variant})", ""]
            for summary, problems_of_item in items:
                out += [f"- {summary}", *(f"  - {p}" for p in problems_of_item)]
            out.append("")
    return "\n".join(out) + "\n"


def unbounded_findings(records: list[dict]) -> dict[tuple[str, str], list[tuple[str, list[str]]]]:
    """(generator, variant) -> [(one line per model and target, the problems)] for the unbounded records."""
    findings: dict[tuple[str, str], list[tuple[str, list[str]]]] = defaultdict(list)
    seen = set()
    for record in sorted((r for r in records if r["verdict"] == UNBOUNDED),
                         key=lambda r: (r["generator"], r["variant"], r["model"], r["target"], r["opt"])):
        key = (record["generator"], record["variant"], record["model"], record["target"], record["opt"])
        if key in seen:
            continue
        seen.add(key)
        loops = record["unbounded_loops"]
        findings[key[:2]].append((f"{record['model']}, {record['target']} {record['opt']}: {_kinds(loops)}", loops))
    return dict(findings)


def _kinds(problems: list[str]) -> str:
    """'N loops with data-dependent bounds, M library loops without annotation, ...' from the problem lines."""
    kinds = defaultdict(int)
    for problem in problems:
        if "library loop" in problem:
            kinds["library loop(s) without annotation"] += 1
        elif "is not an integer literal" in problem or "is not '" in problem:
            kinds["loop(s) with data-dependent bounds"] += 1
        elif "'while' loop" in problem or "'do ... while'" in problem or "'goto" in problem:
            kinds["while/do/goto loop(s)"] += 1
        elif "no counted for loop" in problem or "has no loop in the binary" in problem:
            kinds["loop(s) the C and the binary do not match"] += 1
        else:
            kinds["other problem(s)"] += 1
    return ", ".join(f"{count} {kind}" for kind, count in kinds.items())


def layer_tables(records: list[dict]) -> str:
    out = ["# WCET per layer", "",
           "Per-layer WCET bounds (cycles), the weights for multi-core scheduling, beside the largest cycle "
           "count measured for that layer. `(outside layers)` is the function's own prologue and epilogue. "
           "With a generic inference loop (assay-v1), a layer is one execution of the dispatch call "
           "`net[i].layer_type`: its call instruction and everything it runs, measured by execution and bounded "
           "with that layer's own loop bounds (precise) or, as OTAWA would, with the dearest target and the "
           "largest bounds (context-insensitive); `(inference loop)` is the entry's own code.", ""]
    for record in sorted((r for r in records if r.get("layers")),
                         key=lambda r: (model_order(records).index(r["model"]),
                                        tuple(r[f] for f in ROW_FIELDS))):
        out += [f"## {record['model']}: {record['generator']} ({record['variant']}), {record['target']} "
                f"{record['opt']}, timing {record['timing']}, engine {record['engine']}", ""]
        dispatched = any("wcet_cycles_insensitive" in layer for layer in record["layers"])
        if dispatched:  # V1: a layer is an execution of the dispatch call (docs/wcet.md)
            out += ["| Layer | WCET precise [cycles] | WCET context-insensitive [cycles] | Max measured [cycles] |",
                    "|---|---:|---:|---:|"]
        else:
            out += ["| Layer | WCET [cycles] | Max measured [cycles] |", "|---|---:|---:|"]
        for layer in record["layers"]:
            wcet = "–" if layer["wcet_cycles"] is None else group_digits(layer["wcet_cycles"])
            insensitive = layer.get("wcet_cycles_insensitive", layer["wcet_cycles"])
            extra = f" {'–' if insensitive is None else group_digits(insensitive)} |" if dispatched else ""
            out.append(f"| {layer['layer']} | {wcet} |{extra} {_measured(layer)} |")
        total = f"**{group_digits(record['wcet_cycles'])}**"
        if dispatched:
            total = f"**{group_digits(record['wcet_cycles_precise'])}** | {total}"
        out += [f"| **Total** | {total} | **{_measured(record)}** |", ""]
    return "\n".join(out) + "\n"


def _provenance(records: list[dict]) -> list[str]:
    lines = sorted({f"Measured on {r['n_inputs']} inputs (seed {r['seed']}) under QEMU with the counting plugin "
                    f"(docs/met.md)." for r in records if r["verdict"] != NOT_MEASURED})
    params = sorted({f"Timing model {r['timing']}: {r.get('timing_params')}" for r in records})
    builds = sorted({f"{r['target']}: {r['provenance'].get('compiler', '?')}, flags "
                     f"`{' '.join(r['provenance'].get('flags', []))}`"
                     for r in records if r.get("provenance", {}).get("compiler")})
    return lines + params + builds + ["Flow facts: generated automatically (docs/flowfacts.md); analysis: "
                                      "docs/wcet.md."]


def otawa_table(records: list[dict]) -> str:
    """``--engine both``: per item and flow-fact file, both figures, the agreement, and per difference the
    routines that differ alone, the first instruction decoded otherwise and the declared OTAWA error."""
    out = ["# Assay against OTAWA (`--engine both`)", "",
           "Two independent analyses of the same ELF with the same flow facts and cost model (`trivial`: 5 cycles "
           "per instruction; OTAWA's `owcet -s trivial`). *agree*: the same WCET; *explained*: a declared OTAWA "
           "error, recognised by its check (wcet/crosscheck.py), explains the difference; *unexplained*: a "
           "failure. OTAWA's decoder errors are reproduced in `otawa-reproducers/`.", "",
           "| Model | Generator (variant) | Target | Facts | Assay | OTAWA | Status | Cause |",
           "|---|---|---|---|---:|---:|---|---|"]
    details = []
    for record in sorted((r for r in records if r.get("crosscheck")),
                         key=lambda r: (model_order(records).index(r["model"]), tuple(r[f] for f in ROW_FIELDS))):
        checked = record["crosscheck"]
        if not checked.get("files"):
            out.append(f"| {record['model']} | {record['generator']} ({record['variant']}) | {record['target']} "
                       f"| – | {group_digits(record['wcet_cycles']) if record.get('wcet_cycles') else '–'} | – | "
                       f"{checked['status']} | {checked.get('cause') or ''} |")
            continue
        for name, check in checked["files"].items():
            theirs = (group_digits(check["otawa_cycles"]) if check["otawa_error"] is None
                      else f"error: {check['otawa_error']}")
            explanation = check.get("explanation")
            cause = f"{explanation['kind']} error `{explanation['name']}`" if explanation else ""
            divergence = check.get("divergence")
            if divergence:
                cause += f"; {divergence['function']} at {divergence['address']}: {divergence['what']}"
            out.append(f"| {record['model']} | {record['generator']} ({record['variant']}) | {record['target']} | "
                       f"{'.ff' if name == 'f4' else '.ffx'} | {group_digits(check['assay_cycles'])} | {theirs} | "
                       f"{check['status']} | {cause} |")
            if check["status"] != "agree":
                details.append((record, name, check))
    for record, name, check in details:
        out += ["", f"## {record['model']}, {record['generator']} ({record['variant']}), {record['target']}, "
                    f"{'.ff' if name == 'f4' else '.ffx'}", "", f"- {check['line']}"]
        out += [f"- {f['function']}: Assay {f['assay_cycles']}, OTAWA "
                f"{f['otawa_cycles'] if f['otawa_error'] is None else f['otawa_error']}"
                f"{'' if f['agree'] else ' (differ)'}" for f in check["functions"]]
        if check.get("explanation"):
            explanation = check["explanation"]
            out.append(f"- Declared OTAWA error `{explanation['name']}`: {explanation['description']}.")
        if check.get("divergence"):
            out += ["", "```", *check["divergence"]["excerpt"], "```"]
    return "\n".join(out) + "\n"


def write_wcet_report(results: Path, out_dir: Path) -> list[Path]:
    records = open_store(results).records()
    out_dir.mkdir(parents=True, exist_ok=True)
    table, layers = out_dir / "table4.md", out_dir / "layers.md"
    table.write_text(table4(records))
    layers.write_text(layer_tables(records))
    if not any(r.get("crosscheck") for r in records):
        return [table, layers]
    crosschecked = out_dir / "otawa.md"
    crosschecked.write_text(otawa_table(records))
    return [table, layers, crosschecked]
