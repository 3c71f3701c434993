"""Benchmark: input shards over pytest-xdist workers (issue 16 figures).

For lenet5 and cifarnet (1000 inputs, host, ``assay-v2`` keras variant, both
references), the wall time of ``assay semantic`` run three ways, each with a
fresh ``--out`` on one shared work folder warmed first (zoo models, builds,
reference and float64 outputs cached, as in any campaign after its first run):

- ``in-process``: no workers, no shards (what ``assay semantic`` does by default);
- ``1 worker``: ``--workers 1 --shard-size S`` (the xdist machinery, one worker);
- ``2 workers``: ``--workers 2 --shard-size S``;
- with ``--tx SPEC`` (repeatable, issue 30): ``1 local + tx``: ``--workers 1 --shard-size S --tx SPEC...``, one
  local worker and the given xdist gateways (e.g. two ``ssh=`` workers, docs/sharding.md; an absolute work
  folder, so SSH workers on the same machine find it warm too);

the speedup of 2 workers over 1 worker and over in-process, and the time in C
summed over the shards. Then VGG-16 at ``--vgg-inputs`` inputs sharded over 2
workers (shards of half the inputs) and the projected time of the 1000-input
row for 1 to 32 workers: the measured time outside C (generation,
compilation, references, start-up) plus 1000 x the measured C time per
inference / workers. The merged records are checked against an unsharded
run's for lenet5 and cifarnet (same errors, verdicts). Prints a table and
writes JSON (schema ``assay-benchmark-sharding/1``) to
reports/benchmarks/sharding.json. Not a test: it asserts nothing.

    PYTHONPATH=. python benchmarks/sharding.py [--inputs 1000] [--shard-size 100] [--vgg-inputs 20] [--no-vgg]
        [--models lenet5,cifarnet] [--tx ssh=HOST//python=/abs/.venv/bin/python ...]
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

CHECKOUT = Path(__file__).resolve().parents[1]
VOLATILE = ("timings", "finished_at")
WORKER_COUNTS = (1, 2, 4, 8, 16, 32)


def semantic(model: str, n_inputs: int, out: Path, work: Path, *extra: str) -> tuple[float, list[dict]]:
    """Run ``assay semantic`` on ``model``; its wall time and the records it wrote."""
    command = [sys.executable, "-m", "harness.cli", "semantic", "--models", model, "--generators", "assay-v2:keras",
               "--inputs", str(n_inputs), "--out", str(out), "--work", str(work), "--quiet", *extra]
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT), TF_CPP_MIN_LOG_LEVEL="3")
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, json.loads((out / "results.json").read_text())["records"]


def stable(records: list[dict]) -> list[dict]:
    return sorted(({k: v for k, v in r.items() if k not in VOLATILE} for r in records),
                  key=lambda r: (r["variant"], r["reference"]))


def computed(records: list[dict]) -> list[dict]:
    """``stable`` but for the provenance's ``assay`` (which copy of Assay ran: an rsynced one has no git commit)."""
    return [{**r, "provenance": {k: v for k, v in r["provenance"].items() if k != "assay"}} for r in stable(records)]


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def compare_workers(model: str, n_inputs: int, shard_size: int, tmp: Path, tx: list[str]) -> dict:
    work = tmp / "work"
    semantic(model, n_inputs, tmp / f"{model}-warm", work)  # zoo, builds, reference and float64 outputs cached
    semantic(model, n_inputs, tmp / f"{model}-warm-shards", work, "--shard-size", str(shard_size))  # code stamp
    row: dict = {"model": model, "inputs": n_inputs, "shard_size": shard_size, "load_before": load()}
    baseline, records = semantic(model, n_inputs, tmp / f"{model}-inprocess", work)
    row["in_process_s"] = baseline
    for workers in (1, 2):
        seconds, sharded = semantic(model, n_inputs, tmp / f"{model}-w{workers}", work, "--workers", str(workers),
                                    "--shard-size", str(shard_size))
        row[f"workers_{workers}_s"] = seconds
        row[f"workers_{workers}_same_records"] = stable(sharded) == stable(records)
        row["c_seconds"] = sum(r["timings"].get("c_run_s", 0.0) for r in sharded if r["reference"] == "keras")
    if tx:
        seconds, sharded = semantic(model, n_inputs, tmp / f"{model}-tx", work, "--workers", "1", "--shard-size",
                                    str(shard_size), *(arg for spec in tx for arg in ("--tx", spec)))
        row.update(tx=tx, local_1_plus_tx_s=seconds, speedup_1_plus_tx_over_1_worker=row["workers_1_s"] / seconds,
                   local_1_plus_tx_same_records=computed(sharded) == computed(records))
    row["speedup_2_over_1_worker"] = row["workers_1_s"] / row["workers_2_s"]
    row["speedup_2_workers_over_in_process"] = row["in_process_s"] / row["workers_2_s"]
    row["load_after"] = load()
    return row


