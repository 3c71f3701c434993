"""``pareto.md`` and ``index.html`` from an ``explore.json`` alone: the configurations table, the fronts,
and plots in the style of OpTC's Figures 2 to 5 (sensitivities; error against cycles, ROM and RAM, one
point per configuration numbered by j, the non-dominated ones highlighted, budgets as vertical lines)."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from harness.core.oracle import PASS
from harness.core.report import group_digits
from harness.stages.explore.spec import SPEC

PANELS = (("max_measured_cycles", "max measured cycles"), ("wcet_cycles", "WCET (cycles)"),
          ("rom", "ROM (bytes)"), ("ram", "RAM (bytes)"))
LIMITS = {"rom": "rom_limit", "ram": "ram_limit"}


def read(path: Path) -> dict:
    return SPEC.read(path)


def _number(value) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if isinstance(value, float) else group_digits(value)


def _units(configuration: dict) -> str:
    return " ".join(str(count) for count in configuration["units"].values())


def markdown(document: dict) -> str:
    settings, configurations = document["settings"], document["configurations"]
    metric = document["metric"]
    layers = " ".join(configuration_layer for configuration_layer in configurations[0]["units"])
    out = [f"# Design-space exploration: {document['model']}", "",
           f"Global weighted pruning (OpTC Algorithm 2), J = {settings['steps']}, target {settings['target']} "
           f"{settings['opt']}, timing model {settings['timing']}, generator {settings['generator']} "
           f"({settings['variant']}), retraining {settings['retrain_epochs']} epochs, seed {settings['seed']}. "
           f"Quality: {metric} on the held-out split (unpruned {document['baseline_quality']:.4f}; "
           f"sensitivity threshold T = {document['threshold']:.4f}). ROM = .text + .rodata + .data of the "
           "inference; RAM = .data + .bss + static stack bound. * = non-dominated over (error, ROM, RAM, WCET) "
           "among configurations whose C passed the semantic oracle.", "",
           "## Sensitivities (Algorithm 1)", "",
           "| layer | units | p_max | sensitivity | p_init |", "|---|---:|---:|---:|---:|"]
    for s in document["sensitivities"]:
        p_max = f"{s['p_max']:.1f}" + ("" if s["dropped"] else " (never dropped)")
        out.append(f"| {s['layer']} | {s['units']} | {p_max} | {s['sensitivity']:.1f} | "
                   f"{document['p_init'][s['layer']]:.3f} |")
    limits = [f"{name} {settings[key]} bytes" for name, key in (("RAM", "ram_limit"), ("ROM", "rom_limit"))
              if settings[key]]
    out += ["", "## Configurations", "",
            f"| j | units ({layers}) | parameters | {metric} | ROM | RAM | max measured cycles | WCET cycles | "
            "semantic | fits |", "|---:|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for c in configurations:
        fits = "–" if c["fits"] is None or not limits else ("yes" if c["fits"] else "no")
        out.append(f"| {c['j']}{' *' if c['pareto'] else ''} | {_units(c)} | {_number(c['parameters'])} | "
                   f"{c['quality']:.4f} | {_number(c['rom'])} | {_number(c['ram'])} | "
                   f"{_number(c['max_measured_cycles'])} | {_number(c['wcet_cycles'])} | {c['verdict']} | {fits} |")
    out += ["", "## Non-dominated configurations", ""]
    out += [f"- over {axes.replace('/', ', ')}: {', '.join(f'j={j}' for j in js) or 'none'}"
            for axes, js in document["fronts"].items()]
    if limits:
        fitting = [c["j"] for c in configurations if c["pareto_fitting"]]
        out.append(f"- within the budgets ({', '.join(limits)}): {', '.join(f'j={j}' for j in fitting) or 'none'}")
    problems = [f"- j={c['j']}: {cause}" for c in configurations for cause in c["causes"]]
    if problems:
        out += ["", "## Problems", "", *problems]
    seconds = document["seconds"]
    out += ["", f"Time: {seconds['total_s']:.0f} s in all, {seconds['per_configuration_s']:.1f} s per "
                f"configuration (sensitivity analysis {seconds['sensitivity_s']:.0f} s, pruning and retraining "
                f"{seconds['pruning_s']:.0f} s, stages {seconds['stages_s']:.0f} s).", "",
            "Stage commands:", ""]
    out += [f"- `{' '.join(stage['command'])}` (exit {stage['exit']}, {stage['seconds']:.0f} s)"
            for stage in document["stages"].values()]
    return "\n".join(out) + "\n"


def plot_fronts(document: dict, path: Path) -> None:
    """Error against measured cycles, WCET, ROM and RAM, as OpTC Figures 3 to 5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configurations = document["configurations"]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.8), sharey=True)
    for ax, (field, label) in zip(axes, PANELS):
        for c in configurations:
            if c[field] is None:
                continue
            colour = "tab:red" if c["pareto"] else "tab:blue" if c["j"] == 0 else "tab:gray"
            marker = "o" if c["verdict"] == PASS else "x"
            ax.scatter(c[field], c["quality"], color=colour, marker=marker, zorder=3)
            ax.annotate(str(c["j"]), (c[field], c["quality"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=8)
        limit = document["settings"].get(LIMITS.get(field, ""), None)
        largest = max((c[field] for c in configurations if c[field] is not None), default=0)
        if limit and limit <= 2 * largest:  # as Figure 4's vertical line
            ax.axvline(limit, color="black", linewidth=1)
            ax.text(limit, ax.get_ylim()[1], f" limit {limit}", fontsize=7, va="top")
        elif limit:  # far off the scale: drawing it would squash every point to one side
            label += f"; limit {group_digits(limit)}, off scale"
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel(f"error ({document['metric']})")
    fig.suptitle(f"{document['model']}: configurations j = 0..{document['settings']['steps']} "
                 "(red: non-dominated over error, ROM, RAM, WCET; blue: unpruned; x: semantic verdict not pass)",
                 fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def plot_sensitivities(document: dict, path: Path) -> None:
    """Per-layer sensitivities, as OpTC Figure 2."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    found = document["sensitivities"]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(found) + 1.5), 3.2))
    ax.bar([s["layer"] for s in found], [s["sensitivity"] for s in found], color="tab:blue")
    ax.set_ylim(0, 1)
    ax.set_ylabel("sensitivity s = 1 - p_max")
    ax.set_title(f"{document['model']}: pruning sensitivities", fontsize=9)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def html_page(document: dict, table: str, pictures: list[Path]) -> str:
    images = "".join(f"<p><img alt='{html.escape(p.stem)}' src='data:image/png;base64,"
                     f"{base64.b64encode(p.read_bytes()).decode()}'></p>" for p in pictures)
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Assay exploration {html.escape(document['model'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style></head><body>
<h1>Design-space exploration: {html.escape(document['model'])}</h1>{images}<pre>{html.escape(table)}</pre></body></html>
"""


def write_explore_report(explore_json: Path, out_dir: Path) -> list[Path]:
    """Write pareto.md, fronts.png, sensitivities.png and index.html from ``explore_json``."""
    document = read(explore_json)
    out_dir.mkdir(parents=True, exist_ok=True)
    table, fronts_png, sensitivities_png, page = (out_dir / "pareto.md", out_dir / "fronts.png",
                                                  out_dir / "sensitivities.png", out_dir / "index.html")
    text = markdown(document)
    table.write_text(text)
    plot_fronts(document, fronts_png)
    plot_sensitivities(document, sensitivities_png)
    page.write_text(html_page(document, text, [fronts_png, sensitivities_png]))
    return [table, fronts_png, sensitivities_png, page]
