"""A fake installed distribution for the plugin and recipe tests: what `pip install` of a package that extends
Assay leaves in site-packages (its metadata, its entry points, its files), without pip or a network."""

from __future__ import annotations

from pathlib import Path


def install_distribution(site: Path, distribution: str, entry_points: dict[str, dict[str, str]],
                         files: dict[str, str]) -> Path:
    """``distribution`` 1.0 in the folder ``site`` (put it on PYTHONPATH): a ``.dist-info`` with METADATA and
    entry_points.txt (group -> name -> value), and ``files`` (path relative to ``site`` -> text)."""
    info = site / f"{distribution.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items()) + "\n"
        for group, entries in entry_points.items()))
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return site
