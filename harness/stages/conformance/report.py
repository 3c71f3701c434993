"""``conformance.md`` from ``conformance.json``: a matrix case x generator (variant), like the ONNX backend
test coverage report, then the counts per generator, the causes (numbered, each once) and the reproducers.

A cell is ``pass`` with the largest error, ``FAIL`` with the largest error, ``ERROR [n]`` or ``N/S [n]``
(not supported) pointing at cause ``n``, or ``·`` where the generator has no such variant for that case
(ACETONE's convolution implementations exist only for models with a convolution). The onnx-node suite adds
the ops' view and the float64 arbiter's figure of every result whose C ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.stages.conformance.run import ERROR, FAIL, NOT_SUPPORTED, PASS, SCHEMA, UNLOADED, VERDICTS

REPORT = "conformance.md"
NO_VARIANT = "·"


def column(result: dict) -> str:
    return f"{result['generator']} ({result['variant']})"


def cells(results: list[dict]) -> dict[tuple[str, str], dict]:
    """(case, column) -> result. A case the semantic stage could not load (variant ``-``) fills every
    column of its generator: the error is the case's, whichever variant would have run."""
    columns = list(dict.fromkeys(column(r) for r in results if r["variant"] != UNLOADED))
    table = {(r["case"], column(r)): r for r in results if r["variant"] != UNLOADED}
    for result in results:
        if result["variant"] == UNLOADED:
            mine = [c for c in columns if c.startswith(f"{result['generator']} (")] or [column(result)]
            table.update({(result["case"], c): result for c in mine})
    return table


def counts(results: list[dict]) -> dict[str, dict[str, int]]:
    """Per column (generator and variant), how many cases got each verdict."""
    table: dict[str, dict[str, int]] = {}
    for (_, name), result in cells(results).items():
        table.setdefault(name, dict.fromkeys(VERDICTS, 0))[result["verdict"]] += 1
    return table


def _error(value: float | None) -> str:
    return "" if value is None else f" {value:.1e}"


