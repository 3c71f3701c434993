"""Benchmark: Assay's one-BLAS-thread policy (``harness.single_threaded``) against the libraries' default threads,
with several Assay processes at once, as ``--jobs``, xdist workers and stage subprocesses run them.

Each of ``--processes`` processes derives the declared-order bound of each model (``bounds.derive``, the semantic
and mutation stages' derived tolerance) on the same ``--inputs`` inputs, all started together; the script prints
each model's milliseconds per input, the median over the processes, for two settings:

- ``policy``: no thread variable set, so Assay sets one thread;
- ``library default``: ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS`` and ``MKL_NUM_THREADS`` set to the core count,
  what the libraries would use if Assay did not set them (a set variable wins over the policy).

Then the same with one process alone. Not a test: it asserts nothing.

    python benchmarks/blas_threads.py [--models acas-reg200,lenet5] [--inputs 128] [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import harness

WORKER = """
import json, sys, time
from harness.core.inputs import make_inputs
from harness.core.plan import load_model
from harness.references import bounds
from harness.stages.semantic import run as campaign

figures = {}
for name in sys.argv[1].split(","):
    model = load_model(name, campaign.Settings(n_inputs=10))
    inputs = make_inputs(model, int(sys.argv[2]), 0)
    bounds.derive(model, inputs[:2], (), bounds.Order())  # graph loaded and cached before timing
    start = time.perf_counter()
    bounds.derive(model, inputs, (), bounds.Order())
    figures[name] = (time.perf_counter() - start) / len(inputs) * 1000
print(json.dumps(figures))
"""


def run(models: str, inputs: int, processes: int, threads: str | None) -> dict[str, float]:
    """Median ms per input of each model over ``processes`` processes started at once, with ``threads`` in every
    thread variable (None: none set, the policy decides)."""
    env = {k: v for k, v in os.environ.items() if k not in harness.THREAD_VARIABLES}
    if threads is not None:
        env |= {name: threads for name in harness.THREAD_VARIABLES}
    children = [subprocess.Popen([sys.executable, "-c", WORKER, models, str(inputs)], env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) for _ in range(processes)]
    results = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"a worker failed (exit {child.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return {name: statistics.median(r[name] for r in results) for name in results[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="acas-reg200,lenet5")
    parser.add_argument("--inputs", type=int, default=128)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    cores = str(os.cpu_count() or 1)
    print(f"{cores} cores; ms per input of the derived bound (median over the processes)")
    print("| processes | threads | " + " | ".join(args.models.split(",")) + " |")
    print("|---:|---|" + "---:|" * len(args.models.split(",")))
    for processes in (args.processes, 1):
        for label, threads in (("policy (1)", None), (f"library default ({cores})", cores)):
            figures = run(args.models, args.inputs, processes, threads)
            print(f"| {processes} | {label} | " + " | ".join(f"{v:.1f}" for v in figures.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
