"""Helpers every stage's report shares: the order of models in a table, number formatting, the configuration
the records were computed on, the records a result file holds as superseded (``harness.core.results``)."""

from __future__ import annotations

from collections.abc import Sequence

from harness.core.results import SOURCE
from harness.models import zoo

_LISTED = 5  # differences from the tested configuration a report line lists


def model_order(records: list[dict]) -> list[str]:
    """The models present in ``records``: zoo ones in the paper's order, then the others by name."""
    known = zoo.names()
    present = {r["model"] for r in records}
    return [m for m in known if m in present] + sorted(present - set(known))


def group_digits(number: float) -> str:
    """Thousands separated by thin spaces, as the paper prints cycles (243 195)."""
    text = f"{number:,.0f}" if float(number).is_integer() else f"{number:,.1f}"
    return text.replace(",", "\u2009")


def superseded_count(entries: Sequence[dict]) -> int:
    """How many records the ``superseded`` entries of a result file stand for (``harness.core.results``)."""
    return sum(entry["count"] for entry in entries)


def superseded_lines(entries: Sequence[dict]) -> list[str]:
    """One line per earlier content of a model file whose records a run on another content superseded: the path as
    the user gave it, both contents' SHA-256 (the first 12 digits), the verdicts no longer judged."""
    def content(digest: str | None) -> str:
        return f"SHA-256 {digest[:12]}" if digest else "no readable file"

    return [f"{entry['model']}: {entry['count']} records of its earlier content ({content(entry[SOURCE])}; "
            + ", ".join(f"{count} {verdict}" for verdict, count in sorted(entry["verdicts"].items()))
            + f") superseded at {entry['superseded_at']} by a run on {content(entry['superseded_by'])}; "
            + ("kept whole" if "records" in entry else "counted") + " in the results file's superseded list, not judged"
            for entry in entries]


def configuration_lines(records: list[dict]) -> list[str]:
    """One line per configuration the records say they ran on (their provenance, ``assay doctor``): the verdict,
    the differences from the tested configuration and which Assay; none for records without it."""
    seen: dict[str, None] = {}
    for record in records:
        provenance = record.get("provenance") or {}
        configuration, assay = provenance.get("configuration"), provenance.get("assay") or {}
        if not configuration:
            continue
        which = (f"Assay {assay.get('version')}" + (f" at commit {assay['commit'][:12]}" if assay.get("commit") else "")
                 + (" with changes" if assay.get("dirty") else "")
                 + (f", sources {assay['sources_sha256'][:12]}" if assay.get("sources_sha256") else ""))
        differences = configuration.get("differences") or []
        listed = "; ".join(differences[:_LISTED]) + (f"; {len(differences) - _LISTED} more" if
                                                      len(differences) > _LISTED else "")
        state = ("the tested configuration" if configuration.get("verdict") == "tested" else
                 f"an untested configuration ({len(differences)} differences: {listed})")
        seen.setdefault(f"Configuration: {which}, on {state} (assay doctor, docs/configuration.md).")
    return list(seen)
