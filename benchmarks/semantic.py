"""Benchmark: the default-tier semantic campaign on one target (issues 2 and 3 figures).

Measures, from a cold work directory, per model: zoo build, generation, compile,
run (wall, and inside C or the emulator) and reference times, the time per
inference, and the whole campaign's wall time. On the host it also measures the
harness overhead for lenet5: (run wall time - C time) / C time, the median over
repeated runs. Prints a table and writes JSON to
reports/benchmarks/semantic-<target>.json. Not a test: it asserts nothing.

    python benchmarks/semantic.py [--target host|arm7tdmi|cortex-m4f|cortex-a15] [--inputs 1000] [--repeats 5]
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

from harness.models import zoo
from harness.core.pipeline import to_code_layout
from harness.core.plan import load_model
from harness.stages.semantic.run import Settings, plan, run_item
from harness.generators.generated import GeneratedCode
from harness.core.inputs import make_inputs
from harness.core.provenance import tool_versions
from harness.core.results import ResultStore
from harness.runners import host


def lenet_overhead(work: Path, n_inputs: int, repeats: int) -> dict:
    """Median harness overhead of the run stage for lenet5 (keras variant)."""
    settings = Settings(n_inputs=n_inputs, work_dir=work)
    model = load_model("lenet5", settings)
    code = GeneratedCode.from_directory(work / "lenet5" / "assay-v2" / "keras" / "src")
    built = host.build(code, work / "lenet5" / "assay-v2" / "keras" / "build-host-O0")
    batch = to_code_layout(make_inputs(model, n_inputs, 0), model, code)
    runs = [host.run(built, batch) for _ in range(repeats)]
    ratios = [(r.wall_seconds - r.c_seconds) / r.c_seconds for r in runs]
    return {"c_seconds_median": statistics.median(r.c_seconds for r in runs),
            "wall_seconds_median": statistics.median(r.wall_seconds for r in runs),
            "overhead_ratio_median": statistics.median(ratios), "repeats": repeats}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--target", default="host")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        settings = Settings(n_inputs=args.inputs, work_dir=work)
        store = ResultStore(Path(tmp) / "results.json")
        start = time.perf_counter()
        zoo_times = {}
        for name in zoo.names("default"):
            t0 = time.perf_counter()
            load_model(name, settings)
            zoo_times[name] = time.perf_counter() - t0
        campaign = plan(zoo.names("default"), ["assay-v2"], ["keras", "onnxruntime"], [args.target], settings)
        for item in campaign.items:
            run_item(item, settings, store)
        total = time.perf_counter() - start
        records = store.records()
        overhead = lenet_overhead(work, args.inputs, args.repeats) if args.target == "host" else None
    rows = []
    print(f"{'model':<14} {'variant':<7} {'zoo s':>7} {'gen s':>7} {'cc s':>7} {'run s':>7} {'C s':>7} "
          f"{'ms/inf':>7} {'keras s':>8} {'ort s':>7} {'max err':>11}")
    for item in campaign.items:
        mine = {r["reference"]: r for r in records if (r["model"], r["variant"]) == (item.model, item.variant)}
        if mine["keras"]["verdict"] == "error":
            print(f"{item.model:<14} {item.variant:<7} error: {mine['keras']['cause']}")
            rows.append({"model": item.model, "variant": item.variant, "error": mine["keras"]["cause"]})
            continue
        t = mine["keras"]["timings"]
        row = {"model": item.model, "variant": item.variant, "zoo_s": zoo_times[item.model],
               "generate_s": t["generate_s"], "compile_s": t["compile_s"], "run_s": t["run_s"],
               "c_run_s": t["c_run_s"], "ms_per_inference": 1000 * t["c_run_s"] / args.inputs,
               "keras_s": t.get("reference_s"),
               "onnxruntime_s": mine["onnxruntime"]["timings"].get("reference_s"),
               "max_abs_error": max(r["max_abs_error"] or 0 for r in mine.values()),
               "verdicts": sorted({r["verdict"] for r in mine.values()})}
        rows.append(row)
        print(f"{row['model']:<14} {row['variant']:<7} {row['zoo_s']:7.2f} {row['generate_s']:7.2f} "
              f"{row['compile_s']:7.2f} {row['run_s']:7.2f} {row['c_run_s']:7.2f} {row['ms_per_inference']:7.2f} "
              f"{row['keras_s']:8.2f} "
              f"{row['onnxruntime_s']:7.2f} {row['max_abs_error']:11.4e}")
    print(f"\ndefault tier on {args.target}, {args.inputs} inputs, {len(campaign.items)} items, 2 references: "
          f"{total:.1f} s wall (cold cache, sequential)")
    if overhead:
        print(f"lenet5 harness overhead: {100 * overhead['overhead_ratio_median']:.1f}% of C time "
              f"(C {overhead['c_seconds_median']:.3f} s, wall {overhead['wall_seconds_median']:.3f} s, "
              f"median of {args.repeats})")
    out = Path(f"reports/benchmarks/semantic-{args.target}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"schema": "assay-benchmark-semantic/1", "date": date.today().isoformat(),
                               "target": args.target, "machine": platform.platform(),
                               "cpus": __import__("os").cpu_count(), "inputs": args.inputs,
                               "total_wall_s": total, "rows": rows, "lenet5_overhead": overhead,
                               "tools": tool_versions()}, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
