"""``mutation.md``: the mutation analysis of each item, from ``mutation.json`` alone."""

from __future__ import annotations

from pathlib import Path

from harness.stages.mutate.run import KILL_TARGET, is_weight, open_store

CLASSES = {"not_reached": "no output bit differs from the clean code's on any input (not reached by the "
                          "input domain, or equivalent without a rule)",
           "review": "within the derived bound, outside the fixed tolerance on some input: the default verdict of assay "
                     "semantic passes it with a review line",
           "below_precision": "outputs differ, the error is no larger than the clean code's own",
           "tolerance": "farther from the reference than the clean code, within the tolerance",
           "probably_equivalent": "its first layer output after the mutation is the clean code's, bit for bit, on "
                                  "every input (weak mutation; the whole network not run)"}


def _error(value: float | None) -> str:
    return "-" if value is None else f"{value:.2e}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2%}"


def _bounds(clean: dict) -> str:
    found = clean.get("bounds")
    if found is None:
        return "not run"
    return (f"{len(found['violations'])} violations ({'; '.join(found['violations'])})" if found["violations"]
            else "no violation") + f", {found['checked']} subscripts checked, {found['unchecked']} not decidable"


def _rule(record: dict) -> str:
    """The oracle's rule of a record (``run.Rule``; a record made before ``--tolerance`` existed: fixed)."""
    rule = record.get("tolerance_rule") or {"rule": "fixed"}
    if rule["rule"].startswith("integer-"):
        return (f"bit for bit against the integer arbiter under the requantization rule the code declares "
                f"({rule['rule']}: bound 0, the clean code {_error(rule['c_distance'])} from it; a quantized model)")
    if rule["rule"] == "derived":
        return (f"the derived rule |C - float64| <= bound (largest bound {_error(rule['bound'])}; the clean code "
                f"{_error(rule['c_distance'])} from float64, tightness {rule['tightness']:.3g})" + _layers(rule))
    return (f"tolerance atol {record['tolerance']:g} + rtol {record['rtol']:g}"
            + (f" (derived asked for; {rule['fallback']})" if rule.get("fallback") else ""))


def _layers(rule: dict) -> str:
    """The layer-local verdict's part of the rule (``run._LayerCheck``; a record made before it: none)."""
    local = rule.get("layer_local")
    if not local:
        return ""
    if not local.get("judged"):
        return f"; not judged layer by layer: {local.get('reason')}"
    margin = local.get("margin")
    return (f"; and every layer within its local bound ({local['accumulation']} order; the clean code's smallest "
            f"margin {'-' if margin is None else f'{margin:.3g}'} on {local['inputs']} inputs), checked on the "
            f"mutants this rule leaves alive")


