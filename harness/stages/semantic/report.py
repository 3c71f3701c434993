"""Reports generated from ``results.json`` only: paper Table 1 (Markdown) and an HTML page with a plot.

Every table says what its numbers were measured against (reference, inputs,
seed, compiler, flags, target, tolerance), so a number never loses its
provenance.
"""

from __future__ import annotations

import base64
import html
import threading
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from harness.core.report import configuration_lines, model_order, superseded_lines
from harness.models.model import describe_domain
from harness.targets import HOST

ROW_FIELDS = ("generator", "variant", "target", "opt", "reference")


def word(record: dict) -> str:
    """The verdict word a reader sees: the record's verdict, or ``review`` for a pass of the derived rule that the
    fixed tolerance, its second opinion, would have failed (the record's ``review`` line says where)."""
    return "review" if record["verdict"] == "pass" and record.get("review") else record["verdict"]


def _cell(record: dict | None) -> str:
    """A Table 1 cell: the record's verdict word, and its maximum error when it has one."""
    if record is None:
        return "–"
    error = record.get("max_abs_error")
    return word(record) if error is None else f"{word(record)} {error:.4e}"


def judgement(record: dict) -> dict:
    """Which rule judged ``record`` and by what figures: ``rule`` (``derived``, with the order of accumulation whose
    bound it is, or ``fixed``, saying so when the derived rule fell back to it), ``bound`` (the rule's largest
    allowance: the derived bound, or atol + rtol x max |reference|), ``observed`` (the largest distance the rule
    measures: |C - float64|, or |C - reference|) and ``margin`` (the smallest bound / observed over the outputs, the
    record's own figure); a figure the record does not have (an error before any comparison) is None."""
    derived = record.get("derived") or {}
    if derived and "fallback" not in derived:
        layers = record.get("layer_local") or {}
        margins = [m for m in (derived.get("tightness"), layers.get("margin") if layers.get("judged") else None)
                   if m is not None]
        return {"rule": f"derived ({record.get('accumulation') or 'any'} order)"
                        + (", layer-local" if layers.get("judged") else ""), "bound": derived.get("bound"),
                "observed": derived.get("c_distance"), "margin": min(margins, default=None)}
    largest, atol = record.get("max_abs_reference"), record.get("tolerance")
    bound = None if largest is None or atol is None else atol + (record.get("rtol") or 0.0) * largest
    return {"rule": "fixed (derived fell back)" if derived else "fixed", "bound": bound,
            "observed": record.get("max_abs_error"), "margin": record.get("margin")}


def _figure(value: float | None, digits: str = ".3e") -> str:
    if value is None:
        return "–"
    return "inf" if value == float("inf") else format(value, digits)


VERDICT_COLUMNS = ("Model", "Generator (variant)", "Target", "Reference", "Verdict", "Rule", "Bound", "Observed",
                   "Margin (bound / observed)")


def verdict_rows(records: list[dict]) -> list[list[str]]:
    """One row per record (``VERDICT_COLUMNS``): its verdict word, the rule that judged it, the bound, the distance
    it measured and the margin, in model order."""
    order = model_order(records)
    rows = []
    for r in sorted(records, key=lambda r: (order.index(r["model"]), *(str(r[f]) for f in ROW_FIELDS))):
        j = judgement(r)
        rows.append([r["model"], f"{r['generator']} ({r['variant']})", f"{r['target']} {r['opt']}", r["reference"],
                     word(r), j["rule"], _figure(j["bound"]), _figure(j["observed"]),
                     _figure(j["margin"], ".3g")])
    return rows


def verdict_lines(records: list[dict]) -> list[str]:
    """The "Verdicts" section of table1.md (``verdict_rows``)."""
    return ["## Verdicts", "",
            "Each record's verdict, the rule that judged it (fixed: |C - reference| <= atol + rtol x |reference|; "
            "derived: |C - float64| <= the derived bound, docs/semantic.md), the rule's largest bound, the largest "
            "distance it measured, and the margin: the smallest bound / distance over the outputs (at least 1 for a "
            "pass; inf: C equal to what it is measured against everywhere).", "",
            "| " + " | ".join(VERDICT_COLUMNS) + " |", "|---|---|---|---|---|---|---:|---:|---:|",
            *("| " + " | ".join(row) + " |" for row in verdict_rows(records)), *review_lines(records)]


