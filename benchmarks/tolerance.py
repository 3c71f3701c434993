"""Benchmark: the fixed tolerance against the derived one (issue 25), on clean assay-v2 code.

For each model, assay-v2's code (both variants) is generated and built once, run on each input seed's inputs,
and its outputs are judged twice (the semantic stage's own functions): by the fixed tolerance
(|C - reference| <= atol + rtol |reference|, Keras and ONNX Runtime) and by the derived bound (|C - float64| <= bound, ``harness.references.bounds``: the bound of the
order of accumulation the code's manifest declares; the references are held to the any-order one). The code is
correct, so every record that does not pass is a false alarm. It reports per model and rule the false
alarms over the seeds, and for the derived bound the tightness (bound / |C - float64|, min over outputs, per
seed) and how the bound compares with the fixed tolerance (median over outputs of bound / (atol + rtol |f64|)):
above 1, the derived rule lets larger defects pass than the fixed one. ``--nnet`` adds user .nnet files
(ACETONE's ``nn_acas_COC.nnet``: an ill-conditioned model on its raw input domain). Prints a table and writes
JSON to reports/benchmarks/tolerance.json. Not a test: it asserts nothing.

    python benchmarks/tolerance.py [--models a,b (default: the default tier)] [--seeds 10] [--inputs 50]
                                   [--nnet PATH ...] [--target host]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from harness.core.plan import load_model
from harness.models import zoo
from harness.core import oracle
from harness.references import bounds
from harness.stages.semantic import run as campaign


def judge(model_name: str, args, work: Path) -> list[dict]:
    """Per variant, the C generated and built once, run on each seed's inputs, its outputs judged by both rules
    (the semantic stage's own functions: ``oracle.compare`` and ``run.derived_verdict``)."""
    rows = []
    base = campaign.Settings(n_inputs=args.inputs, work_dir=work)
    model = load_model(model_name, base)
    for item in campaign.plan([model_name], ["assay-v2"], ["keras", "onnxruntime"], [args.target], base).items:
        code = campaign.generate_code(item, model, base, {}, {})
        for seed in range(args.seeds):
            settings = campaign.Settings(n_inputs=args.inputs, seed=seed, work_dir=work, tolerance="derived")
            outputs = campaign.build_and_run(item, item.target, code, model, settings, {}, {})
            exact = campaign.arbiter_outputs(model, settings, {})
            any_order = campaign.derived_bound(model, settings, {})  # the references' own bound
            start = time.perf_counter()
            bound = campaign.derived_bound(model, settings, {}, order=bounds.Order.from_manifest(code.manifest))
            bound_seconds = time.perf_counter() - start
            for reference in item.checks:
                expected = campaign.reference_outputs(reference, model, settings)
                fixed = oracle.compare(outputs, expected, *settings.tolerances(model))
                derived = campaign.derived_verdict(reference, outputs, expected, exact, bound,
                                                   reference_bound=any_order)
                rows.append({"model": model_name, "seed": seed, "variant": item.variant, "reference": reference,
                             "fixed": fixed.verdict, "fixed_cause": fixed.cause, "derived": derived,
                             "bound_seconds": bound_seconds,
                             "bound_over_fixed": bound_over_fixed(model, settings, exact, bound)})
    return rows


def bound_over_fixed(model, settings, exact, bound) -> float | None:
    """Median over outputs and inputs of bound / (atol + rtol |f64|): above 1, the derived rule is looser."""
    if isinstance(bound, str) or not isinstance(exact, np.ndarray):
        return None
    atol, rtol = settings.tolerances(model)
    return float(np.median(bound / (atol + rtol * np.abs(exact))))


def summary(rows: list[dict]) -> list[dict]:
    table = []
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        judged = [r["derived"] for r in mine if "fallback" not in r["derived"]]
        derived_verdict = [r["derived"].get("verdict", r["fixed"]) for r in mine]
        entry = {"model": model, "seeds": len({r["seed"] for r in mine}), "records": len(mine),
                 "fixed_false_alarms": sum(r["fixed"] != "pass" for r in mine),
                 "fixed_seeds_with_false_alarm": len({r["seed"] for r in mine if r["fixed"] != "pass"}),
                 "derived_false_alarms": sum(v != "pass" for v in derived_verdict),
                 "derived_seeds_with_false_alarm": len({r["seed"] for r, v in zip(mine, derived_verdict)
                                                        if v != "pass"}),
                 "fallback": sorted({r["derived"]["fallback"] for r in mine if "fallback" in r["derived"]}),
                 "bound_seconds_per_input": statistics.median(  # the first variant computes it, the other reuses it
                     max(r["bound_seconds"] for r in mine if r["seed"] == seed) for seed in {r["seed"] for r in mine})
                 / mine[0]["inputs"]}
        if judged:
            tight = [d["tightness"] for d in judged if np.isfinite(d["tightness"])]
            entry.update(tightness_min=min(tight, default=None),
                         tightness_median=statistics.median(tight) if tight else None,
                         largest_bound=max(d["bound"] for d in judged),
                         c_distance_max=max(d["c_distance"] for d in judged),
                         reference_defects=sum(d["reference_defect"] is not None for d in judged),
                         bound_over_fixed_median=statistics.median(r["bound_over_fixed"] for r in mine
                                                                   if r["bound_over_fixed"] is not None))
        table.append(entry)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(zoo.names("default")))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--inputs", type=int, default=50)
    parser.add_argument("--nnet", nargs="*", default=[], help=".nnet files to add (e.g. nn_acas_COC.nnet)")
    parser.add_argument("--target", default="host")
    parser.add_argument("--json", type=Path, default=Path("reports/benchmarks/tolerance.json"))
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m] + [str(Path(p).resolve()) for p in args.nnet]
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            rows += [{**row, "inputs": args.inputs} for row in judge(model, args, Path(tmp) / "work")]
    table = summary(rows)
    result = {"date": date.today().isoformat(), "machine": f"{platform.machine()}, {platform.processor() or '?'}",
              "command": "python benchmarks/tolerance.py " + " ".join(
                  [f"--models {args.models}", f"--seeds {args.seeds}", f"--inputs {args.inputs}", f"--target "
                   f"{args.target}"] + [f"--nnet {Path(p).name}" for p in args.nnet]),
              "wall_seconds": time.perf_counter() - start, "summary": table, "records": rows}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1, default=str))
    print("| model | seeds x records | false alarms, fixed | false alarms, derived | tightness min / median | "
          "bound / fixed tolerance (median) | bound s/input | fallback |")
    print("|---|---:|---:|---:|---|---:|---:|---|")
    for e in table:
        tight = (f"{e['tightness_min']:.3g} / {e['tightness_median']:.3g}" if e.get("tightness_min") is not None
                 else "")
        ratio = f"{e['bound_over_fixed_median']:.3g}" if e.get("bound_over_fixed_median") is not None else ""
        print(f"| {Path(e['model']).name} | {e['seeds']} x {e['records'] // e['seeds']} | "
              f"{e['fixed_false_alarms']} ({e['fixed_seeds_with_false_alarm']} seeds) | "
              f"{e['derived_false_alarms']} ({e['derived_seeds_with_false_alarm']} seeds) | {tight} | {ratio} | "
              f"{e['bound_seconds_per_input']:.3g} | {'; '.join(e['fallback'])} |")
    print(f"wall time {result['wall_seconds']:.0f} s; JSON: {args.json}")


if __name__ == "__main__":
    main()