def matrix_lines(document: dict) -> list[str]:
    """The matrix, the counts and the numbered causes, as Markdown lines."""
    results = document["results"]
    by_cell = cells(results)
    columns = list(dict.fromkeys(name for _, name in by_cell))
    causes: dict[str, int] = {}
    lines = ["| case | checks | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    for case in document["cases"]:
        row = []
        for name in columns:
            result = by_cell.get((case["name"], name))
            if result is None:
                row.append(NO_VARIANT)
            elif result["verdict"] == PASS:
                row.append(f"pass{_error(result['max_abs_error'])}")
            elif result["verdict"] == FAIL:
                row.append(f"**FAIL**{_error(result['max_abs_error'])}")
            else:
                number = causes.setdefault(result["cause"] or "no cause recorded", len(causes) + 1)
                row.append(f"{'**ERROR**' if result['verdict'] == ERROR else 'N/S'} [{number}]")
        lines.append(f"| `{case['name']}` | {case['checks']} | " + " | ".join(row) + " |")
    lines += ["", "## Counts", "", "| generator (variant) | cases | pass | fail | error | not supported |",
              "|---|---:|---:|---:|---:|---:|"]
    for name, row in counts(results).items():
        lines.append(f"| {name} | {sum(row.values())} | {row[PASS]} | {row[FAIL]} | {row[ERROR]} | "
                     f"{row[NOT_SUPPORTED]} |")
    if causes:
        lines += ["", "## Causes", ""] + [f"{n}. {_escape(text)}" for text, n in causes.items()]
    return lines


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reproducer_lines(document: dict) -> list[str]:
    """One line per failing or erring result: the model copy and the command that shows it again."""
    rows = [r for r in document["results"] if r.get("reproducer")]
    if not rows:
        return []
    lines = ["", "## Reproducers", "", "Each runs the case's model (copied beside this report) through the "
             "generator alone:", ""]
    for result in rows:
        lines.append(f"- `{result['case']}` on {column(result)}: {result['verdict']}: "
                     f"`{result['reproducer']['command']}`")
    return lines


def op_lines(document: dict) -> list[str]:
    """Per op (the ONNX Backend Scoreboard's view): for each column, passed / cases and what did not pass."""
    op_of = {case["name"]: case["op"] for case in document["cases"]}
    by_cell = cells(document["results"])
    table: dict[str, dict[str, dict[str, int]]] = {}
    for (case, name), result in by_cell.items():
        table.setdefault(op_of[case], {}).setdefault(name, dict.fromkeys(VERDICTS, 0))[result["verdict"]] += 1
    columns = list(dict.fromkeys(name for _, name in by_cell))
    lines = ["", "## Per op", "", "Cells: passed / cases (then failed, errors, not supported when any).", "",
             "| op | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for op in sorted(table):
        row = []
        for name in columns:
            got = table[op].get(name)
            if got is None:
                row.append(NO_VARIANT)
                continue
            rest = ", ".join(f"{got[v]} {v}" for v in (FAIL, ERROR, NOT_SUPPORTED) if got[v])
            row.append(f"{got[PASS]}/{sum(got.values())}" + (f" ({rest})" if rest else ""))
        lines.append(f"| {op} | " + " | ".join(row) + " |")
    return lines


def arbiter_lines(document: dict) -> list[str]:
    """Per result whose C ran (onnx-node): the C's, ONNX Runtime's and the expected outputs' distance to the
    float64 evaluation of the case's graph and which is closest; or why the arbiter has no figure."""
    judged = [r for r in document["results"] if r.get("arbiter") and "yardstick" not in r["arbiter"]]
    lines = integer_lines(document)
    if not judged:
        return lines
    figures = [r for r in judged if "errors" in r["arbiter"]]
    missing = [r for r in judged if "error" in r["arbiter"]]
    lines = [*lines, "", "## Float64 arbiter", "",
             f"Each case's graph evaluated in float64 (`harness/references/float64.py`) on the case's inputs: the "
             f"maximum absolute distance of the C, of ONNX Runtime and of the case's expected outputs to it, and "
             f"which is closest. It changes a verdict only where ONNX Runtime alone departs from the expected "
             f"outputs and float64 (listed below as reference defects). {len(figures)} of {len(judged)} results "
             f"whose C ran have a figure" + (f", {len(missing)} none (listed below)." if missing else "."), ""]
    if figures:
        lines += ["| case | generator (variant) | C vs float64 | onnxruntime vs float64 | expected vs float64 "
                  "| closest |", "|---|---|---:|---:|---:|---|"]
        for r in figures:
            errors = r["arbiter"]["errors"]
            nearest = ", ".join(name for name, value in errors.items() if value == min(errors.values()))  # ties: all
            lines.append(f"| `{r['case']}` | {column(r)} | {errors['C']:.4e} | {errors['onnxruntime']:.4e} | "
                         f"{errors['expected']:.4e} | {nearest} |")
    if missing:
        lines += [""] + [f"- `{r['case']}` on {column(r)}: {_escape(r['arbiter']['error'])}" for r in missing]
    defects = [r for r in document["results"] if r.get("reference_defects")]
    if defects:
        lines += ["", "### Reference defects", "",
                  "The C agrees with the case's expected outputs and with float64; the reference named does not "
                  "(`onnx_node.py`): the result passes.", ""]
        lines += [f"- `{r['case']}` on {column(r)}: {_escape('; '.join(r['reference_defects']))}" for r in defects]
    return lines


def integer_lines(document: dict) -> list[str]:
    """Per quantized case whose C ran (onnx-node): the distance of the C and the expected outputs to the integer
    arbiter under the C's declared rule, and of ONNX Runtime to it under its own rule; and the 1-LSB rule
    differences that passed (``onnx_node._judge_integer``)."""
    figures = [r for r in document["results"] if "yardstick" in r.get("arbiter", {})]
    if not figures:
        return []
    lines = ["", "## Integer arbiter", "",
             "Quantized cases: compared bit for bit; the integer arbiter (`harness/references/integer.py`) decides "
             "where a reference differs from the C by 1 LSB at a requantization (docs/conformance.md).", "",
             "| case | generator (variant) | C | onnxruntime | expected | yardstick |", "|---|---|---:|---:|---:|---|"]
    for r in figures:
        errors = r["arbiter"]["errors"]
        figures = {name: "n/a" if value is None else f"{value:g}" for name, value in errors.items()}  # did not run
        lines.append(f"| `{r['case']}` | {column(r)} | {figures['C']} | {figures['onnxruntime']} | "
                     f"{figures['expected']} | {r['arbiter']['yardstick']} |")
    for key, title in (("rule_differences", "Rule differences"), ("reference_unavailables", "Reference unavailable")):
        noted = [r for r in document["results"] if r.get(key)]
        if noted:
            lines += ["", f"### {title}", ""]
            lines += [f"- `{r['case']}` on {column(r)}: {_escape('; '.join(r[key]))}" for r in noted]
    unavailable = [r for r in document["results"] if r.get("unavailable_references")]
    if unavailable:
        lines += ["", "### References that cannot run a case", "",
                  "Compared with the case's expected outputs alone (`onnx_node._no_kernel`):", ""]
        lines += [f"- `{r['case']}` on {column(r)}: {_escape('; '.join(r['unavailable_references']))}"
                  for r in unavailable]
    return lines


def _header(document: dict) -> list[str]:
    if document.get("suite") == "onnx-node":
        return [
            "# ONNX backend node tests", "",
            f"The float32 node cases of the CNN and MLP ops from onnx {document['onnx_version']}'s own case "
            f"generators (`harness/stages/conformance/onnx_node.py`), each run on its own inputs on the "
            f"{document['target']} against {' and '.join(document['references'])} with the case's tolerance "
            f"(rtol 1e-3, atol 1e-7); a verdict covers both and the error is the larger. Cells: pass / **FAIL** "
            f"with the max absolute error, **ERROR** or N/S (not supported) with the cause number.", ""]
    return [
        "# Generator conformance", "",
        f"Each case is one small Keras 3 model with seeded weights (`harness/stages/conformance/cases.py`), run "
        f"through `assay semantic` on the host against {' and '.join(document['references'])} with "
        f"{document['n_inputs']} inputs (seed {document['seed']}); a verdict covers both references and the "
        f"error is the largest of the two. Cells: pass / **FAIL** with the max absolute error, **ERROR** or "
        f"N/S (not supported) with the cause number, {NO_VARIANT} where the generator has no such variant "
        f"for the case.", ""]


def write_conformance_report(path: Path, out: Path) -> list[Path]:
    """Write ``out/conformance.md`` from the conformance document at ``path``; return the files written."""
    document = json.loads(Path(path).read_text())
    if document.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {document.get('schema')!r}, expected {SCHEMA}")
    per_op = [*op_lines(document), *arbiter_lines(document)] if document.get("suite") == "onnx-node" else []
    report = Path(out) / REPORT
    report.write_text("\n".join([*_header(document), *matrix_lines(document), *per_op,
                                 *reproducer_lines(document)]) + "\n")
    return [report]
