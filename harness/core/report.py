"""Helpers every stage's report shares: the order of models in a table, number formatting."""

from __future__ import annotations

from harness.models import zoo


def model_order(records: list[dict]) -> list[str]:
    """The models present in ``records``: zoo ones in the paper's order, then the others by name."""
    known = zoo.names()
    present = {r["model"] for r in records}
    return [m for m in known if m in present] + sorted(present - set(known))


def group_digits(number: float) -> str:
    """Thousands separated by thin spaces, as the paper prints cycles (243 195)."""
    text = f"{number:,.0f}" if float(number).is_integer() else f"{number:,.1f}"
    return text.replace(",", "\u2009")

