"""Running a stage's items with progress on stderr: the loop every campaign command shares.

Long campaigns show a progress bar naming the item being run; each item that
did not pass gets its cause lines printed as soon as it is known (above the
bar), and the command ends with one summary line and the reports written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from harness.core.plan import Item, ModelItem, Plan


def run_items(items: Iterable[Item | ModelItem], run: Callable[[Item | ModelItem], tuple[bool, list[str]]],
              quiet: bool = False) -> int:
    """Run each item; ``run`` returns whether it passed and the lines to show (causes, warnings).

    Returns how many items failed.
    """
    from tqdm import tqdm

    failed, items = 0, list(items)
    # no bar without items: a per-model stage whose every model is bad input says so in one line (finish)
    with tqdm(items, unit="item", file=sys.stderr, disable=quiet or not items) as progress:
        for item in progress:
            progress.set_description(item.id)
            passed, lines = run(item)
            failed += not passed
            for line in dict.fromkeys(lines):  # one cause once, however many records share it
                tqdm.write(line, file=sys.stderr)
    return failed


def finish(plan: Plan, failed: int, summary: str, reports: list[Path]) -> int:
    """Print the summary and the reports written; return the exit status (0 pass, 1 failures, 2 bad input).

    The bad input of a per-model plan (``harness.core.plan.expand_models``) has no item whose cause would say it:
    each is printed here, one line on stderr.
    """
    if plan.per_model:
        for line in dict.fromkeys(plan.bad_input):
            print(f"assay: error: {line}", file=sys.stderr)
    print(f"{len(plan.items)} items, {failed} failed or in error; {summary}")
    for path in reports:
        print(f"report: {path}")
    if plan.bad_input:
        return 2
    return 1 if failed else 0
