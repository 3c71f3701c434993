"""Benchmark: building an evidence package (issue 9 figures), from a cold work directory and again warm.

For each model: the wall time of ``assay evidence --models M --targets host,cortex-m4f --inputs N`` with its
defaults (mutation analysis and the run of Assay's own tests on) in a fresh work directory shared by the
models (every stage computed; the run of Assay's own tests, content-keyed on Assay's sources, is computed for
the first model and reused by the next, as a user's second package would), then the same command again
(content-keyed records reused, the package rebuilt), the package's size, and the machine's load average
before and after each build (the machine may be shared). Prints a table and writes
reports/benchmarks/evidence.json. Not a test: it asserts nothing.

    python benchmarks/evidence.py [--models acas-reg50,lenet5] [--targets host,cortex-m4f] [--inputs 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from harness.core.provenance import tool_versions


def build(model: str, targets: str, inputs: int, work: Path, out: Path) -> tuple[float, int, list[float]]:
    """(wall seconds, exit status, 1-minute load average before and after)."""
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "evidence", "--models", model, "--targets", targets,
                           "--inputs", str(inputs), "--out", str(out), "--work", str(work)],
                          capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)
    return seconds, done.returncode, [*load, os.getloadavg()[0]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="acas-reg50,lenet5")
    parser.add_argument("--targets", default="host,cortex-m4f")
    parser.add_argument("--inputs", type=int, default=1000)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        for model in args.models.split(","):
            out = Path(tmp) / f"pkg-{model}"
            cold, status, cold_load = build(model, args.targets, args.inputs, work, out)
            warm, _, warm_load = build(model, args.targets, args.inputs, work, out)
            size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            zipped = out.with_name(out.name + ".zip").stat().st_size
            verdict = json.loads((out / "evidence.json").read_text())
            rows.append({"model": model, "cold_s": round(cold, 1), "warm_s": round(warm, 1), "exit": status,
                         "verdicts": verdict.get("verdicts"), "load_cold": cold_load, "load_warm": warm_load,
                         "package_bytes": size, "zip_bytes": zipped})
            print(f"{model:<12} cold {cold:7.1f} s (load {cold_load[0]:.1f}-{cold_load[1]:.1f})  warm {warm:6.1f} s "
                  f"(load {warm_load[0]:.1f}-{warm_load[1]:.1f})  exit {status}  package {size:,} bytes "
                  f"(zip {zipped:,})  {verdict.get('verdicts')}", flush=True)
    path = Path("reports/benchmarks/evidence.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": "assay-benchmark-evidence/1", "date": date.today().isoformat(),
                                "machine": platform.platform(), "cpus": os.cpu_count(), "targets": args.targets,
                                "inputs": args.inputs, "rows": rows, "tools": tool_versions()}, indent=1))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