def vgg(n_inputs: int, tmp: Path) -> dict:
    """VGG-16 sharded over 2 workers, and the 1000-input row projected per worker count."""
    row: dict = {"model": "vgg16", "inputs": n_inputs, "shard_size": (n_inputs + 1) // 2, "load_before": load()}
    seconds, records = semantic("vgg16", n_inputs, tmp / "vgg16", tmp / "work-vgg16", "--workers", "2",
                                "--shard-size", str(row["shard_size"]), "--references", "keras")
    timings = records[0]["timings"]
    c_per_inference = timings["c_run_s"] / n_inputs
    outside_c = seconds - timings["c_run_s"] / 2  # two workers ran the C at once
    row.update(wall_s=seconds, c_seconds_per_inference=c_per_inference, outside_c_s=outside_c,
               verdict=records[0]["verdict"], max_abs_error=records[0]["max_abs_error"], timings=timings,
               projected_1000_inputs_s={workers: outside_c + 1000 * c_per_inference / workers
                                        for workers in WORKER_COUNTS}, load_after=load())
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--shard-size", type=int, default=100)
    parser.add_argument("--vgg-inputs", type=int, default=20)
    parser.add_argument("--no-vgg", action="store_true")
    parser.add_argument("--models", default="lenet5,cifarnet")
    parser.add_argument("--tx", action="append", default=[], metavar="SPEC",
                        help="also run with one local worker and these xdist gateways (repeatable)")
    args = parser.parse_args()
    rows: list[dict] = []
    out = CHECKOUT / "reports" / "benchmarks" / "sharding.json"
    out.parent.mkdir(parents=True, exist_ok=True)

    def write() -> None:  # after every row: a run stopped before VGG-16 keeps its figures
        out.write_text(json.dumps({"schema": "assay-benchmark-sharding/1", "date": date.today().isoformat(),
                                   "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                   "rows": rows}, indent=1))

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        for model in args.models.split(","):
            rows.append(compare_workers(model, args.inputs, args.shard_size, tmp, args.tx))
            row = rows[-1]
            print(f"{model}: in-process {row['in_process_s']:.1f} s, 1 worker {row['workers_1_s']:.1f} s, 2 workers "
                  f"{row['workers_2_s']:.1f} s; speedup {row['speedup_2_over_1_worker']:.2f}x over 1 worker, "
                  f"{row['speedup_2_workers_over_in_process']:.2f}x over in-process; C {row['c_seconds']:.1f} s; "
                  f"same records {row['workers_1_same_records'] and row['workers_2_same_records']}; "
                  f"load {row['load_before']} -> {row['load_after']}", flush=True)
            if args.tx:
                print(f"{model}: 1 local + {len(args.tx)} gateways {row['local_1_plus_tx_s']:.1f} s, "
                      f"{row['speedup_1_plus_tx_over_1_worker']:.2f}x over 1 worker; same records "
                      f"{row['local_1_plus_tx_same_records']}", flush=True)
            write()
        if not args.no_vgg:
            rows.append(vgg(args.vgg_inputs, tmp))
            row = rows[-1]
            print(f"vgg16 {args.vgg_inputs} inputs on 2 workers: {row['wall_s']:.0f} s wall, "
                  f"{row['c_seconds_per_inference']:.1f} s of C per inference, {row['verdict']}; projected 1000 "
                  "inputs: " + ", ".join(f"{w} workers {s / 3600:.2f} h"
                                         for w, s in row["projected_1000_inputs_s"].items())
                  + f"; load {row['load_before']} -> {row['load_after']}", flush=True)
            write()
    print(f"written: {out}")


if __name__ == "__main__":
    main()
