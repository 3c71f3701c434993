"""Benchmark: WCET analysis time and peak memory per model (issue 4 figures).

For each model, in a fresh process (so its peak memory is its own): generate
with assay-v2, cross-build for the target, produce the flow facts
automatically, and bound the inference function and its layers with the
built-in analyzer. Prints, per model, the time of each stage and the process's
peak resident memory, and writes reports/benchmarks/wcet-<target>.json.
Not a test: it asserts nothing. The full tier (AlexNet, VGG-16) builds
multi-hundred-megabyte models first; ask for it with --full.

``--generator assay-v3 --variant V`` benchmarks another generator's code (V3:
megabytes of straight-line code). ``--synthetic N`` benchmarks a V3-like
function instead of a model: N statements ``acc += input[i] * w;`` (one
soft-float multiply and add each on the ARM7TDMI) with a ReLU store every 200,
built as a prebuilt item; its bound uses the library annotations only.

    python benchmarks/wcet_analysis.py [--target arm7tdmi-ext] [--timing arm7tdmi] [--full] [--models a,b]
                                       [--generator assay-v2 --variant keras] [--synthetic 200000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path


def prepare(model: str, target: str, work: Path, generator: str = "assay-v2", variant: str = "keras") -> dict:
    """First child: zoo model, generated code and ELF (TensorFlow's memory stays in this process)."""
    from harness.core.pipeline import build_code, generate_code
    from harness.core.plan import Item, Settings, load_model

    settings = Settings(work_dir=work)
    item = Item(model, generator, variant, target, ())
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    loaded = load_model(model, settings)
    seconds["zoo"] = time.perf_counter() - start
    code = generate_code(item, loaded, settings, seconds, {}, stage="wcet-bench")
    built = build_code(item, target, code, settings, seconds, {}, stage="wcet-bench")
    return {"seconds": seconds, "elf": str(built.elf), "code": str(code.directory)}


def synthetic(statements: int, target: str, work: Path) -> dict:
    """First child, --synthetic: the straight-line C (module docstring) written and built as a prebuilt item."""
    import random

    from harness import targets
    from harness.generators.generated import GeneratedCode
    from harness.runners import qemu

    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with (work / "straight.c").open("w") as out:
        out.write("void probe(const float *input, float *output) {\n  float acc = 0.0f;\n")
        for n in range(statements):
            out.write(f"  acc += input[{n % 5}] * {rng.uniform(-1, 1):.7f}f;\n")
            if n % 200 == 199:
                out.write(f"  output[{n // 200 % 5}] = acc > 0 ? acc : 0; acc = 0.0f;\n")
        out.write("}\n")
    (work / "assay.json").write_text('{"entry": "probe", "input_size": 5, "output_size": 5, "input_layout": "C", '
                                     '"output_layout": "C", "sources": ["straight.c"]}')
    start = time.perf_counter()
    built = qemu.build(GeneratedCode.from_directory(work), work / "build", targets.get(target), "-O0")
    return {"seconds": {"zoo": 0.0, "generate_s": 0.0, "compile_s": time.perf_counter() - start},
            "elf": str(built.elf), "code": str(work)}


def measure(elf: Path, code_dir: Path, timing_name: str) -> dict:
    """Second child: only the WCET work, so its peak memory is the analysis's own."""
    from harness.generators.generated import GeneratedCode
    from harness.stages.wcet.run import _flow_facts, _regions
    from wcet import timing
    from wcet.analyzer import analyze

    from wcet.bound import facts_for_elf

    code = GeneratedCode.from_directory(code_dir)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    full = "layers" in code.manifest  # a generator's manifest; a synthetic prebuilt item has none
    facts = _flow_facts(elf, code)[0] if full else facts_for_elf(elf)
    seconds["flowfacts"] = time.perf_counter() - start
    start = time.perf_counter()
    regions = _regions(elf, code)[0] if full else {}
    result = analyze(elf, code.entry, facts, timing.get(timing_name), regions)
    seconds["analysis"] = time.perf_counter() - start
    from wcet.program import load_program

    entry = load_program(elf).function(code.entry)
    return {"wcet_cycles": int(result.wcet_cycles), "wcet_cycles_precise": result.wcet_cycles_precise,
            "entry_bytes": entry.end - entry.start, "ilp": result.ilp, "layers": len(regions), "loops": len(result.loops),
            "seconds": seconds, "wcet_seconds": seconds["flowfacts"] + seconds["analysis"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def _child(*args: str) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([sys.executable, __file__, "--child", *args, out.name], check=True)
        return json.loads(Path(out.name).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="arm7tdmi-ext")
    parser.add_argument("--timing", default="arm7tdmi")
    parser.add_argument("--models", help="comma-separated models (default lenet5,cifarnet; with --full also "
                                         "alexnet,vgg16)")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--generator", default="assay-v2")
    parser.add_argument("--variant", default="keras")
    parser.add_argument("--synthetic", type=int, metavar="N", help="a straight-line function of N statements "
                                                                    "instead of models")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        stage, *rest, out = args.child
        if stage == "prepare":
            result = prepare(rest[0], rest[1], Path(rest[2]), rest[3], rest[4])
        elif stage == "synthetic":
            result = synthetic(int(rest[0]), rest[1], Path(rest[2]))
        else:
            result = measure(Path(rest[0]), Path(rest[1]), rest[2])
        Path(out).write_text(json.dumps(result))
        return
    models = args.models.split(",") if args.models else ["lenet5", "cifarnet"] + (["alexnet", "vgg16"] if args.full else [])
    if args.synthetic:
        models = [f"straight-{args.synthetic}"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            if args.synthetic:
                built = _child("synthetic", str(args.synthetic), args.target, str(Path(tmp) / "synthetic"))
            else:
                built = _child("prepare", model, args.target, str(Path(tmp) / "work"), args.generator, args.variant)
            row = {"model": model, "generator": "synthetic" if args.synthetic else args.generator,
                   **_child("measure", built["elf"], built["code"], args.timing)}
            row["build_seconds"] = built["seconds"]
            rows.append(row)
            s, b = row["seconds"], built["seconds"]
            print(f"{model:<10} WCET {row['wcet_cycles']:>18,} cycles | flow facts {s['flowfacts']:6.2f} s + "
                  f"analysis {s['analysis']:6.2f} s = {row['wcet_seconds']:6.2f} s, peak {row['peak_rss_mb']:6.0f} MB"
                  f" | before: zoo {b['zoo']:5.1f} s, generate {b['generate_s']:5.2f} s, build {b['compile_s']:5.2f} s",
                  flush=True)
    suffix = f"-straight{args.synthetic}" if args.synthetic else \
        ("" if args.generator == "assay-v2" else f"-{args.generator}")
    path = Path(f"reports/benchmarks/wcet-{args.target}{suffix}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"schema": "assay-benchmark-wcet/1", "date": date.today().isoformat(),
                                "machine": platform.platform(),
                                "cpus": os.cpu_count(), "target": args.target, "timing": args.timing,
                                "rows": rows}, indent=1))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
