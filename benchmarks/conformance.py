"""Benchmark: the conformance suite of one generator, cold (issue 11: "under 5 minutes on the 2-core machine").

For each generator spec (default: ``acetone-nnet:6loops:default``, ``emlearn``, ``keras2c:stack``), one
``assay conformance --generators G --inputs N --out OUT --work WORK`` with a fresh work folder, so the
cases, their reference outputs, the peer's code and its builds are all made inside the measured wall time
(the peer environments themselves are built beforehand: their set-up time, from each environment's stamp,
is printed beside). Prints per generator the wall time, the load average before and after, and the counts
per variant from ``conformance.json``; writes JSON (schema ``assay-benchmark-conformance/1``) to
reports/benchmarks/conformance.json. Not a test: it asserts nothing.

    PYTHONPATH=. python benchmarks/conformance.py [--generators acetone-nnet:6loops:default,emlearn] [--inputs 100]
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
from collections import Counter
from datetime import date
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
DEFAULT = "acetone-nnet:6loops:default,emlearn,keras2c:stack"


def load() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


def run(spec: str, n_inputs: int, tmp: Path) -> dict:
    """One cold conformance run of ``spec``: wall time, load, counts per variant."""
    out, work = tmp / f"out-{spec}", tmp / f"work-{spec}"
    command = [sys.executable, "-m", "harness.cli", "conformance", "--generators", spec, "--inputs", str(n_inputs),
               "--out", str(out), "--work", str(work), "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT), TF_CPP_MIN_LOG_LEVEL="3")
    row: dict = {"generator": spec, "inputs": n_inputs, "load_before": load()}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    row["wall_s"] = time.perf_counter() - start
    row["load_after"] = load()
    if done.returncode not in (0, 1):  # 1: some case fails or errs, which is what the suite is for
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    counts: dict[str, Counter] = {}
    for result in json.loads((out / "conformance.json").read_text())["results"]:
        counts.setdefault(f"{result['generator']} ({result['variant']})", Counter())[result["verdict"]] += 1
    row["counts"] = {variant: dict(counter) for variant, counter in counts.items()}
    return row


def setup_seconds(spec: str) -> float | None:
    """The peer environment's recorded set-up time (None for Assay's own generators or an unbuilt one)."""
    from harness.generators.peers import PeerEnv, names

    name = spec.split(":", 1)[0]
    stamp = PeerEnv(name).stamp() if name in names() else None
    return stamp["setup_s"] if stamp else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generators", default=DEFAULT)
    parser.add_argument("--inputs", type=int, default=100)
    args = parser.parse_args()
    rows: list[dict] = []
    out = CHECKOUT / "reports" / "benchmarks" / "conformance.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        for spec in args.generators.split(","):
            row = run(spec, args.inputs, Path(name))
            row["environment_setup_s"] = setup_seconds(spec)
            rows.append(row)
            print(f"{spec}: {row['wall_s']:.1f} s wall (load {row['load_before']} -> {row['load_after']}), "
                  f"environment set up in {row['environment_setup_s']} s; "
                  + "; ".join(f"{variant}: " + ", ".join(f"{n} {verdict}" for verdict, n in sorted(c.items()))
                              for variant, c in row["counts"].items()), flush=True)
            out.write_text(json.dumps({"schema": "assay-benchmark-conformance/1", "date": date.today().isoformat(),
                                       "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                                       "rows": rows}, indent=1))
    print(f"written: {out}")


if __name__ == "__main__":
    main()
