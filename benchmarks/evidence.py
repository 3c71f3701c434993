"""Benchmark: building an evidence package (issue 9 and 41 figures), cold and warm, with what each part cost.

First, the run of Assay's own tests that gives the tool qualification data (``tor.run_suite``, the package's
default selection) is made once and timed apart: it is content-keyed on Assay's sources, so it serves every
package built by the same Assay (or CI's JUnit XML is given with ``--tor-junit``); on a configuration qualified
by ``assay evidence qualify`` (``assay doctor`` names the record) it is that run, reused, and no test runs here;
``--tests-in-build`` leaves it to the first build instead. Then for each model: the wall and CPU time (the build
and every process it waited for) of ``assay evidence --models M --targets host,cortex-m4f --inputs N`` with its
defaults in a work directory shared by the models (every stage computed: cold), then the same command again
(content-keyed records reused, the package rebuilt: warm); per build the seconds of each part from the package's
``volatile.json`` (``parts_s``: each stage's subprocess, the code-level parts, the wait for the test run), whether
the test run was reused, the mutation analysis's own parts (each variant's ``timings``: the clean runs, the
schema builds, the split-stream state, the mutants, the detectability search beside them), and the machine's
load average before and after (the machine may be shared: CPU seconds / cores is what an idle machine would need
at least). ``--cold-only`` leaves the warm builds out. Prints the figures and writes
reports/benchmarks/evidence.json after each model (a run stopped early keeps the models it measured). Not a
test: it asserts nothing.

    python benchmarks/evidence.py [--models acas-reg50,lenet5,cifarnet] [--targets host,cortex-m4f] [--inputs 1000]
        [--jobs 2] [--work DIR] [--tests-in-build] [--cold-only]
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

from harness.core import configuration
from harness.core.provenance import tool_versions
from harness.stages.evidence import tor

PATH = Path("reports/benchmarks/evidence.json")


def build(model: str, targets: str, inputs: int, jobs: int, work: Path, out: Path) -> dict:
    """One ``assay evidence`` run: wall and CPU seconds, exit status, load averages, the package's part times."""
    load = [os.getloadavg()[0]]
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "harness.cli", "evidence", "--models", model, "--targets",
                                targets, "--inputs", str(inputs), "--jobs", str(jobs), "--out", str(out),
                                "--work", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    status = os.waitstatus_to_exitcode(status)
    if status not in (0, 1):
        print(stderr[-2000:], file=sys.stderr)
    volatile = json.loads((out / "volatile.json").read_text()) if (out / "volatile.json").is_file() else {}
    mutate = [{key: round(value, 1) for key, value in record.get("timings", {}).items()}
              for record in volatile.get("stages", {}).get("mutate", [])]
    return {"wall_s": round(seconds, 1), "cpu_s": round(usage.ru_utime + usage.ru_stime, 1), "exit": status,
            "load": [*load, os.getloadavg()[0]], "parts_s": volatile.get("parts_s", {}), "mutate_s": mutate,
            "test_run_reused": "tool_qualification_s" in volatile and volatile["tool_qualification_s"] is None}


def show(model: str, kind: str, row: dict) -> None:
    print(f"{model:<12} {kind:<5} wall {row['wall_s']:7.1f} s  CPU {row['cpu_s']:7.1f} s  exit {row['exit']}  "
          f"load {row['load'][0]:.1f}-{row['load'][1]:.1f}  test run reused: {row['test_run_reused']}", flush=True)
    for part, seconds in sorted(row["parts_s"].items(), key=lambda kv: -kv[1]):
        print(f"    {seconds:8.1f} s  {part}", flush=True)
    for timings in row["mutate_s"]:
        print("    mutate, one variant: " + ", ".join(f"{key} {value:.1f}" for key, value in timings.items()),
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="acas-reg50,lenet5,cifarnet")
    parser.add_argument("--targets", default="host,cortex-m4f")
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, help="work directory (default: a fresh temporary one, i.e. cold)")
    parser.add_argument("--tests-in-build", action="store_true",
                        help="do not run Assay's tests first: the first build runs them (beside its stages)")
    parser.add_argument("--cold-only", action="store_true", help="no warm build after each cold one")
    args = parser.parse_args()
    rows, tests = [], None
    with tempfile.TemporaryDirectory() as tmp:
        work = (args.work or Path(tmp) / "work").resolve()
        if not args.tests_in_build:
            start = time.perf_counter()
            _, run, seconds = tor.run_suite(tor.DEFAULT_SELECTION, work / "evidence-tor",
                                            qualified=configuration.report().get("qualified_by"))
            tests = {"wall_s": round(time.perf_counter() - start, 1), "reused": seconds is None,
                     "reused_from_qualification": run.get("reused_from_qualification"),
                     "command": run["command"], "exit": run.get("returncode")}
            print(f"Assay's own tests (tool qualification data): {tests['wall_s']:.1f} s, "
                  f"{'reused' if tests['reused'] else 'run'}: {run['command']}", flush=True)
        for model in args.models.split(","):
            out = Path(tmp) / f"pkg-{model}"
            cold = build(model, args.targets, args.inputs, args.jobs, work, out)
            show(model, "cold", cold)
            warm = None if args.cold_only else build(model, args.targets, args.inputs, args.jobs, work, out)
            if warm is not None:
                show(model, "warm", warm)
            size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
            zipped = out.with_name(out.name + ".zip").stat().st_size
            verdict = json.loads((out / "evidence.json").read_text())
            rows.append({"model": model, "cold": cold, "warm": warm, "verdicts": verdict.get("verdicts"),
                         "package_bytes": size, "zip_bytes": zipped})
            print(f"{model:<12} package {size:,} bytes (zip {zipped:,})  {verdict.get('verdicts')}", flush=True)
            # after each model: a long campaign stopped before its last model keeps the rows it measured
            PATH.parent.mkdir(parents=True, exist_ok=True)
            PATH.write_text(json.dumps({"schema": "assay-benchmark-evidence/3", "date": date.today().isoformat(),
                                        "machine": platform.platform(), "cpus": os.cpu_count(),
                                        "targets": args.targets, "inputs": args.inputs, "jobs": args.jobs,
                                        "tests": tests, "rows": rows, "tools": tool_versions()}, indent=1))
    print(f"written: {PATH}")


if __name__ == "__main__":
    main()