def review_lines(records: list[dict]) -> list[str]:
    """The records a reviewer should look at: passed by the derived rule, which decides, but above the fixed
    tolerance, the second opinion (``review`` in the Verdicts table; they count as passing)."""
    flagged = [r for r in records if word(r) == "review"]
    if not flagged:
        return []
    return ["", f"To review ({len(flagged)}): within the derived bound of a correct float32 implementation, so they "
            "pass, but above the fixed tolerance atol + rtol x |reference|:", "",
            *(f"- {r['model']}, {r['generator']} ({r['variant']}), {r['target']} {r['opt']} vs {r['reference']}: "
              f"{r['review']}" for r in flagged)]


def table1(records: list[dict]) -> tuple[list[str], list[tuple[tuple, list[str]]]]:
    """(models, [(row key, cells)]) in paper Table 1 layout: models as columns."""
    models = model_order(records)
    rows: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for record in records:
        rows[tuple(record[f] for f in ROW_FIELDS)][record["model"]] = record
    return models, [(key, [_cell(cells.get(m)) for m in models]) for key, cells in sorted(rows.items())]


def _provenance_lines(records: list[dict]) -> list[str]:
    lines = []
    runs = sorted({(r["n_inputs"], r["seed"]) for r in records if r["n_inputs"] or not r.get("inputs_from")})
    domains = {r["model"]: describe_domain(r["input_domain"]) for r in records if r.get("input_domain") is not None}
    lines.append("Inputs: " + ("; ".join(f"{n} inputs, seed {s}" for n, s in runs)
                               + ", drawn uniformly from each model's input domain (docs/zoo.md)" if runs
                               else "the user's test set alone (--inputs 0), within each model's input domain")
                 + (": " + "; ".join(f"{m} {d}" for m, d in sorted(domains.items())) if domains else "") + ".")
    lines += [f"User's test set (--inputs-from) for {', '.join(models)}: {file} (SHA-256 {sha[:16]}...), {count} "
              f"inputs{' with labels' if labelled else ''}, the first rows of the run's inputs (section \"Decisions on "
              f"the user's data\")." for (file, sha, count, labelled), models in _user_sets(records).items()]
    tolerances = sorted({(r["model"], (r["tolerance"], r.get("rtol") or 0.0))
                         for r in records if r.get("tolerance") is not None})
    distinct = sorted({t for _, t in tolerances})
    derived = sorted({r["model"] for r in records if r.get("derived") and "fallback" not in r["derived"]})
    fixed = f"atol + rtol x |reference| (fallback for {', '.join(sorted(_fallbacks(records)))})" \
        if _fallbacks(records) else "atol + rtol x |reference|"
    if derived:
        lines.append("Verdict (--tolerance derived) for " + ", ".join(derived) + ": every output within "
                     "|C - float64| <= the derived bound of a correct float32 implementation "
                     "(docs/semantic.md, \"Derived tolerance\"; section below).")
    if not derived or _fallbacks(records) or any(not r.get("derived") for r in records):
        lines.append(f"Verdict: every output within |C - reference| <= {fixed}: " + ", ".join(
            f"atol {a:g}, rtol {r:g} ({', '.join(m for m, tt in tolerances if tt == (a, r))})" for a, r in distinct))
    memory = memory_line(records)
    if memory:
        lines.append(memory)
    builds = sorted({(r["provenance"].get("compiler", "?"), " ".join(r["provenance"].get("flags", [])))
                     for r in records if r.get("provenance", {}).get("compiler")})
    for compiler, flags in builds:
        lines.append(f"Compiler: {compiler}, flags `{flags}`.")
    tools = next((r["provenance"]["tools"] for r in records if r.get("provenance", {}).get("tools")), {})
    if tools:
        lines.append("Tools: " + ", ".join(f"{k} {v}" for k, v in sorted(tools.items())) + ".")
    return lines + configuration_lines(records)


