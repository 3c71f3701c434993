"""Benchmark: the schedulers on random DAGs, as the multi-core paper's §4 (issue 12 figures).

Random DAGs (``harness.scheduling.dag.random_dag``: density 10 %, node WCETs
and edge costs uniform integers in [1, 10], one sink) of each size, scheduled
by ISH, DSH and CP-SAT (warm-started with the better heuristic, a time limit
per size) on each number of cores. Every schedule goes through the §2.3
validity check. Prints and writes, per (size, cores, algorithm): mean speedup
(eq. 15), mean and max solve time, and for CP-SAT how many runs were proved
optimal and how many beat DSH; writes reports/benchmarks/scheduling.json
(schema ``assay-benchmark-scheduling/1``: ``command``, ``machine``, ``date``,
``settings``, ``runs`` (one object per graph, cores and algorithm: ``nodes``,
``seed``, ``cores``, ``algorithm``, ``makespan``, ``sequential``, ``speedup``,
``seconds``, ``optimal``, ``gap``, ``valid``), ``summary`` (the table's rows))
and scheduling.png. Not a test: it asserts nothing (the tests check the
algorithms); an invalid schedule is counted and reported.

    python benchmarks/scheduling.py [--sizes 20,50,100] [--cores 2-8] [--graphs 5]
                                    [--limits 20:10,50:60,100:60] [--workers 1] [--jobs 1]
                                    [--out reports/benchmarks]

``--jobs N`` runs N (graph, cores) cases at a time, each in its own solver
process (CP-SAT already runs in a child process): on an idle machine with N
cores and ``--workers 1`` every solve still has a core to itself, and the
protocol takes 1/N of the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path
from statistics import mean

from harness import scheduling
from harness.scheduling.dag import random_dag
from harness.scheduling.schedule import speedup

ALGORITHMS = ("ish", "dsh", "cpsat")
DENSITY = 0.10


def int_list(text: str) -> list[int]:
    """'2-8' or '2,4,8'."""
    if "-" in text:
        low, high = text.split("-")
        return list(range(int(low), int(high) + 1))
    return [int(part) for part in text.split(",")]


def summarise(runs: list[dict]) -> list[dict]:
    rows = []
    keys = sorted({(r["nodes"], r["cores"], r["algorithm"]) for r in runs},
                  key=lambda k: (k[0], k[1], ALGORITHMS.index(k[2])))
    for nodes, cores, algorithm in keys:
        group = [r for r in runs if (r["nodes"], r["cores"], r["algorithm"]) == (nodes, cores, algorithm)]
        row = {"nodes": nodes, "cores": cores, "algorithm": algorithm, "graphs": len(group),
               "mean_speedup": mean(r["speedup"] for r in group), "mean_seconds": mean(r["seconds"] for r in group),
               "max_seconds": max(r["seconds"] for r in group), "invalid": sum(not r["valid"] for r in group)}
        if algorithm == "cpsat":
            dsh = {r["seed"]: r["makespan"] for r in runs
                   if (r["nodes"], r["cores"], r["algorithm"]) == (nodes, cores, "dsh")}
            row.update(proved_optimal=sum(bool(r["optimal"]) for r in group),
                       better_than_dsh=sum(r["makespan"] < dsh[r["seed"]] for r in group),
                       worse_than_dsh=sum(r["makespan"] > dsh[r["seed"]] for r in group),
                       mean_gap=mean(r["gap"] for r in group))
        rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    out = ["| nodes | cores | algorithm | mean speedup | mean time [s] | max time [s] | CP-SAT proved optimal "
           "| CP-SAT < DSH | mean gap |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        extra = (f"{r['proved_optimal']}/{r['graphs']} | {r['better_than_dsh']}/{r['graphs']} | {r['mean_gap']:.3f}"
                 if r["algorithm"] == "cpsat" else " | | ")
        out.append(f"| {r['nodes']} | {r['cores']} | {r['algorithm']} | {r['mean_speedup']:.3f} | "
                   f"{r['mean_seconds']:.3f} | {r['max_seconds']:.3f} | {extra} |")
    return "\n".join(out)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["nodes"] for r in rows})
    fig, axes = plt.subplots(2, len(sizes), figsize=(4.2 * len(sizes), 7), squeeze=False)
    styles = {"ish": ("o", "-"), "dsh": ("s", "--"), "cpsat": ("D", "-.")}
    for col, size in enumerate(sizes):
        for algorithm in ALGORITHMS:
            group = sorted((r for r in rows if r["nodes"] == size and r["algorithm"] == algorithm),
                           key=lambda r: r["cores"])
            if not group:
                continue
            marker, line = styles[algorithm]
            cores = [r["cores"] for r in group]
            axes[0][col].plot(cores, [r["mean_speedup"] for r in group], marker=marker, linestyle=line,
                              label=algorithm)
            axes[1][col].plot(cores, [max(r["mean_seconds"], 1e-4) for r in group], marker=marker,
                              linestyle=line, label=algorithm)
        axes[0][col].set_title(f"{size} nodes")
        axes[0][col].set_ylabel("mean speedup (eq. 15)")
        axes[1][col].set_ylabel("mean solve time [s]")
        axes[1][col].set_yscale("log")
        axes[1][col].set_xlabel("cores")
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Random DAGs, density {DENSITY:.0%}, weights uniform in [1, 10]")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="20,50,100")
    parser.add_argument("--cores", default="2-8")
    parser.add_argument("--graphs", type=int, default=5, help="random graphs per size (seeds 0..N-1)")
    parser.add_argument("--limits", default="20:10,50:60,100:60", help="CP-SAT time limit per size, seconds")
    parser.add_argument("--workers", type=int, default=1, help="CP-SAT search workers")
    parser.add_argument("--jobs", type=int, default=1, help="cases solved at a time (one core each)")
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args()
    limits = {int(k): float(v) for k, v in (part.split(":") for part in args.limits.split(","))}
    sizes, core_counts = int_list(args.sizes), int_list(args.cores)
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"schema": "assay-benchmark-scheduling/1",
              "command": "python benchmarks/scheduling.py " + " ".join(sys.argv[1:]),
              "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                          "cpus": os.cpu_count(), "python": platform.python_version()},
              "date": date.today().isoformat(),
              "settings": {"sizes": sizes, "cores": core_counts, "graphs": args.graphs, "density": DENSITY,
                           "weights": [1, 10], "time_limits": limits, "workers": args.workers,
                           "jobs": args.jobs},
              "runs": []}
    path = args.out / "scheduling.json"

    def case(size: int, seed: int, cores: int) -> list[dict]:
        """One graph on one core count, by every algorithm, in order."""
        graph = random_dag(size, DENSITY, seed)
        runs = []
        for algorithm in ALGORITHMS:
            start = time.perf_counter()
            dag, schedule, problems = scheduling.run(graph, cores, algorithm, limits.get(size, 60.0), args.workers)
            seconds = time.perf_counter() - start
            run = {"nodes": size, "seed": seed, "cores": cores, "algorithm": algorithm,
                   "makespan": schedule.makespan, "sequential": dag.sequential,
                   "speedup": speedup(dag, schedule), "seconds": seconds, "optimal": schedule.optimal,
                   "gap": schedule.info.get("gap"), "valid": not problems, "violations": problems}
            runs.append(run)
            print(f"{size} nodes seed {seed} {cores} cores {algorithm}: makespan {schedule.makespan} "
                  f"speedup {run['speedup']:.3f} {seconds:.2f} s"
                  + (f" optimal {schedule.optimal} gap {run['gap']:.3f}" if algorithm == "cpsat" else "")
                  + ("" if not problems else f" INVALID: {problems[0]}"), flush=True)
        return runs

    cases = [(size, seed, cores) for size in sizes for seed in range(args.graphs) for cores in core_counts]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for runs in pool.map(lambda c: case(*c), cases):
            result["runs"].extend(runs)
            result["summary"] = summarise(result["runs"])
            path.write_text(json.dumps(result, indent=1) + "\n")  # partial results survive an interruption
    plot(result["summary"], args.out / "scheduling.png")
    print(table(result["summary"]))
    print(f"written: {path}, {args.out / 'scheduling.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
