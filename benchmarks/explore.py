"""Benchmark: a whole design-space exploration (issue 14 figures; OpTC reports about 40 s per configuration).

Runs ``assay explore`` as a user would (a subprocess of the CLI) on a fresh work and output directory
(cold: the trained model, every configuration's C, builds and measurements are computed), then once more
on the same directories (warm: every stage reuses its content-keyed results). Prints the whole time, the
time per configuration and the split between sensitivity analysis, pruning and stages, and writes
``reports/benchmarks/explore-<model>-<target>.json`` (schema ``assay-benchmark-explore/1``: ``date``,
``machine``, ``cpus``, ``command``, ``cold`` and ``warm`` with ``wall_s`` and the exploration's own
``seconds``, and ``configurations`` as in ``explore.json``). Not a test: it asserts nothing.

    python benchmarks/explore.py [--model digits-cnn] [--steps 10] [--target cortex-m4f] [--timing cortex-m4]
                                 [--retrain-epochs 0] [--keep DIR]
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

FIELDS = ("j", "quality", "rom", "ram", "max_measured_cycles", "wcet_cycles", "verdict", "pareto")


def run(command: list[str]) -> float:
    """Wall seconds of ``command``; a failed exploration stops the benchmark with its output."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="digits-cnn")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--target", default="cortex-m4f")
    parser.add_argument("--timing", default="cortex-m4")
    parser.add_argument("--retrain-epochs", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="explore into this directory (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        options = ["--model", args.model, "--steps", str(args.steps), "--target", args.target, "--timing",
                   args.timing, "--retrain-epochs", str(args.retrain_epochs), "--ram-limit", "96k"]
        command = [sys.executable, "-m", "harness.cli", "explore", *options,
                   "--work", str(base / "work"), "--out", str(base / "out")]
        figures = {}
        for phase in ("cold", "warm"):
            wall = run(command)
            document = json.loads((base / "out" / "explore.json").read_text())
            figures[phase] = {"wall_s": wall, "seconds": document["seconds"]}
            seconds = document["seconds"]
            count = len(document["configurations"])
            print(f"{phase}: {wall:6.1f} s wall for {count} configurations, "
                  f"{wall / count:5.1f} s each (sensitivity {seconds['sensitivity_s']:.1f} s, "
                  f"pruning {seconds['pruning_s']:.1f} s, stages {seconds['stages_s']:.1f} s)", flush=True)
        for c in document["configurations"]:
            print("  " + "  ".join(f"{field} {c[field]}" for field in FIELDS))
    path = Path(f"reports/benchmarks/explore-{args.model}-{args.target}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "schema": "assay-benchmark-explore/1", "date": date.today().isoformat(), "machine": platform.platform(),
        "cpus": os.cpu_count(), "command": ["assay", "explore", *options, "--work", "W", "--out", "O"],
        **figures, "configurations": [{field: c[field] for field in FIELDS} for c in document["configurations"]],
    }, indent=1) + "\n")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