def _user_sets(records: list[dict]) -> dict[tuple, list[str]]:
    """(file, SHA-256, inputs, labels?) of each user's test set the records ran -> the models it ran on."""
    sets: dict[tuple, list[str]] = defaultdict(list)
    for r in records:
        given = r.get("inputs_from")
        if given:
            models = sets[(given["file"], given["sha256"], given["inputs"], given["labels"])]
            models += [] if r["model"] in models else [r["model"]]
    return sets


DECISION_COLUMNS = ("Model", "Generator (variant)", "Target", "Reference", "Inputs", "Top-1 agreement", "Flips",
                    "Accuracy of C", "Accuracy of reference", "Guaranteed decisions")
_LISTED = 20  # inputs named per list in table1.md; the record keeps them all


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f} %"


def decision_rows(records: list[dict]) -> list[list[str]]:
    """One row per record with decisions (``DECISION_COLUMNS``): on the user's test set, the top-1 agreement of C
    and reference, the number of flips, both accuracies (with labels) and how many decisions are guaranteed."""
    order = model_order(records)
    rows = []
    for r in sorted((r for r in records if r.get("decisions")),
                    key=lambda r: (order.index(r["model"]), *(str(r[f]) for f in ROW_FIELDS))):
        d, accuracy = r["decisions"], r["decisions"]["accuracy"] or {}
        guaranteed = "–" if d["guaranteed"] is None else f"{d['guaranteed']} of {d['inputs']}"
        rows.append([r["model"], f"{r['generator']} ({r['variant']})", f"{r['target']} {r['opt']}", r["reference"],
                     str(d["inputs"]), _share(d["agreement"]), str(len(d["flips"])), _share(accuracy.get("c")),
                     _share(accuracy.get("reference")), guaranteed])
    return rows


def decision_lines(records: list[dict]) -> list[str]:
    """The "Decisions on the user's data" section of table1.md (``decision_rows``), then per record its flips and
    the inputs whose decision the derived bound does not guarantee (the first ``_LISTED`` of each)."""
    rows = decision_rows(records)
    if not rows:
        return []
    lines = ["## Decisions on the user's data", "",
             "The classifier's decision (arg-max) on each input of the user's test set (--inputs-from): top-1 "
             "agreement of C and reference, the flips (inputs where they decide differently), with labels the "
             "accuracy of the implemented model beside the trained model's, and the guaranteed decisions: the "
             "exact (float64) top class k beats every other class j by more than the derived bound allows, "
             "y_k - y_j > b_k + b_j, so every correct float32 implementation decides k (docs/semantic.md).", "",
             "| " + " | ".join(DECISION_COLUMNS) + " |", "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
             *("| " + " | ".join(row) + " |" for row in rows), ""]
    for r in records:
        d = r.get("decisions")
        if not d:
            continue
        where = f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']} / {r['reference']}"
        if d["flips"]:
            lines.append(f"- {where}: flips at inputs " + _listed(
                [f"#{f['input']} (C {f['c']}, reference {f['reference']})" for f in d["flips"]]))
        if d["not_guaranteed"]:
            lines.append(f"- {where}: decision not guaranteed at inputs " + _listed(
                [f"#{n['input']} (class {n['class']} against {n['runner_up']}: margin {n['margin']:.3e} <= bound "
                 f"{n['bound']:.3e})" for n in d["not_guaranteed"]]))
        if d["guarantee_note"]:
            lines.append(f"- {where}: no guaranteed decisions: {d['guarantee_note']}")
    return lines


def _listed(items: list[str]) -> str:
    return ", ".join(items[:_LISTED]) + (f" and {len(items) - _LISTED} more (results.json)"
                                         if len(items) > _LISTED else "")


