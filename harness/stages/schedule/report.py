"""The schedule's Gantt chart (PNG) and HTML page, drawn from ``schedule.json`` alone."""

from __future__ import annotations

import base64
import html
from pathlib import Path

from harness.core.report import group_digits
from harness.stages.schedule.spec import SPEC



def load(path: Path) -> dict:
    return SPEC.read(path)


def gantt(data: dict, path: Path) -> None:
    """One lane per core: tasks as bars (copies of a duplicated node hatched), communications as red arrows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cores = data["schedule"]
    duplicated = {d["node"] for d in data["duplications"]}
    names = [n["node"] for n in data["nodes"]]
    colours = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(11, 1.0 + 0.8 * len(cores)))
    span = max(data["makespan"], 1)
    for lane in cores:
        y = lane["core"]
        for task in lane["tasks"]:
            width = task["end"] - task["start"]
            colour = colours(names.index(task["node"]) % 20) if task["node"] in names else "grey"
            ax.barh(y, max(width, span * 0.002), left=task["start"], height=0.6, color=colour, edgecolor="black",
                    linewidth=0.5, hatch="//" if task["node"] in duplicated else None)
            if width > span * 0.04:
                ax.text(task["start"] + width / 2, y, task["node"], ha="center", va="center", fontsize=7,
                        clip_on=True)
    for comm in data["communications"]:
        ax.annotate("", xy=(comm["end"], comm["dst_core"] - 0.3), xytext=(comm["start"], comm["src_core"] + 0.3
                                                                          if comm["dst_core"] > comm["src_core"]
                                                                          else comm["src_core"] - 0.3),
                    arrowprops={"arrowstyle": "->", "color": "red", "linewidth": 0.8})
    ax.set_yticks([lane["core"] for lane in cores], [f"core {lane['core']}" for lane in cores])
    ax.set_ylim(len(cores) - 0.5, -0.5)  # core 0 on top, every lane shown even when empty
    ax.set_xlabel(f"time [{'cycles' if data.get('target') else 'units'}]")
    optimal = {True: ", proved optimal", False: ", not proved optimal", None: ""}[data["optimal"]]
    ax.set_title(f"{data.get('model', 'DAG')}: {data['algorithm']} on {data['cores']} cores, makespan "
                 f"{group_digits(data['makespan'])} (speedup {data['speedup']:.3f}{optimal})", fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _rows(cells: list[list[object]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in cells)


def html_page(data: dict, png: Path) -> str:
    solver = data.get("solver") or {}
    summary = [["model", data["model"]], ["variant", data["variant"]], ["target", f"{data['target']} {data['opt']}"],
               ["timing model", data["timing"]], ["algorithm", data["algorithm"]], ["cores", data["cores"]],
               ["makespan [cycles]", group_digits(data["makespan"])],
               ["sequential [cycles]", group_digits(data["sequential"])], ["speedup (eq. 15)", f"{data['speedup']:.4f}"],
               ["optimal", data["optimal"]], ["valid (§2.3)", data["valid"]]]
    summary += [[f"solver {key}", value] for key, value in solver.items()]
    cost = data["communication_cost"]
    summary.append(["communication cost", f"{cost['model']}: {cost['formula']}"])
    summary += [[f"operators of {o['floats']} floats [cycles]", f"write {o['write_cycles']}, read {o['read_cycles']}"]
                for o in cost.get("operators", [])]
    summary.append(["WCET source", data["wcet"]["source"]])
    tasks = [[lane["core"], t["node"], group_digits(t["start"]), group_digits(t["end"])]
             for lane in data["schedule"] for t in lane["tasks"]]
    comms = [[c["from"], c["to"], f"{c['src_core']} → {c['dst_core']}", c["floats"], group_digits(c["start"]),
              group_digits(c["end"])] for c in data["communications"]]
    nodes = [[n["node"], group_digits(n["wcet_cycles"]), n["output_floats"]] for n in data["nodes"]]
    violations = "".join(f"<li>{html.escape(v)}</li>" for v in data["violations"])
    image = base64.b64encode(png.read_bytes()).decode()
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>Assay schedule: {html.escape(data['model'])}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1.5em}}
td,th{{border:1px solid #ccc;padding:3px 8px}}</style></head><body>
<h1>Schedule of {html.escape(data['model'])} on {data['cores']} cores</h1>
<table>{_rows(summary)}</table>
{f'<h2>Violations</h2><ul>{violations}</ul>' if violations else ''}
<p><img alt="Gantt chart" src="data:image/png;base64,{image}"></p>
<h2>Tasks</h2><table><tr><th>core</th><th>node</th><th>start</th><th>end</th></tr>{_rows(tasks)}</table>
<h2>Communications</h2><table><tr><th>from</th><th>to</th><th>cores</th><th>floats</th><th>start</th><th>end</th></tr>
{_rows(comms)}</table>
<h2>Nodes</h2><table><tr><th>node</th><th>WCET [cycles]</th><th>output floats</th></tr>{_rows(nodes)}</table>
</body></html>
"""


def write_schedule_report(path: Path, out_dir: Path) -> list[Path]:
    """Write gantt.png and schedule.html from ``path`` (a schedule.json)."""
    data = load(path)
    png, page = out_dir / "gantt.png", out_dir / "schedule.html"
    gantt(data, png)
    page.write_text(html_page(data, png))
    return [png, page]
