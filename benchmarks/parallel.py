"""Benchmark: the branching models on 4 cores (issues 12 and 13 figures).

Per model (lenet5-split, inception-mini), as a user would run it (subprocesses of the CLI):

1. ``assay schedule --cores 4`` with each algorithm (ISH, DSH, CP-SAT): makespan, speedup, optimality and
   computation time (the first run computes the per-layer WCETs with ``assay wcet``; the others reuse its
   wcet.json, so their time is the schedule's: edge weights from the operators' own WCETs, cached);
2. ``assay semantic --cores 4 --schedule <the DSH schedule.json> --delays K`` on host threads and on
   cortex-a15x4 under QEMU, keras variant: per record the trace check, the Petri-net replay (inferences
   replayed, distinct interleavings observed, all accepted?), the composed parallel WCET, and under QEMU
   the per-core instruction counts and the measured speedups;
3. the NNEF paper's counts: of the exported description's Petri net (Translation 1) and of the net of its
   items along the DSH schedule (Translation 2): places, transitions, valid paths (exact) and reachable
   markings.

Prints the tables and writes reports/benchmarks/parallel.json (schema ``assay-benchmark-parallel/1``:
``command``, ``machine``, ``date``, ``settings``, ``models`` (per model: ``schedules``, ``records``,
``nets``)). Not a test: it asserts nothing.

    python benchmarks/parallel.py [--models lenet5-split,inception-mini] [--inputs 25] [--delays 7]
                                  [--work generated/bench-parallel] [--out reports/benchmarks]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from harness.formal import nnef_items, petri
from harness.models import nnef

ALGORITHMS = ("ish", "dsh", "cpsat")
CORES = 4


def assay(*args: str) -> float:
    """Run one assay command; its wall time (a failure ends the benchmark with the command's last lines)."""
    start = time.perf_counter()
    quiet = ["--quiet"] if args[0] in ("schedule", "semantic") else []
    done = subprocess.run([sys.executable, "-m", "harness.cli", *args, *quiet], capture_output=True, text=True,
                          check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"assay {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def schedules(model: str, work: Path) -> dict:
    rows = {}
    first = work / model / "schedule-dsh"
    for algorithm in ("dsh", "ish", "cpsat"):
        out = work / model / f"schedule-{algorithm}"
        extra = [] if algorithm == "dsh" else ["--wcet-json", str(first / "wcet" / "wcet.json")]
        wall = assay("schedule", "--model", model, "--cores", str(CORES), "--algorithm", algorithm, *extra,
                     "--out", str(out), "--work", str(work / "work"))
        data = json.loads((out / "schedule.json").read_text())
        rows[algorithm] = {"makespan": data["makespan"], "sequential": data["sequential"],
                           "speedup": data["speedup"], "optimal": data["optimal"],
                           "schedule_seconds": data["seconds"]["schedule_s"], "command_seconds": wall,
                           "duplications": len(data["duplications"]),
                           "communications": len(data["communications"]), "gap": (data.get("solver") or {}).get("gap")}
    return rows


def campaign(model: str, work: Path, inputs: int, delays: int) -> list[dict]:
    out = work / model / "semantic"
    assay("semantic", "--models", model, "--generators", "assay-v2:keras", "--cores", str(CORES), "--schedule",
          str(work / model / "schedule-dsh" / "schedule.json"), "--targets", "host,cortex-a15x4", "--delays",
          str(delays), "--inputs", str(inputs), "--references", "onnxruntime", "--out", str(out), "--work",
          str(work / "work"))
    records = json.loads((out / "results.json").read_text())["records"]
    return [{"target": r["target"], "verdict": r["verdict"], "cause": r.get("cause"),
             "trace": r["parallel"]["trace"]["verdict"], "petri": r["parallel"].get("petri"),
             "wcet": r["parallel"].get("wcet"), "measured": r["parallel"].get("measured"),
             "runs": len(r["parallel"].get("runs", []))} for r in records]


def nets(model: str, work: Path) -> dict:
    folder = work / model / "nnef"
    assay("export", "--model", model, "--format", "nnef", "--out", str(folder), "--work", str(work / "work"))
    (description,) = nnef_items.parse((folder / nnef.GRAPH_FILE).read_text())
    tasks = nnef_items.schedule_tasks(json.loads((work / model / "schedule-dsh" / "schedule.json").read_text()))
    result = {}
    for name, net in (("translation1", petri.translate(description)),
                      ("translation2_dsh", petri.schedule_net(description, tasks)[0])):
        start = time.perf_counter()
        result[name] = {"places": len(net.places), "transitions": len(net.transitions), "items": len(net.colours),
                        "valid_paths": net.count_paths(None), "reachable_markings": net.reachable_markings(),
                        "seconds": time.perf_counter() - start}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="lenet5-split,inception-mini")
    parser.add_argument("--inputs", type=int, default=25)
    parser.add_argument("--delays", type=int, default=7)
    parser.add_argument("--work", type=Path, default=Path("generated/bench-parallel"))
    parser.add_argument("--out", type=Path, default=Path("reports/benchmarks"))
    args = parser.parse_args()
    result = {"schema": "assay-benchmark-parallel/1",
              "command": "python benchmarks/parallel.py " + " ".join(sys.argv[1:]),
              "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                          "load_average": os.getloadavg()},
              "date": date.today().isoformat(),
              "settings": {"cores": CORES, "inputs": args.inputs, "delays": args.delays}, "models": {}}
    args.out.mkdir(parents=True, exist_ok=True)
    for model in args.models.split(","):
        entry = result["models"][model] = {"schedules": schedules(model, args.work)}
        entry["records"] = campaign(model, args.work, args.inputs, args.delays)
        entry["nets"] = nets(model, args.work)
        (args.out / "parallel.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(f"## {model} on {CORES} cores")
        for algorithm, row in entry["schedules"].items():
            print(f"schedule {algorithm}: makespan {row['makespan']} sequential {row['sequential']} speedup "
                  f"{row['speedup']:.3f} optimal {row['optimal']} in {row['schedule_seconds']:.3f} s "
                  f"(command {row['command_seconds']:.1f} s)")
        for record in entry["records"]:
            p, w, m = record["petri"] or {}, record["wcet"] or {}, record["measured"] or {}
            print(f"{record['target']}: {record['verdict']} ({record['cause'] or 'all checks passed'}); trace "
                  f"{record['trace']}; Petri net {p.get('verdict')}: {p.get('inferences')} inferences, "
                  f"{p.get('distinct_interleavings')} distinct interleavings; WCET sequential "
                  f"{w.get('sequential_cycles')} parallel {w.get('parallel_cycles')} (speedup {w.get('speedup')})"
                  + (f"; measured instructions sequential {m['sequential']} per core {m['per_core']} critical "
                     f"speedup {m['speedup_critical_core']:.3f} composed {m['speedup_composed']:.3f}" if m else ""))
        for name, counts in entry["nets"].items():
            print(f"{name}: {counts['places']} places, {counts['transitions']} transitions, {counts['items']} "
                  f"items, {counts['valid_paths']} valid paths, {counts['reachable_markings']} reachable markings")
    print(f"written: {args.out / 'parallel.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