def memory_line(records: list[dict]) -> str | None:
    """What the host records' memory checks were (``sanitize``): how many inputs ran under the sanitizers, for which
    models with the arena-region check, and which items ran without them (``--sanitize 0``, visibly)."""
    host = [r for r in records if r["target"] == HOST and isinstance(r.get("provenance"), dict)
            and r["provenance"].get("sanitizer") is not None]
    if not host:
        return None
    off = sorted({r["model"] for r in host if not isinstance(r["provenance"]["sanitizer"], dict)})
    on = [r for r in host if isinstance(r["provenance"]["sanitizer"], dict)]
    parts = []
    if on:
        counts = sorted({r["provenance"]["sanitizer"]["inputs"] for r in on})
        flags = " ".join(on[0]["provenance"]["sanitizer"]["flags"])
        arena = sorted({r["model"] for r in on if r["provenance"]["sanitizer"].get("arena_check")})
        parts.append(f"{' or '.join(map(str, counts))} seeded inputs of each host item run again under "
                     f"AddressSanitizer and UBSan (`{flags}`), with guard words around the buffers"
                     + (f" and the arena-region check ({', '.join(arena)})" if arena else "")
                     + "; a report is an error verdict")
    if off:
        parts.append(f"off (--sanitize 0) for {', '.join(off)}: no memory check beyond the guard words around the "
                     f"buffers")
    return "Memory checks: " + "; ".join(parts) + "."


def _errors(records: list[dict]) -> list[str]:
    return sorted({f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']} / "
                   f"{r['reference']}: {r['verdict']}: {r['cause']}{_arbiter_note(r)}"
                   for r in records if r["verdict"] != "pass"})


def _arbiter_note(record: dict) -> str:
    judged = record.get("arbiter")
    return f"; float64 arbiter: {judged['text']}" if judged and "text" in judged else ""


def _fallbacks(records: list[dict]) -> set[str]:
    """The models whose derived-tolerance records fell back to the fixed tolerance."""
    return {r["model"] for r in records if r.get("derived") and "fallback" in r["derived"]}


def derived_lines(records: list[dict]) -> list[str]:
    """Per record of ``--tolerance derived``: the bound, the C's and the reference's distance to float64, the
    tightness, a reference outside its own bound; and each fallback to the fixed tolerance with its reason."""
    judged = [r for r in records if r.get("derived") and "fallback" not in r["derived"] and not r.get("quantized")]
    fallbacks = sorted({f"{r['model']}: {r['derived']['fallback']}" for r in records
                        if r.get("derived") and "fallback" in r["derived"]})
    if not judged and not fallbacks:
        return []
    lines = ["## Derived tolerance", "",
             "Each output's bound on |float32 - exact| for any correct float32 implementation (of the order of "
             "accumulation the code's manifest declares, column Order; any summation order, fused or not, for code "
             "that declares none and for the references; libm within its documented ulp), propagated from the "
             "weights and each input (`harness/references/bounds.py`). A C within it is as close to the exact "
             "result as float32 allows, however far the float32 references are from each other; one outside it is "
             "a defect. Tightness: bound / |C - float64|, the smallest over outputs."]
    if judged:
        lines += ["", "Inputs judged: a seeded sample of `--derived-inputs` of the campaign's, and every input outside "
                      "the fixed tolerance.", "",
                  "| Model | Generator (variant) | Target | Reference | Order | inputs judged | largest bound | "
                  "C vs float64 | reference vs float64 | tightness | verdict |",
                  "|---|---|---|---|---|---:|---:|---:|---:|---:|---|"]
        for r in sorted(judged, key=lambda r: (r["model"], r["generator"], r["variant"], r["target"], r["reference"])):
            d = r["derived"]
            lines.append(f"| {r['model']} | {r['generator']} ({r['variant']}) | {r['target']} {r['opt']} | "
                         f"{r['reference']} | {r.get('accumulation') or 'any'} | {d.get('inputs', r.get('n_inputs', '–'))} | "
                         f"{_figure(d['bound'], '.4e')} | "
                         f"{_figure(d['c_distance'], '.4e')} | {_figure(d['reference_distance'], '.4e')} | "
                         f"{_figure(d['tightness'], '.3g')} | {d['verdict']} |")
        lines += [f"- Reference defect: {r['model']} / {r['target']} {r['opt']}: {r['derived']['reference_defect']}"
                  for r in judged if r["derived"].get("reference_defect")]
        lines += [f"- {r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']} / {r['reference']}: "
                  f"passes by the derived bound although "
                  f"|C - {r['reference']}| = {r['max_abs_error']:.4e} is outside the fixed tolerance: C is "
                  f"{r['derived']['c_distance']:.4e} from float64, within the bound {r['derived']['bound']:.4e} "
                  f"that float32 rounding allows on this model, and {r['reference']} "
                  f"{r['derived']['reference_distance']:.4e} (ill-conditioned: every float32 implementation is "
                  f"that far from the exact result)"
                  for r in judged if r["derived"]["verdict"] == "pass" and r["derived"].get("fixed_verdict") == "fail"]
    return lines + [f"- Fixed tolerance used for {line}" for line in fallbacks] + layer_lines(judged)


