"""Benchmark: the mutation kill rate of the fixed tolerance against the derived one (issue 25, item 4).

For each model, ``assay mutate``'s own item function (``harness.stages.mutate.run.run_item``) runs twice on
assay-v2's code (one variant), with the same mutants (the same seeded sample, ``--max-mutants``) and the same
inputs: once with ``--tolerance fixed`` (|C - reference| <= atol + rtol |reference|) and once with
``--tolerance derived`` (|C - float64| <= the bound of a correct float32 implementation, and every layer within
its local bound where the manifest names the layers' buffers: ``assay mutate``'s layer-local verdict). It reports
per model: mutants, killed each way (in all and by the oracle; derived: how many by a layer's local bound alone),
weight mutants killed each way, the mutants one rule kills
and the other does not, and the derived bound's tightness on the clean code (bound / |C - float64|) and its
size against the fixed tolerance.

``--as-dir`` also judges the same C the way every third-party generator's is (issue 40): assay-v2's code copied
into a ``dir:`` folder whose ``assay.json`` lists its sources, its layers' output buffers (``layers``: the
layer-local verdict applies) and its data arrays (``symbols``: the weight mutants), with the order of accumulation
the code follows (form ``dir-declared``) or without it (``dir-undeclared``: the any-order bounds apply;
``harness.generators.generated.copy_as_prebuilt``). Each form is one row (column ``form``: ``assay-v2``,
``dir-declared``, ``dir-undeclared``); the forms' mutants are the same seeded ones when their rows have the same
``mutants_digest`` (the mutants' operators, places and changes).

Prints a table and writes reports/benchmarks/mutation_tolerance.json (rows of earlier runs of other models or
forms are kept, each with its own settings; ``--json`` another file). Not a test: it asserts nothing.

    python benchmarks/mutation_tolerance.py --models acas-reg50 [--variant keras] [--inputs 50]
        [--max-mutants N] [--input-sets uniform,corners] [--set-inputs 10] [--work DIR] [--no-detectability]
        [--as-dir none|declared|undeclared|all] [--dir-only]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shutil
import time
from datetime import date
from pathlib import Path

from harness.core.plan import Settings as PlanSettings, load_model
from harness.generators import get as get_generator
from harness.generators.generated import copy_as_prebuilt
from harness.stages.mutate import run as mutate
from harness.stages.mutate.spec import names

OUT = Path("reports/benchmarks/mutation_tolerance.json")
RULES = ("fixed", "derived")
GENERATED = "assay-v2"  # the form of the code as its generator hands it over (its full manifest)
DIR_FORMS = {"declared": "dir-declared", "undeclared": "dir-undeclared"}  # --as-dir -> form: copy_as_prebuilt


def run_rule(model: str, form: str, generator: str, rule: str, args: argparse.Namespace) -> dict:
    """One ``assay mutate`` item of ``model``'s code from ``generator`` (``form``), judged by ``rule``, recomputed
    (``redo``)."""
    settings = mutate.Settings(n_inputs=args.inputs, seeds=1, sanitize=0, max_mutants=args.max_mutants,
                               input_sets=names(args.input_sets), set_inputs=args.set_inputs, tolerance=rule,
                               redo=True, **({"work_dir": Path(args.work)} if args.work else {}))
    variants = [args.variant] if form == GENERATED else None  # a dir: folder has one variant, its own
    (item,) = mutate.plan([model], [generator], settings, variants).items
    store = mutate.open_store(Path(args.out_dir) / f"{model}-{form}-{rule}" / "mutation.json")
    start = time.perf_counter()
    record = mutate.run_item(item, settings, store)
    record["wall_seconds"] = time.perf_counter() - start
    return record


def generators(model: str, args: argparse.Namespace) -> dict[str, str]:
    """form -> the generator ``assay mutate`` gets: assay-v2, then a ``dir:`` folder of its code per ``--as-dir``
    form (generated once, under ``--out-dir``)."""
    forms = {"none": [], "all": list(DIR_FORMS)}.get(args.as_dir, [args.as_dir])
    found = {} if args.dir_only else {GENERATED: GENERATED}
    if forms:
        root = Path(args.out_dir).resolve() / f"{model}-dir"
        shutil.rmtree(root, ignore_errors=True)
        settings = PlanSettings(**({"work_dir": Path(args.work)} if args.work else {}))
        code = get_generator(GENERATED).generate(load_model(model, settings), args.variant, root / "generated")
        for kind in forms:
            folder = copy_as_prebuilt(code, root / DIR_FORMS[kind], declare_order=kind == "declared")
            found[DIR_FORMS[kind]] = f"dir:{folder}"
    return found


def killed(record: dict, oracle_only: bool = False) -> set[str]:
    return {m["id"] for m in record["mutants"] if m["status"] == "killed" and
            (not oracle_only or m["detected_by"] == "oracle")}


def killed_by_layers(record: dict) -> set[str]:
    """The mutants a layer's local bound killed: inside the end-to-end derived bound, outside a layer's own."""
    return {m["id"] for m in record["mutants"] if m["status"] == "killed" and m["detected_by"] == "oracle"
            and (m.get("layer_local") or {}).get("verdict") not in (None, "pass")}


def compare(model: str, form: str, records: dict[str, dict], args: argparse.Namespace) -> dict:
    """The row of one model's code in one form: both rules' counts, and the mutants one kills and the other does
    not."""
    fixed, derived = records["fixed"], records["derived"]
    row = {"model": model, "form": form, "variant": args.variant, "inputs": args.inputs, "input_sets": args.input_sets,
           "set_inputs": args.set_inputs, "max_mutants": args.max_mutants,
           "detectability_search": not args.no_detectability}
    if "mutants" not in fixed or "mutants" not in derived:
        return {**row, "error": {rule: records[rule].get("cause") for rule in RULES}}
    same = [(a["id"], a["description"]) for a in fixed["mutants"]] == \
        [(b["id"], b["description"]) for b in derived["mutants"]]
    by_id = {rule: {m["id"]: m for m in records[rule]["mutants"]} for rule in RULES}
    weights = {m["id"] for m in fixed["mutants"] if mutate.is_weight(m)}

    def only(first: str, second: str) -> list[dict]:
        ids = sorted(killed(records[first]) - killed(records[second]))
        return [{"id": i, "operator": by_id[first][i]["operator"], "description": by_id[first][i]["description"],
                 "cause": by_id[first][i]["cause"],  # the killer's, and the survivor's figures on every input:
                 "max_abs_error": by_id[second][i]["max_abs_error"], "effect": by_id[second][i]["effect"],
                 "survivor_class": by_id[second][i]["class"]} for i in ids]

    listed = [(m["id"], m["operator"], m["file"], m["line"], m["description"]) for m in fixed["mutants"]]
    return {**row, "same_mutants": same, "mutants_digest": hashlib.sha256(json.dumps(listed).encode()).hexdigest()[:16],
            "inputs_judged": fixed["inputs_judged"], "mutants": len(fixed["mutants"]),
            "weight_mutants": len(weights),
            **{f"{rule}_{what}": value for rule in RULES for what, value in (
                ("rule", records[rule]["tolerance_rule"]),
                ("killed", len(killed(records[rule]))),
                ("killed_by_oracle", len(killed(records[rule], True))),
                ("weights_killed", len(killed(records[rule]) & weights)),
                ("weights_killed_by_operator", {op: sum(by_id[rule][i]["operator"] == op for i in
                                                        killed(records[rule]) & weights)
                                                for op in sorted({by_id[rule][i]["operator"] for i in weights})}),
                ("survived", records[rule]["summary"]["survived"]),
                ("equivalent", records[rule]["summary"]["equivalent"]),
                ("stillborn", records[rule]["summary"]["stillborn"]),
                ("seconds", records[rule]["wall_seconds"]))},
            "derived_killed_by_layers": len(killed_by_layers(derived)),
            "derived_layer_local": {k: (derived["tolerance_rule"].get("layer_local") or {}).get(k)
                                    for k in ("judged", "reason", "accumulation", "margin")},
            "killed_by_fixed_only": only("fixed", "derived"), "killed_by_derived_only": only("derived", "fixed"),
            "fixed_tolerance": {"atol": fixed["tolerance"], "rtol": fixed["rtol"]}}


def form_of(row: dict) -> str:
    """The row's form; rows written before forms existed are assay-v2's."""
    return row.get("form", GENERATED)


def table(rows: list[dict]) -> str:
    lines = ["| model | form | inputs judged | mutants (weights) | killed, fixed (oracle) | "
             "killed, derived (oracle; layer-local) | weights killed, fixed / derived | killed by fixed only (of "
             "which flagged for review by the default verdict) | "
             "killed by derived only | clean tightness | largest bound |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {form_of(r)} | error: {r['error']} | | | | | | | | |")
            continue
        rule = r["derived_rule"]
        derived_figures = (f"{rule['tightness']:.3g} | {rule['bound']:.2e}" if rule["rule"] == "derived"
                           else f"fallback: {rule['fallback']} | -")
        lines.append(f"| {r['model']} | {form_of(r)} | {r['inputs_judged']} | {r['mutants']} ({r['weight_mutants']}) | "
                     f"{r['fixed_killed']} ({r['fixed_killed_by_oracle']}) | "
                     f"{r['derived_killed']} ({r['derived_killed_by_oracle']}; "
                     f"{r.get('derived_killed_by_layers', '-')}) | "
                     f"{r['fixed_weights_killed']} / {r['derived_weights_killed']} | "
                     f"{len(r['killed_by_fixed_only'])} ({_reviewed(r['killed_by_fixed_only'])}) | "
                     f"{len(r['killed_by_derived_only'])} | {derived_figures} |")
    return "\n".join(lines)


def _reviewed(mutants: list[dict]) -> int:
    """How many of the mutants the fixed rule alone kills the derived rule classes ``review`` (the default verdict's
    review line names them; a row written before the class existed says ``tolerance`` for them)."""
    return sum(m["survivor_class"] == mutate.REVIEW for m in mutants)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="acas-reg50,lenet5,cifarnet")
    parser.add_argument("--variant", default="keras")
    parser.add_argument("--inputs", type=int, default=50)
    parser.add_argument("--max-mutants", type=int, default=None)
    parser.add_argument("--input-sets", default="uniform,corners")
    parser.add_argument("--set-inputs", type=int, default=10)
    parser.add_argument("--work", default=None, help="work folder (default: assay's)")
    parser.add_argument("--no-detectability", action="store_true",
                        help="skip the weight mutants' detectability search (harness.stages.mutate.detect): it "
                             "changes no mutant's status, and on cifarnet it takes tens of minutes per rule")
    parser.add_argument("--as-dir", choices=("none", *DIR_FORMS, "all"), default="none",
                        help="also judge assay-v2's code copied into a dir: folder whose assay.json declares its "
                             "order of accumulation (declared), does not (undeclared), or both (all)")
    parser.add_argument("--dir-only", action="store_true", help="only the --as-dir forms, not assay-v2's own")
    parser.add_argument("--out-dir", default="reports/benchmarks/mutation_tolerance")
    parser.add_argument("--json", default=str(OUT), help="the rows' file (default %(default)s), e.g. apart for a "
                                                        "short run that must not replace a model's row")
    args = parser.parse_args()
    if args.no_detectability:
        mutate.detect.annotate = lambda *_args, **_kwargs: {}  # no witnesses: nothing to confirm either
    measured = {}
    for model in names(args.models):
        for form, generator in generators(model, args).items():
            records = {rule: run_rule(model, form, generator, rule, args) for rule in RULES}
            measured[model, form] = {**compare(model, form, records, args), "date": date.today().isoformat()}
            print(table([measured[model, form]]), flush=True)
    # read last: another invocation (other models) may have written its rows meanwhile
    out = Path(args.json)
    rows = {(r["model"], form_of(r)): r for r in (json.loads(out.read_text())["rows"] if out.is_file() else [])} \
        | measured
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}",
                               "rows": list(rows.values())}, indent=1, default=str) + "\n")
    print(table(list(rows.values())))
    for r in rows.values():
        for first, second in (("fixed", "derived"), ("derived", "fixed")):
            for m in r.get(f"killed_by_{first}_only", []):
                print(f"{r['model']} ({form_of(r)}): {m['id']} killed by {first}, survives {second}: {m['operator']} "
                      f"{m['description']} (|C - reference| {m['max_abs_error']})")


if __name__ == "__main__":
    main()
