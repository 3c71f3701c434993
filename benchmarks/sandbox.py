"""Benchmark: what the sandbox (harness/sandbox.py, docs/sandbox.md) costs the default tier's semantic run.

The sandbox changes two steps of an item, its build and its batch run; generation, the references and the
oracle do not change. For each item of the default tier (assay-v2, both variants, on the host), this builds
(the compile cache forgotten) and runs the item's 1000 inputs with the sandbox and without
(``ASSAY_SANDBOX=off``), alternately, ``--repeats`` times, and prints the medians per item and their sums,
and the start-up cost of a confined ``true`` against an unconfined one. Writes
reports/benchmarks/sandbox.json. Not a test: it asserts nothing.

    python benchmarks/sandbox.py [--inputs 1000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from datetime import date
from pathlib import Path

from harness import generators, sandbox
from harness.core.inputs import make_inputs
from harness.core.pipeline import to_code_layout
from harness.core.plan import load_model
from harness.models import zoo
from harness.runners import host
from harness.runners.compiling import forget_builds
from harness.stages.semantic.run import Settings


def confined(on: bool) -> None:
    """Switch the sandbox on or off for what follows in this process."""
    if on:
        os.environ.pop(sandbox.SWITCH, None)
    else:
        os.environ[sandbox.SWITCH] = "off"
    sandbox.isolation.cache_clear()


def build_and_run(code, build_dir: Path, batch) -> tuple[float, float]:
    forget_builds(build_dir)
    start = time.perf_counter()
    built = host.build(code, build_dir)
    middle = time.perf_counter()
    host.run(built, batch)
    return middle - start, time.perf_counter() - middle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows, totals = [], {True: [0.0, 0.0], False: [0.0, 0.0]}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        settings = Settings(n_inputs=args.inputs, work_dir=work)
        generator = generators.get("assay-v2")
        for name in zoo.names("default"):
            model = load_model(name, settings)
            for variant in generator.variants(model):
                code = generator.generate(model, variant, work / name / variant / "src")
                batch = to_code_layout(make_inputs(model, args.inputs, 0), model, code)
                times = {True: [], False: []}
                for _ in range(args.repeats):
                    for on in (True, False):
                        confined(on)
                        times[on].append(build_and_run(code, work / name / variant / "build", batch))
                row = {"item": f"{name}/{variant}"}
                for on, label in ((True, "sandboxed"), (False, "unconfined")):
                    compile_s = statistics.median(t[0] for t in times[on])
                    run_s = statistics.median(t[1] for t in times[on])
                    row[label] = {"compile_s": compile_s, "run_s": run_s}
                    totals[on][0] += compile_s
                    totals[on][1] += run_s
                rows.append(row)
                print(f"{row['item']:28s} compile {row['sandboxed']['compile_s']:.3f} / "
                      f"{row['unconfined']['compile_s']:.3f} s, run {row['sandboxed']['run_s']:.3f} / "
                      f"{row['unconfined']['run_s']:.3f} s (sandboxed / unconfined)", flush=True)
        starts = {}
        for on in (True, False):
            confined(on)
            samples = []
            for _ in range(20):
                start = time.perf_counter()
                if on:
                    sandbox.run(["true"], work, 30)
                else:
                    subprocess.run(["true"], cwd=work, check=True)
                samples.append(time.perf_counter() - start)
            starts["sandboxed" if on else "unconfined"] = statistics.median(samples)
    confined(True)
    summary = {"date": date.today().isoformat(), "inputs": args.inputs, "repeats": args.repeats, "items": rows,
               "sandboxed_s": sum(totals[True]), "unconfined_s": sum(totals[False]), "start_true_s": starts,
               "machine": f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end"}
    print(f"build + run, {len(rows)} items: sandboxed {summary['sandboxed_s']:.2f} s, unconfined "
          f"{summary['unconfined_s']:.2f} s (+{summary['sandboxed_s'] - summary['unconfined_s']:.2f} s); "
          f"start of 'true': {starts['sandboxed'] * 1e3:.1f} ms sandboxed, {starts['unconfined'] * 1e3:.1f} ms not")
    out = Path("reports/benchmarks/sandbox.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