def quantized_lines(records: list[dict]) -> list[str]:
    """Per record of a quantized model judged by the integer arbiter (docs/semantic.md, "Quantized models"): the
    rule its C declares, the C's distance to the arbiter under that rule and the reference's under its own (both 0
    when each follows its rule), and the C's distance to the reference in LSB of the output."""
    judged = [r for r in records if r.get("quantized") and r.get("derived") and "fallback" not in r["derived"]]
    if not judged:
        return []
    lines = ["## Quantized models", "",
             "Judged bit for bit against the integer arbiter (`harness/references/integer.py`): the C under the "
             "requantization rule its manifest declares, the reference under its own (ONNX Runtime's float32 "
             "requantization). The two rules may differ by 1 LSB per layer from the same input (docs/quantized.md), "
             "so the C's distance to the reference is reported, not judged. The quantization error (the C against "
             "the float network the model quantizes, where the model names it) is what quantizing cost: a property "
             "of the model, judged by no verdict.", "",
             "| Model | Generator (variant) | Target | Reference | C's rule | inputs judged | LSB | C vs arbiter | "
             "reference vs its arbiter | C vs reference (LSB) | quantization error (LSB) | verdict |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in sorted(judged, key=lambda r: (r["model"], r["generator"], r["variant"], r["target"], r["reference"])):
        d, q = r["derived"], r["quantized"]
        lines.append(f"| {r['model']} | {r['generator']} ({r['variant']}) | {r['target']} {r['opt']} | "
                     f"{r['reference']} | {q['rule']} | {d.get('inputs', '–')} | {_figure(q['lsb'], '.4e')} | "
                     f"{_figure(d['c_distance'], '.4e')} | {_figure(d['reference_distance'], '.4e')} | "
                     f"{_figure(q['c_vs_reference_lsb'], '.6g')} | {_quantization_error(q)} | {d['verdict']} |")
    return lines + [f"- {r['model']} / {r['target']} {r['opt']}: {r['derived']['reference_defect']}"
                    for r in judged if r["derived"].get("reference_defect")]


def _quantization_error(quantized: dict) -> str:
    """The quantization error's cell: the figure in real units and LSB, why there is none, or '–' (no float
    network named)."""
    if quantized.get("quantization_error") is not None:
        return f"{quantized['quantization_error']:.4e} ({quantized['quantization_error_lsb']:.6g})"
    return quantized.get("quantization_error_why", "–")


def layer_lines(records: list[dict]) -> list[str]:
    """Per record judged under the derived rule, its layer-local verdict (``harness.core.layerlocal``): each layer
    of the C judged from the C's own input to it, the largest local bound and distance, the smallest margin, the
    first layer outside its bound; or why the C was not judged layer by layer (the end-to-end bound then decides)."""
    if not records:
        return []
    lines = ["", "### Layer-local verdict", "",
             "Each layer's output of the C, read at the layer's end, against the layer evaluated in float64 from the "
             "C's own input to it, within the bound of that layer's rounding alone (docs/semantic.md). Order: the "
             "order of accumulation the bounds assume (declared by the code's manifest or assay.json, else any).", "",
             "| Model | Generator (variant) | Target | Order | layers judged | largest local bound | "
             "largest distance | margin | verdict |", "|---|---|---|---|---:|---:|---:|---:|---|"]
    seen = set()
    for r in sorted(records, key=lambda r: (r["model"], r["generator"], r["variant"], r["target"])):
        key = (r["model"], r["generator"], r["variant"], r["target"], r["opt"])
        layers = r.get("layer_local") or {}
        if key in seen or not layers:
            continue
        seen.add(key)
        head = f"| {r['model']} | {r['generator']} ({r['variant']}) | {r['target']} {r['opt']} | " \
               f"{layers.get('accumulation') or 'any'} |"
        if not layers.get("judged"):
            lines.append(f"{head} 0 | – | – | – | not judged: {layers.get('reason')} |")
            continue
        rows = [row for row in layers["layers"] if row["judged"]]
        verdict = layers["verdict"] if layers["verdict"] == "pass" else f"{layers['verdict']}: {layers['cause']}"
        lines.append(f"{head} {len(rows)} of {len(layers['layers'])} | "
                     f"{_figure(max(row['bound'] for row in rows), '.4e')} | "
                     f"{_figure(max(row['c_distance'] for row in rows), '.4e')} | {_figure(layers['margin'], '.3g')} | "
                     f"{verdict} |")
    return lines


def arbiter_lines(records: list[dict]) -> list[str]:
    """Per record, the C's and the reference's distance to float64 and which is closer; every record the arbiter
    could not evaluate, with the reason ("arbiter not available: <op, attribute>")."""
    judged = [r for r in records if r.get("arbiter") and "text" in r["arbiter"]]
    unattributed = sorted({f"{r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']}: "
                           f"{r['arbiter']['error']}" for r in records if r.get("arbiter") and "error" in r["arbiter"]})
    if not judged:
        return ["## Float64 arbiter", "", *(f"- {cause}" for cause in unattributed)] if unattributed else []
    lines = ["## Float64 arbiter", "",
             "The same inputs evaluated in float64 (`harness/references/float64.py`): the maximum infinity-norm "
             "distance of the C and of each float32 reference to it. A C closer to float64 than the reference "
             "that flagged it points to float32 noise in the reference, not to a generator defect.", "",
             "| Model | Generator (variant) | Target | Reference | C vs float64 | reference vs float64 | closer |",
             "|---|---|---|---|---:|---:|---|"]
    for r in sorted(judged, key=lambda r: (r["model"], r["generator"], r["variant"], r["target"], r["reference"])):
        a = r["arbiter"]
        lines.append(f"| {r['model']} | {r['generator']} ({r['variant']}) | {r['target']} {r['opt']} | "
                     f"{r['reference']} | {a['c_error']:.4e} | {a['reference_error']:.4e} | {a['closer']} |")
    return lines + ([""] if unattributed else []) + [f"- {cause}" for cause in unattributed]


def markdown(records: list[dict], superseded: Sequence[dict] = ()) -> str:
    """Table 1 of ``records``, with the notes on them and on the ``superseded`` entries of the results file."""
    models, rows = table1(records)
    out = ["# Semantic preservation (paper Table 1 layout)", "",
           "Verdict and maximum infinity-norm error ||C - reference|| (paper Definition 15) over the input set, "
           "FP32.", "",
           "| Generator (variant) | Target | Reference | " + " | ".join(models) + " |",
           "|---|---|---|" + "---:|" * len(models)]
    for (gen, variant, target, opt, ref), cells in rows:
        out.append(f"| {gen} ({variant}) | {target} {opt} | {ref} | " + " | ".join(cells) + " |")
    out += ["", *(f"- {line}" for line in _provenance_lines(records)), "", *verdict_lines(records)]
    problems = _errors(records)
    if problems:
        out += ["", "## Failures and errors", "", *(f"- {p}" for p in problems)]
    per_output = [f"- {r['model']} / {r['generator']} ({r['variant']}) / {r['target']} {r['opt']} / "
                  f"{r['reference']}: " + ", ".join(f"{name} {error:.4e}" for name, error in
                                                     r["max_abs_error_per_output"].items())
                  for r in records if r.get("max_abs_error_per_output")]
    if per_output:
        out += ["", "Maximum error per output of the models with several outputs (packed, docs/zoo.md):", "",
                *per_output]
    judged = arbiter_lines(records)
    if judged:
        out += ["", *judged]
    bounded = derived_lines(records)
    if bounded:
        out += ["", *bounded]
    integers = quantized_lines(records)
    if integers:
        out += ["", *integers]
    decided = decision_lines(records)
    if decided:
        out += ["", *decided]
    if superseded:
        out += ["", "## Superseded records", "", *(f"- {line}" for line in superseded_lines(superseded))]
    return "\n".join(out) + "\n"


def warm_up() -> None:
    """Import matplotlib in a background thread, for a caller about to wait on a subprocess.

    ``assay semantic --workers N`` waits for its pytest session, whose start-up leaves a core idle: the
    plot's imports (about 0.5 s) are made then instead of after the last shard.
    """
    threading.Thread(target=_import_pyplot, name="assay-report-imports", daemon=True).start()


def _import_pyplot() -> ModuleType:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(records: list[dict], path: Path) -> None:
    """``figure(records)`` written to ``path``."""
    plt = _import_pyplot()
    fig = figure(records)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def figure(records: list[dict]):
    """Per model, one series per (generator, variant, target, reference): the largest distance the record's rule
    measured (``judgement``: |C - reference|, or |C - float64| under the derived rule) as a marker, and the rule's
    bound as a dash of the same colour, log scale; the legend beside the axes, where it covers no point."""
    plt = _import_pyplot()
    models = model_order(records)
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(models) + 2), 4.5))
    series: dict[tuple, dict[str, tuple]] = defaultdict(dict)
    for r in records:
        j = judgement(r)
        if r["verdict"] not in ("error", "not supported") and j["observed"] is not None:
            series[tuple(r[f] for f in ROW_FIELDS)][r["model"]] = (max(j["observed"], 1e-12), j["bound"], j["rule"])
    markers = "osD^v<>ph*"
    step = min(0.12, 0.8 / max(len(series), 1))  # the series of a model side by side, not on each other
    for i, (key, values) in enumerate(sorted(series.items())):
        xs = [models.index(m) + (i - (len(series) - 1) / 2) * step for m in values]
        rules = sorted({rule.split(" ")[0] for _, _, rule in values.values()})
        dots = ax.scatter(xs, [v[0] for v in values.values()], marker=markers[i % len(markers)], zorder=3,
                          label=f"{key[0]} ({key[1]}) {key[2]} {key[3]} vs {key[4]} ({', '.join(rules)})")
        bounded = [(x, v[1]) for x, v in zip(xs, values.values()) if v[1] is not None and v[1] > 0]
        if bounded:
            ax.scatter(*zip(*bounded), marker="_", s=150, linewidths=2, color=dots.get_facecolor()[0], zorder=2)
    if series:
        ax.scatter([], [], marker="_", s=150, linewidths=2, color="grey", label="bound of the rule (dash)")
    ax.set_yscale("log")
    ax.set_xticks(range(len(models)), models, rotation=30, ha="right")
    ax.set_xlim(-0.7, len(models) - 0.3)
    ax.set_ylabel("largest distance judged, and its bound")
    ax.set_title("Semantic preservation: error and bound per model")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    if series:  # outside the axes: it never hides a point, whatever the number of series
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return fig


