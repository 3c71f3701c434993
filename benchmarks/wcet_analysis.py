"""Benchmark: WCET analysis time and peak memory per model (issue 4 figures).

For each model, in a fresh process (so its peak memory is its own): generate
with assay-v2, cross-build for the target, produce the flow facts
automatically, and bound the inference function and its layers with the
built-in analyzer. Prints, per model, the time of each stage and the process's
peak resident memory, and writes reports/benchmarks/wcet-<target>.json.
Not a test: it asserts nothing. The full tier (AlexNet, VGG-16) builds
multi-hundred-megabyte models first; ask for it with --full.

``--generator assay-v3 --variant V`` benchmarks another generator's code (V3:
megabytes of straight-line code). Only building and analysing happen here, so
a target may be an analysis-only profile: V2 of VGG-16 on the Cortex-M4F is
``--models vgg16 --target cortex-m4f-big --timing cortex-m4`` (no emulated
M-profile board has its 553 MB of weights; docs/targets.md), V3 of the large
ACAS nets and lenet5 ``--target cortex-m4f-ext`` (code in the board's PSRAM).

``--elf-mode`` benchmarks the command a build runs instead, side by side with
OTAWA (issues 15 and 45): for each model, target and variant (default
acas-reg50, lenet5 on cortex-m4f and arm7tdmi, keras and onnx: the 8 ELFs of
``assay wcet --models acas-reg50,lenet5 --timing trivial``) the ELF and its
automatic flow facts (``.ff``) are made once, then ``assay wcet --elf E
--function F --flow-facts E.ff`` (run as ``python -m harness.cli``, what the
``assay`` entry point runs), ``python -m wcet E F --flow-facts E.ff`` and the
real OTAWA's ``owcet -s trivial E F -f E.ff`` (on PATH, else the one
``harness.core.otawa_install`` unpacked from ../shared/otawa-bin) are run
``--repeat`` times as fresh processes, the tools in turn (one run of each, then
the next round): median and fastest wall time, median CPU time (user + system:
what a loaded machine inflates least), peak resident memory of the process
(``wait4``), the WCET each printed, and the ratios to OTAWA. Then the batch:
one ``python -m wcet --batch FILE`` process bounds all the ELFs (start-up paid
once), in turn with OTAWA run once per ELF, ``--repeat`` times: the amortised
wall and CPU time per ELF of each. Last, the floor of any Python analyzer
built on capstone, ``--repeat`` times: ``python -c pass``, ``python -S -c
pass`` (no ``site``: no virtual environment) and ``python -c "import
wcet.disasm"`` (the interpreter with capstone's library loaded, nothing
decoded). Peak memory is GNU time's ``%M`` of each process alone
(``/usr/bin/time``). Bytecode is compiled by an unmeasured first run (as
``pip install`` does; ``PYTHONDONTWRITEBYTECODE`` is dropped for the children).
``--source DIR`` runs another checkout's code (before/after comparisons).
Writes reports/benchmarks/wcet-elf.json.

``--plot PNG FILE.json...`` draws the analysis time (flow facts + bound) of
every row of the given campaign-mode result files against the ELF's ``.text``
size, log-log, with the least-squares line through the origin (time per MB of
code): the analysis is linear in the size of the code when the points follow
it over the whole range, from the ACAS nets to V3 binaries and VGG-16. ``--synthetic N`` benchmarks a V3-like
function instead of a model: N statements ``acc += input[i] * w;`` (one
soft-float multiply and add each on the ARM7TDMI) with a ReLU store every 200,
built as a prebuilt item; its bound uses the library annotations only.

    python benchmarks/wcet_analysis.py [--target arm7tdmi-ext] [--timing arm7tdmi] [--full] [--models a,b]
                                       [--generator assay-v2 --variant keras] [--synthetic 200000]
    python benchmarks/wcet_analysis.py --elf-mode [--models acas-reg50,lenet5] [--targets cortex-m4f,arm7tdmi]
                                       [--variants keras,onnx] [--repeat 5] [--source DIR]
    python benchmarks/wcet_analysis.py --plot reports/benchmarks/wcet-scaling.png reports/benchmarks/wcet-*.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's packages (and its children's), not an installed copy of another


def prepare(model: str, target: str, work: Path, generator: str = "assay-v2", variant: str = "keras") -> dict:
    """First child: zoo model, generated code and ELF (TensorFlow's memory stays in this process)."""
    from harness.core.pipeline import build_code, generate_code
    from harness.core.plan import Item, Settings, load_model

    settings = Settings(work_dir=work, n_inputs=1)  # no inputs run here: the memory budget is for one
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
    return {"entry": code.entry, "text_bytes": _text_bytes(elf), "wcet_cycles": int(result.wcet_cycles),
            "wcet_cycles_precise": result.wcet_cycles_precise,
            "entry_bytes": entry.end - entry.start, "ilp": result.ilp, "layers": len(regions),
            "loops": len(result.loops),
            "seconds": seconds, "wcet_seconds": seconds["flowfacts"] + seconds["analysis"],
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


WCET_LINE = re.compile(r"WCET\[[^\]]*\] = (\d+) cycles")


TIME = "/usr/bin/time"  # GNU time: the peak memory of the command alone


def run_once(command: list[str], cwd: Path, env: dict) -> tuple[float, float, float, int | None]:
    """Wall seconds, CPU seconds (user + system), peak resident MB and the WCET printed, for one fresh
    process running ``command``. The peak memory is GNU time's ``%M`` for the command: a child forked from
    this Python process and measured with ``wait4`` counts this process's own memory until its ``exec``
    (about 30 MB here, which the first version of this benchmark reported for every tool)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        start = time.perf_counter()
        process = subprocess.run([TIME, "-o", report.name, "-f", "%U %S %M", *command], cwd=cwd, env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
        wall = time.perf_counter() - start
        user, system, peak_kb = report.read().split()[-3:]
    output = process.stdout
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)}: exit status {process.returncode}: {output.strip()[-300:]}")
    usage = (float(user) + float(system), int(peak_kb) / 1024)
    if Path(command[0]).name == "owcet":
        from wcet import otawa

        cycles = otawa.parse_owcet_output(output, process.returncode).wcet_cycles
    else:
        match = WCET_LINE.search(output)
        cycles = int(match.group(1)) if match else None
    return wall, usage[0], usage[1], cycles


def _otawa_home() -> Path | None:
    """Where owcet is: None for PATH, else the OTAWA unpacked from ../shared/otawa-bin; SystemExit without one."""
    from harness.core import otawa_install
    from wcet import otawa

    if otawa.available():
        return None
    found, reason = otawa_install.usable()
    if found is None:
        raise SystemExit(f"no OTAWA to compare with: {reason}")
    return found.home


def _figures(runs: list[tuple]) -> dict:
    walls = sorted(wall for wall, _, _, _ in runs)
    return {"wall_median_s": statistics.median(walls), "wall_min_s": walls[0],
            "cpu_median_s": statistics.median(cpu for _, cpu, _, _ in runs),
            "peak_rss_mb": max(rss for _, _, rss, _ in runs), "wcet_cycles": runs[0][3]}


def elf_mode(models: list[str], targets: list[str], variants: list[str], repeat: int, source: Path,
             work: Path) -> tuple[list[dict], dict, dict]:
    """The ELF-mode rows, the batch and the floor (module docstring): per ELF, per tool, its wall times, peak
    memory and WCET; then one batch process for all the ELFs against OTAWA once per ELF; then the interpreter
    alone."""
    from wcet import otawa

    home = _otawa_home()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    rows, triples = [], []
    for model in models:
        for target in targets:
            for variant in variants:
                built = _child("prepare", model, target, str(work), "assay-v2", variant)
                entry = _child("measure", built["elf"], built["code"], "trivial")["entry"]  # writes the .ff beside it
                elf, facts = Path(built["elf"]), Path(built["elf"]).with_suffix(".ff")
                triples.append((elf, entry, facts))
                tools = {"owcet": otawa.owcet_command(elf, entry, facts, "trivial", home=home),
                         "python -m wcet": [sys.executable, "-m", "wcet", str(elf), entry, "--flow-facts", str(facts)],
                         "assay wcet --elf": [sys.executable, "-m", "harness.cli", "wcet", "--elf", str(elf),
                                              "--function", entry, "--flow-facts", str(facts), "--timing", "trivial"]}
                row = {"model": model, "target": target, "variant": variant, "elf": str(elf),
                       "text_bytes": _text_bytes(elf), "tools": {}}
                for command in tools.values():
                    run_once(command, source, env)  # compiles the bytecode, warms the file cache; not measured
                runs: dict[str, list] = {name: [] for name in tools}
                for _ in range(repeat):  # the tools in turn: a load that comes and goes falls on each alike
                    for name, command in tools.items():
                        runs[name].append(run_once(command, source, env))
                row["tools"] = {name: _figures(found) for name, found in runs.items()}
                rows.append(row)
                print(_elf_line(row), flush=True)
    return rows, _batch(triples, home, repeat, source, env, work), _floor(repeat, source, env)


FLOOR = {"python -c pass": ["-c", "pass"], "python -S -c pass": ["-S", "-c", "pass"],
         "python -c 'import wcet.disasm'": ["-c", "import wcet.disasm"]}


def _floor(repeat: int, source: Path, env: dict) -> dict:
    """Median wall and CPU time and peak memory of the interpreter alone and with capstone's library
    (module docstring): what no change to the analyzer's own code can go below."""
    figures = {}
    for name, arguments in FLOOR.items():
        runs = [run_once([sys.executable, *arguments], source, env) for _ in range(repeat)]
        figures[name] = _figures(runs)
        print(f"floor: {name}: {figures[name]['wall_median_s']:.3f} s (CPU {figures[name]['cpu_median_s']:.3f}), "
              f"{figures[name]['peak_rss_mb']:.1f} MB", flush=True)
    return figures


def _batch(triples: list[tuple], home: Path | None, repeat: int, source: Path, env: dict, work: Path) -> dict:
    """One ``python -m wcet --batch`` process for every ELF, against OTAWA run once per ELF, in turn: wall and
    CPU time (user + system) of each, per ELF, and the batch process's peak memory."""
    from wcet import otawa

    batch = work / "batch.txt"
    batch.write_text("".join(f"{elf} {entry} {facts}\n" for elf, entry, facts in triples))
    command = [sys.executable, "-m", "wcet", "--batch", str(batch)]
    printed = subprocess.run(command, cwd=source, env=env, capture_output=True, text=True, check=True).stdout
    cycles = [int(WCET_LINE.search(line).group(1)) for line in printed.splitlines()]
    if len(cycles) != len(triples):
        raise SystemExit(f"batch printed {printed!r}")
    ours, theirs = [], []
    for _ in range(repeat):
        ours.append(run_once(command, source, env))
        runs = [run_once(otawa.owcet_command(elf, entry, facts, "trivial", home=home), elf.parent, env)
                for elf, entry, facts in triples]
        theirs.append((sum(r[0] for r in runs), sum(r[1] for r in runs)))
    n = len(triples)
    figures = {"elfs": n, "wall_median_s": statistics.median(r[0] for r in ours),
               "cpu_median_s": statistics.median(r[1] for r in ours), "peak_rss_mb": max(r[2] for r in ours),
               "otawa_wall_median_s": statistics.median(r[0] for r in theirs),
               "otawa_cpu_median_s": statistics.median(r[1] for r in theirs), "wcet_cycles": cycles}
    for what in ("wall", "cpu"):
        figures[f"per_elf_{what}_s"] = figures[f"{what}_median_s"] / n
        figures[f"otawa_per_elf_{what}_s"] = figures[f"otawa_{what}_median_s"] / n
        figures[f"speedup_per_elf_{what}"] = figures[f"otawa_{what}_median_s"] / figures[f"{what}_median_s"]
    print(f"batch of {n} ELFs: python -m wcet --batch {figures['wall_median_s']:.2f} s, CPU "
          f"{figures['cpu_median_s']:.2f} s ({figures['per_elf_wall_s']:.3f} s per ELF, peak "
          f"{figures['peak_rss_mb']:.1f} MB); OTAWA {figures['otawa_wall_median_s']:.2f} s, CPU "
          f"{figures['otawa_cpu_median_s']:.2f} s ({figures['otawa_per_elf_wall_s']:.3f} s per ELF): "
          f"{figures['speedup_per_elf_wall']:.1f}x faster per ELF (CPU {figures['speedup_per_elf_cpu']:.1f}x)",
          flush=True)
    return figures


def _elf_line(row: dict) -> str:
    """One printed line: each tool's median (fastest) wall time and peak memory, and the ratios to OTAWA."""
    otawa = row["tools"].get("owcet")
    parts = []
    for name, figures in row["tools"].items():
        text = (f"{name} {figures['wall_median_s']:.2f} s ({figures['wall_min_s']:.2f}, CPU "
                f"{figures['cpu_median_s']:.2f}) {figures['peak_rss_mb']:.1f} MB")
        if otawa is not None and name != "owcet":
            text += (f" = {figures['wall_median_s'] / otawa['wall_median_s']:.1f}x, "
                     f"{figures['peak_rss_mb'] / otawa['peak_rss_mb']:.1f}x OTAWA")
        parts.append(text)
    cycles = {figures["wcet_cycles"] for figures in row["tools"].values()}
    agreement = f"WCET {cycles.pop():,}" if len(cycles) == 1 else f"WCETs DIFFER {sorted(cycles, key=str)}"
    return f"{row['model']:<11} {row['target']:<11} {row.get('variant', ''):<6} {agreement} | " + " | ".join(parts)


def _text_bytes(elf: Path) -> int:
    """The size of the ELF's ``.text`` section."""
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(".text")
        return section["sh_size"] if section is not None else 0


def plot(png: Path, files: list[Path]) -> None:
    """The scaling plot (module docstring) of the rows of campaign-mode result files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = []
    for path in files:
        report = json.loads(path.read_text())
        if report.get("schema") != "assay-benchmark-wcet/1":
            raise SystemExit(f"{path}: not a campaign-mode result file (schema assay-benchmark-wcet/1)")
        points += [(row["text_bytes"] / 2 ** 20, row["wcet_seconds"], f"{row['model']} {row['generator']}",
                    report["target"]) for row in report["rows"] if "text_bytes" in row]
    if not points:
        raise SystemExit("no rows with a .text size (re-run the campaign mode of this script)")
    slope = sum(x * y for x, y, _, _ in points) / sum(x * x for x, _, _, _ in points)  # seconds per MB, through 0
    figure, axes = plt.subplots(figsize=(7, 5))
    for generator, marker in (("assay-v2", "o"), ("assay-v3", "s"), ("synthetic", "^")):
        for target in sorted({t for *_, t in points}):  # one series per generator and target
            chosen = [(x, y) for x, y, label, t in points if label.endswith(generator) and t == target]
            if chosen:
                axes.scatter(*zip(*chosen), marker=marker, label=f"{generator}, {target}")
    for x, y, label, _ in points:
        axes.annotate(label.split()[0], (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    span = [min(x for x, _, _, _ in points), max(x for x, _, _, _ in points)]
    axes.plot(span, [slope * x for x in span], "k--", linewidth=1, label=f"{slope:.1f} s per MB of .text")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel(".text size (MB)")
    axes.set_ylabel("flow facts + WCET analysis (s)")
    axes.set_title(f"WCET analysis time against code size ({', '.join(sorted({t for *_, t in points}))})", fontsize=9)
    axes.legend()
    figure.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png, dpi=120)
    print(f"{len(points)} points, {slope:.2f} s per MB of .text; written: {png}")


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
    parser.add_argument("--elf-mode", action="store_true", help="time the ELF-mode commands side by side with OTAWA")
    parser.add_argument("--targets", default="cortex-m4f,arm7tdmi", help="with --elf-mode: comma-separated targets")
    parser.add_argument("--variants", default="keras,onnx", help="with --elf-mode: comma-separated variants")
    parser.add_argument("--repeat", type=int, default=5, help="with --elf-mode: measured runs per tool (default 5)")
    parser.add_argument("--source", type=Path, default=ROOT, help="with --elf-mode: the checkout whose code runs")
    parser.add_argument("--plot", nargs="+", type=Path, metavar=("PNG", "JSON"),
                        help="plot analysis time against .text size from campaign-mode result files")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plot:
        plot(args.plot[0], args.plot[1:])
        return
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
    if args.elf_mode:
        load = os.getloadavg()
        with tempfile.TemporaryDirectory() as tmp:
            rows, batch, floor = elf_mode(args.models.split(",") if args.models else ["acas-reg50", "lenet5"],
                                   args.targets.split(","), args.variants.split(","), args.repeat,
                                   args.source.resolve(), Path(tmp) / "work")
        path = Path("reports/benchmarks/wcet-elf.json")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"schema": "assay-benchmark-wcet-elf/1", "date": date.today().isoformat(),
                                    "machine": platform.platform(), "cpus": os.cpu_count(),
                                    "load_before": load, "load_after": os.getloadavg(),
                                    "source": str(args.source.resolve()), "repeat": args.repeat, "rows": rows,
                                    "batch": batch, "floor": floor},
                                   indent=1))
        print(f"load average {load[0]:.1f} before, {os.getloadavg()[0]:.1f} after; written: {path}")
        return
    default = ["lenet5", "cifarnet"] + (["alexnet", "vgg16"] if args.full else [])
    models = args.models.split(",") if args.models else default
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
            print(f"{model:<10} .text {row['text_bytes'] / 2 ** 10:7.0f} KiB | WCET {row['wcet_cycles']:>18,} cycles | "
                  f"flow facts {s['flowfacts']:6.2f} s + "
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
