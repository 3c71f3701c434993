"""Benchmark: the layer-local derived verdict against the end-to-end one and the fixed tolerance (issue 40, item 1).

For each model, assay-v2's code (one variant) is copied into ``dir:`` folders, once as generated (its manifest
declares its order of accumulation) and once with the declaration removed (the any-order bound, what a third-party
generator gets), and each folder is judged by ``assay semantic --tolerance derived``'s own item function
(``harness.stages.semantic.run.run_item``) on each seed: the record's fixed verdict, end-to-end derived verdict and
layer-local verdict, with their figures. Clean code gives the false alarms (any verdict but pass); ``--weights``
plants weight mutants (``SYMBOL[INDEX]`` scaled by 1 + ``--relative``, as ``assay mutate``'s weight operator does)
and gives which rule kills each. Prints a table and writes reports/benchmarks/layer_local.json (rows of other
models, mutants, seeds and input counts kept). Not a test: it asserts nothing.

    python benchmarks/layer_local.py --models cifarnet --inputs 30 --seeds 0 \\
        --weights cifarnet_conv3_bias[40],cifarnet_conv3_bias[45]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shutil
import time
from datetime import date
from pathlib import Path

import numpy as np

from harness.core.plan import Settings as PlanSettings, load_model
from harness.core.results import ResultStore
from harness.generators import get as get_generator
from harness.stages.mutate import operators
from harness.stages.semantic import run as campaign

OUT = Path("reports/benchmarks/layer_local.json")


def folders(model: str, variant: str, work: Path, weight: str | None, relative: float) -> dict[str, Path]:
    """The code as generated (``declared``) and without its declaration (``any``), with ``weight`` mutated."""
    code = get_generator("assay-v2").generate(load_model(model, PlanSettings(work_dir=work / "work")), variant,
                                              work / "generated")
    made = {}
    for kind in ("declared", "any"):
        folder = work / f"{kind}-{weight or 'clean'}"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(code.directory, folder)
        if weight:
            symbol, index = re.fullmatch(r"(\w+)\[(\d+)\]", weight).groups()
            path = next(folder / s for s in code.manifest["sources"]
                        if operators.array_numbers((folder / s).read_text(), symbol))
            text = path.read_text()
            number = operators.array_numbers(text, symbol)[int(index)]
            changed = np.float32(float(number.group(0).rstrip("fF")) * (1 + relative))
            path.write_text(text[:number.start()] + f"{float(changed)!r}f" + text[number.end():])
        if kind == "any":
            manifest = json.loads((folder / "manifest.json").read_text())
            del manifest["accumulation"]
            (folder / "manifest.json").write_text(json.dumps(manifest))
        made[kind] = folder
    return made


def judged(model: str, folder: Path, seed: int, args: argparse.Namespace, work: Path) -> dict:
    """One record of ``folder``'s C on ``seed``: the three verdicts and their figures."""
    settings = campaign.Settings(n_inputs=args.inputs, seed=seed, work_dir=work / "work", tolerance="derived",
                                 sanitize=0, redo=True)
    plan = campaign.plan([model], [f"dir:{folder}"], ["keras"], ["host"], settings)
    start = time.perf_counter()
    (record,) = campaign.run_item(plan.items[0], settings, ResultStore(work / "out" / "results.json"))
    layers = record.get("layer_local") or {}
    derived = record.get("derived") or {}
    return {"verdict": record["verdict"], "fixed": derived.get("fixed_verdict"), "end_to_end": derived.get("verdict"),
            "end_to_end_bound": derived.get("bound"), "c_distance": derived.get("c_distance"),
            "end_to_end_tightness": derived.get("tightness"), "layer_local": layers.get("verdict"),
            "layer_margin": layers.get("margin"), "first_failing": layers.get("first_failing"),
            "cause": record.get("cause"), "max_abs_error": record.get("max_abs_error"),
            "layer_local_seconds": record["timings"].get("layer_local_s"), "bound_seconds":
                record["timings"].get("bound_s"), "seconds": time.perf_counter() - start,
            "layers": [{k: row.get(k) for k in ("layer", "judged", "c_distance", "bound", "margin")}
                       for row in layers.get("layers", [])]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="acas-reg50,lenet5")
    parser.add_argument("--variant", default="keras")
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--weights", default="", help="comma-separated SYMBOL[INDEX] to mutate (default: none)")
    parser.add_argument("--relative", type=float, default=1e-3)
    parser.add_argument("--work", default="/tmp/assay-layer-local")
    args = parser.parse_args()
    rows = []
    for model in args.models.split(","):
        for weight in [None, *filter(None, args.weights.split(","))]:
            work = Path(args.work) / model
            for kind, folder in folders(model, args.variant, work, weight, args.relative).items():
                for seed in map(int, args.seeds.split(",")):
                    row = {"model": model, "variant": args.variant, "code": kind, "mutant": weight,
                           "relative": args.relative if weight else None, "seed": seed, "inputs": args.inputs,
                           **judged(model, folder, seed, args, work)}
                    rows.append(row)
                    print(f"{model} {kind:8} {weight or 'clean':28} seed {seed}: {row['verdict']:5} fixed "
                          f"{row['fixed']}, end-to-end {row['end_to_end']} (bound {row['end_to_end_bound']:.2e}), "
                          f"layer-local {row['layer_local']} (margin {row['layer_margin']}) "
                          f"{row['first_failing'] or ''} [{row['seconds']:.0f} s, layer-local "
                          f"{row['layer_local_seconds']:.0f} s]", flush=True)
    key = ("model", "variant", "code", "mutant", "relative", "seed", "inputs")
    done = {tuple(r[k] for k in key) for r in rows}
    kept = [r for r in (json.loads(OUT.read_text())["rows"] if OUT.is_file() else [])
            if tuple(r.get(k) for k in key) not in done]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
                               "date": date.today().isoformat(), "rows": kept + rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