def html_page(records: list[dict], png: Path, superseded: Sequence[dict] = ()) -> str:
    models, rows = table1(records)
    head = "".join(f"<th>{html.escape(m)}</th>" for m in models)
    body = []
    for (gen, variant, target, opt, ref), cells in rows:
        tds = "".join(f"<td class='{_verdict_class(c)}'>{html.escape(c)}</td>" for c in cells)
        body.append(f"<tr><td>{html.escape(f'{gen} ({variant})')}</td><td>{target} {opt}</td>"
                    f"<td>{html.escape(ref)}</td>{tds}</tr>")
    image = base64.b64encode(png.read_bytes()).decode()
    notes = "".join(f"<li>{html.escape(line)}</li>" for line in _provenance_lines(records) + _errors(records)
                    + superseded_lines(superseded))
    verdicts = "".join("<tr>" + "".join(f"<td class='{_verdict_class(row[4]) if k == 4 else ''}'>{html.escape(cell)}"
                                        f"</td>" for k, cell in enumerate(row)) + "</tr>"
                       for row in verdict_rows(records))
    verdict_head = "".join(f"<th>{html.escape(name)}</th>" for name in VERDICT_COLUMNS)
    decided = decision_rows(records)
    decisions = "" if not decided else (
        "<h2>Decisions on the user's data</h2><p>On the user's test set (--inputs-from): top-1 agreement of C and "
        "reference, flips, accuracies with labels, and the decisions the derived bound guarantees (table1.md lists "
        "the inputs).</p><table><tr>" + "".join(f"<th>{html.escape(name)}</th>" for name in DECISION_COLUMNS)
        + "</tr>" + "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                            for row in decided) + "</table>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Assay semantic preservation</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;
padding:4px 8px;text-align:right}}td.fail,td.error{{background:#fdd}}td.review{{background:#ffd}}
td.pass{{background:#dfd}}</style></head><body>
<h1>Semantic preservation</h1><p>Verdict and maximum infinity-norm error (paper Definition 15), FP32.</p>
<table><tr><th>Generator (variant)</th><th>Target</th><th>Reference</th>{head}</tr>{''.join(body)}</table>
<h2>Verdicts</h2><p>The rule that judged each record, its largest bound, the largest distance it measured and the
margin: the smallest bound / distance over the outputs (at least 1 for a pass).</p>
<table><tr>{verdict_head}</tr>{verdicts}</table>{decisions}
<p><img alt="error and bound per model" src="data:image/png;base64,{image}"></p><ul>{notes}</ul></body></html>
"""


def _verdict_class(cell: str) -> str:
    """The CSS class of a cell that starts with a verdict word (``pass``, ``fail``, ``review``, ``error``)."""
    word = cell.split(" ")[0]
    return word if word in ("pass", "fail", "review", "error") else ""


def _bits_cell(bits: dict) -> str:
    if "error" in bits:
        return f"not compared: {bits['error']}"
    if bits["differing_values"] == 0:
        return "identical"
    nan = f", {bits['nan_mismatches']} NaN" if bits["nan_mismatches"] else ""
    return (f"{bits['differing_values']}/{bits['values']} values differ "
            f"({bits['differing_inputs']} inputs), max {bits['max_ulp']} ULP{nan}")


def bits_markdown(records: list[dict]) -> str:
    """Cross-target table: each target's outputs against the host's, bit for bit, per model."""
    compared = [r for r in records if r.get("bits_vs_host")]
    target_names = sorted({r["target"] for r in compared})
    rows: dict[tuple, dict[str, str]] = defaultdict(dict)
    for r in compared:
        rows[(r["model"], r["generator"], r["variant"], r["opt"])][r["target"]] = _bits_cell(r["bits_vs_host"])
    order = model_order(compared)
    out = ["# Cross-target bit comparison", "",
           "Outputs of the same generated code on each target compared with the host's, bit for bit, on the "
           "campaign inputs. ULP: distance between float32 values in units in the last place.", "",
           "| Model | Generator (variant) | Opt | " + " | ".join(target_names) + " |",
           "|---|---|---|" + "---|" * len(target_names)]
    for key in sorted(rows, key=lambda k: (order.index(k[0]), k[1:])):
        model, gen, variant, opt = key
        out.append(f"| {model} | {gen} ({variant}) | {opt} | "
                   + " | ".join(rows[key].get(t, "–") for t in target_names) + " |")
    out += ["", *(f"- {line}" for line in _provenance_lines(compared))]
    return "\n".join(out) + "\n"


def write_semantic_report(records: list[dict], out_dir: Path, superseded: Sequence[dict] = ()) -> list[Path]:
    """Write table1.md, error_per_model.png, index.html and, with ARM targets, bitcompare.md from ``records``
    (a campaign's own records, or a whole results.json for ``assay report``); the ``superseded`` entries (those
    the campaign made, or the file's) are listed, never judged."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table, png, page = out_dir / "table1.md", out_dir / "error_per_model.png", out_dir / "index.html"
    table.write_text(markdown(records, superseded))
    plot(records, png)
    page.write_text(html_page(records, png, superseded))
    written = [table, png, page]
    if any(r.get("bits_vs_host") for r in records):
        bits = out_dir / "bitcompare.md"
        bits.write_text(bits_markdown(records))
        written.append(bits)
    return written