def _detectability(record: dict) -> list[str]:
    """The weight mutants' detectability (``detect``): the figures, then every weight mutant with its witness."""
    w = record["summary"]["weights"]
    if not any(is_weight(m) for m in record["mutants"]):  # say why: a dir: folder's assay.json may name no array
        return ["No weight mutants: the code's manifest names no data array initialised in its sources "
                "(`symbols.data`; a `dir:` folder's `assay.json` may name them, docs/manifest.md), or "
                "`--max-mutants` sampled none.", ""]
    if not w["mutants"]:
        return []
    lines = [f"Weight mutants: {w['mutants']}; detectable {w['detectable']} (an input of the domain, found by the "
             f"float64 search apart from the test inputs, moves an output beyond the tolerance by more than twice "
             f"the rounding bound, or the mutant's C run on that input fails the oracle), killed by the test inputs "
             f"{w['detectable_killed']} (adequacy "
             f"{_rate(w['adequacy'])}); detectable survivors: {', '.join(w['detectable_survivors']) or 'none'}; "
             f"survivors beyond the tolerance at the witness but within the rounding margin (to review): "
             f"{', '.join(w['review_survivors']) or 'none'}; survivors no input was found to detect (not a defect of "
             f"the tests): {w['undetectable_survivors']}; killed without a witness found: "
             f"{w['killed_not_found_detectable']}; undecided: survivors "
             f"{', '.join(w['undecided_survivors']) or 'none'}, killed {w['undecided_killed']}.", "",
             "| mutant | status | change | initialiser[element] | detectable | largest change found | excess over "
             "tolerance | rounding margin | witness (SHA-256 of its float32 bytes) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for m in record["mutants"]:
        d = m.get("detectability")
        if d is None:
            continue
        if "dtype" in m["weight"]:  # an integer constant: run on the domain's points against the clean code
            found = "yes" if d["detectable"] else "no"
            lines.append(f"| {m['id']} | {m['status']} | {m['description']} | {m['weight']['symbol']}"
                         f"[{m['weight']['index']}] | {found}: {d.get('confirmed_by') or d.get('reason')} | - | - | "
                         f"- (exact rule) | {d.get('witness_sha256', '-')[:16]} |")
            continue
        if not d["decided"] or "witness_sha256" not in d:
            lines.append(f"| {m['id']} | {m['status']} | {m['description']} | - | "
                         f"{'undecided' if not d['decided'] else 'no'}: {d['reason']} | - | - | - | - |")
            continue
        verdict = ("yes (its C fails at the witness)" if d.get("confirmed_by") else "yes") if d["detectable"] \
            else "review" if d["beyond_tolerance"] else "no"
        lines.append(f"| {m['id']} | {m['status']} | {m['description']} | {d['initialiser']}{d['element']} | "
                     f"{verdict} | {_error(d['difference'])} | {_error(d['excess_over_tolerance'])} | "
                     f"{_error(d['margin'])} ({d['margin_from']}) | {d['witness_sha256'][:16]} |")
    return lines + [""]


def write_mutation_report(results: Path, out: Path) -> list[Path]:
    records = open_store(results).records()
    # no wall-clock seconds here (they stay in mutation.json's records): an evidence package archives this report
    # and must rebuild byte for byte
    lines = ["# Mutation analysis: the oracle's power", "",
             f"Seeded mutants of the generated C, each built with the host profile and judged by the oracle "
             f"(and, when it survives, by AddressSanitizer and UBSan). Target: at least {KILL_TARGET:.0%} of the "
             f"non-equivalent code mutants killed, every detectable weight mutant killed, no false alarm "
             f"on the unmutated code. A weight mutant is detectable when an input of the domain, searched in "
             f"float64 apart from the test inputs, moves an output beyond the tolerance by more than the rounding "
             f"margin; adequacy is the share of the detectable ones the test inputs kill. A quantized model's "
             f"integer constants that are not counted in the code kill rate (multipliers, biases, int8 weights) are "
             f"judged like weights: a survivor is detectable when its C, run on points of the domain apart from the "
             f"test inputs, differs from the clean code and fails the exact integer rule there.", "",
             "| model | generator | variant | inputs (seed) | reference | mutants | killed | survived | stillborn "
             "| equivalent | code kill rate | detectable weights killed (adequacy) | false alarms / seeds | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        if "summary" not in r:
            lines.append(f"| {r['model']} | {r['generator']} | {r['variant']} | {r['n_inputs']} ({r['seed']}) | - | "
                         f"- | - | - | - | - | - | - | - | {r['verdict']}: {r['cause']} |")
            continue
        s = r["summary"]
        lines.append(f"| {r['model']} | {r['generator']} | {r['variant']} | {r['n_inputs']} ({r['seed']}) | "
                     f"{r['reference']} | {s['mutants']} | {s['killed']} | {s['survived']} | {s['stillborn']} | "
                     f"{s['equivalent']} | {_rate(s['code']['kill_rate'])} | "
                     f"{s['weights']['detectable_killed']} of {s['weights']['detectable']} "
                     f"({_rate(s['weights']['adequacy'])}) | "
                     f"{s['false_alarms']} / {r['seeds']} | {r['verdict']} |")
    for r in records:
        if "summary" not in r:
            continue
        s = r["summary"]
        lines += ["", f"## {r['model']} / {r['generator']} / {r['variant']}", "",
                  f"{r['n_inputs']} uniform inputs, seed {r['seed']}"
                  + (f", then the input sets {', '.join(k for k in r['input_sets'] if k != 'uniform')} "
                     f"({r['set_inputs']} inputs each; {r['inputs_judged']} judged in all)"
                     if len(r.get("input_sets", [])) > 1 else "")
                  + "".join(f"; set {k} left out: {v}" for k, v in r.get("input_sets_left_out", {}).items())
                  + f", reference {r['reference']}, {_rule(r)}; the clean code's largest error "
                  f"{_error(r['clean']['max_abs_error'])}; under the sanitizers ({r['sanitized_inputs']} inputs): "
                  f"{r['clean']['sanitizer'] or 'no report'}; static bounds check: {_bounds(r['clean'])}. "
                  f"Killed by the oracle {s['detected_by']['oracle']}, "
                  f"by the runner (crash, hang, guard word) {s['detected_by']['runner']}, by the sanitizers "
                  f"{s['detected_by']['sanitizer']}, by the static bounds check {s['detected_by'].get('bounds', 0)}. "
                  f"Judged equivalent, by rule: "
                  + (", ".join(f"{k} {v}" for k, v in s.get("equivalent_by_rule", {}).items()) or "none")
                  + f". Verdict: {r['verdict']}"
                  + (f" ({r['cause']})" if r["cause"] else "") + ".", "",
                  "| operator | killed | survived | stillborn | equivalent |", "|---|---|---|---|---|"]
        lines += [f"| {op} | {c['killed']} | {c['survived']} | {c['stillborn']} | {c['equivalent']} |"
                  for op, c in s["by_operator"].items()]
        lines += ["", "Survivors by class: " + ", ".join(f"{name} {s['survivor_classes'].get(name, 0)} ({text})"
                                                         for name, text in CLASSES.items()) + ".", ""]
        lines += _detectability(r)
        survivors = [m for m in r["mutants"] if m["status"] == "survived"]
        if survivors:
            lines += ["| mutant | operator | line | class | largest error | effect vs clean | change |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {m['id']} | {m['operator']} | {m['file']}:{m['line']} | {m['class']} | "
                      f"{_error(m['max_abs_error'])} | {_error(m['effect'])} | {m['description']} |"
                      for m in survivors]
            lines += ["", "Diffs of the survivors:", ""]
            for m in survivors:
                lines += [f"{m['id']}:", "```diff", m["diff"].rstrip("\n"), "```"]
        equivalent = [m for m in r["mutants"] if m["status"] == "equivalent"]
        if equivalent:
            lines += ["", "Judged equivalent (by rule; each also run, and it passed):", ""]
            rules: dict[str, list[str]] = {}
            for m in equivalent:
                rules.setdefault(m["equivalent_rule"], []).append(f"{m['id']} ({m['file']}:{m['line']})")
            lines += [f"- {rule}: {', '.join(ids)}" for rule, ids in rules.items()]
        lines += ["", "False alarms on the unmutated code: " + ", ".join(
            f"seed {a['seed']} {a['verdict']} ({_error(a['max_abs_error'])})" for a in r["false_alarms"]) + "."]
    path = Path(out) / "mutation.md"
    path.write_text("\n".join(lines) + "\n")
    return [path]
