"""Benchmark: memory and time of counting instructions under QEMU with Assay's plugin (issue 10).

For each model: generate and cross-build the item as ``assay wcet`` does (the build is shared with that
stage's work directory, so a campaign run before is reused), then, in a fresh process whose only child is
QEMU, count ``--inputs`` seeded inputs with the counting plugin
(``harness.measurement.cycles.count_item``). Prints per model: instructions per input, QEMU's peak resident
memory (its ``VmHWM``, read every 0.1 s while it runs: ``RUSAGE_CHILDREN`` would report the counting
process's own size, which the forked child has until it executes QEMU), the emulator's wall time, the whole count's time
(emulator + parsing the plugin's output) and that process's own peak (the parsed counts). V3 code
(megabytes of straight-line code) is where the plugin's memory used to grow with every retranslation
(docs/met.md, "Memory"). Not a test: it asserts nothing; writes reports/benchmarks/counting-<target>.json.

    python benchmarks/counting.py --generator assay-v3 --models acas-reg200,lenet5 --target arm7tdmi-ext
                                  [--variant keras] [--inputs 2] [--work generated]
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import threading
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = "wcet"  # the work subdirectory of `assay wcet`, whose builds are reused


class PeakWatcher(threading.Thread):
    """Samples the peak resident memory (``VmHWM``) of this process's child processes until stopped."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_kb = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.1):
            for task in Path("/proc/self/task").iterdir():  # a child belongs to the thread that forked it
                for pid in (task / "children").read_text().split():
                    self.peak_kb = max(self.peak_kb, _hwm_kb(pid))


def _hwm_kb(pid: str) -> int:
    """The process's ``VmHWM`` in kB once it runs QEMU (0 before: a forked child has its parent's size until
    it executes QEMU; 0 if it has gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    if not status.startswith("Name:\tqemu"):
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def count(model: str, generator: str, variant: str, target: str, n_inputs: int, work: str) -> dict:
    """In the fresh process: count ``n_inputs`` inputs of the item; the figures of the module docstring."""
    from harness.core.plan import Item
    from harness.measurement import cycles

    settings = cycles.Settings(work_dir=Path(work), n_inputs=n_inputs)
    seconds: dict = {}
    watcher = PeakWatcher()
    watcher.start()
    counts, _, built = cycles.count_item(Item(model, generator, variant, target, ()), settings, STAGE, seconds)
    watcher.stop.set()
    watcher.join()
    return {"model": model, "elf": str(built.elf), "inputs": n_inputs,
            "instructions": [call.instructions() for call in counts.calls],
            "emulator_s": round(seconds["emulator_s"], 2), "count_s": round(seconds["count_s"], 2),
            "qemu_peak_mb": round(watcher.peak_kb / 1024),
            "python_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def _child(*args: str) -> dict:
    """Run ``count`` in a fresh interpreter (its peak memory and children are its own)."""
    output = subprocess.run([sys.executable, __file__, "--child", *args], cwd=ROOT, capture_output=True, text=True,
                            check=False)
    if output.returncode != 0:
        raise SystemExit(f"counting {args[0]} failed: {output.stderr.strip()[-500:]}")
    return json.loads(output.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="acas-reg200,lenet5")
    parser.add_argument("--generator", default="assay-v3")
    parser.add_argument("--variant", default="keras")
    parser.add_argument("--target", default="arm7tdmi-ext")
    parser.add_argument("--inputs", type=int, default=2)
    parser.add_argument("--work", default="generated")
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, generator, variant, target, n_inputs, work = args.child
        print(json.dumps(count(model, generator, variant, target, int(n_inputs), work)))
        return
    rows = []
    for model in args.models.split(","):
        common = (model, args.generator, args.variant, args.target)
        _child(*common, "1", args.work)  # generate and build, unmeasured: the next process's only child is QEMU
        row = _child(*common, str(args.inputs), args.work)
        rows.append(row)
        print(f"{model} {args.generator} {args.target}: {max(row['instructions'])} instructions/input max, "
              f"QEMU peak {row['qemu_peak_mb']} MB, emulator {row['emulator_s']} s, count {row['count_s']} s "
              f"for {row['inputs']} inputs, counting process peak {row['python_peak_mb']} MB", flush=True)
    report = {"schema": "assay-benchmark-counting/1", "date": date.today().isoformat(), "machine": platform.node(),
              "generator": args.generator, "variant": args.variant, "target": args.target, "rows": rows}
    out = ROOT / "reports" / "benchmarks" / f"counting-{args.target}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
