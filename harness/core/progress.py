"""Running a stage's items with progress on stderr: the loop every campaign command shares.

Long campaigns show a progress bar naming the item being run; each item that
did not pass gets its cause lines printed as soon as it is known (above the
bar), and the command ends with one summary line and the reports written.

Items can run several at a time (``workers``), each in a fresh interpreter of its own: a stage whose item keeps
both cores busy only part of the time (the mutation stage: a single-threaded float64 search beside short runs of
mutants) then fills them, and a fault that takes an item's process down (a crash of a library, the memory it ran
out of) is that item's error line, never the end of the campaign.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from harness.core.plan import Item, ModelItem, Plan

PR_SET_PDEATHSIG = 1  # prctl(2)


def run_items(items: Iterable[Item | ModelItem], run: Callable[[Item | ModelItem], tuple[bool, list[str]]],
              quiet: bool = False, workers: int = 1) -> int:
    """Run each item; ``run`` returns whether it passed and the lines to show (causes, warnings).

    ``workers`` above 1: that many items at a time, each in a spawned process of its own (``run`` must then be
    picklable: a module's function or a ``functools.partial`` of one, and store its records itself). Returns how
    many items failed.
    """
    from tqdm import tqdm

    items = list(items)
    # no bar without items: a per-model stage whose every model is bad input says so in one line (finish)
    with tqdm(total=len(items), unit="item", file=sys.stderr, disable=quiet or not items) as progress:
        if workers > 1 and len(items) > 1:
            progress.set_description(f"{min(workers, len(items))} items at a time")
            with ThreadPoolExecutor(max_workers=workers) as pool:
                running = [pool.submit(_in_own_process, run, item) for item in items]
                return _tally((future.result() for future in as_completed(running)), progress, tqdm.write)
        return _tally((run(item) for item in _described(items, progress)), progress, tqdm.write)


def _described(items: list, progress):
    """The items, each named on the bar while it runs."""
    for item in items:
        progress.set_description(item.id)
        yield item


def _tally(outcomes, progress, write) -> int:
    """How many of ``outcomes`` ((passed, lines) per item) failed; each one's lines printed once, the bar moved on."""
    failed = 0
    for passed, lines in outcomes:
        failed += not passed
        for line in dict.fromkeys(lines):  # one cause once, however many records share it
            write(line, file=sys.stderr)
        progress.update()
    return failed


def _in_own_process(run: Callable, item: Item | ModelItem) -> tuple[bool, list[str]]:
    """``run(item)`` in a fresh interpreter (spawned: TensorFlow's threads do not survive a fork); its death is the
    item's cause line."""
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_end_with_parent, initargs=(os.getpid(),)) as pool:
        try:
            return pool.submit(run, item).result()
        except BrokenProcessPool as exc:  # the process died (a crash, the memory it ran out of): the item's fault
            return False, [f"{item.id}: error: its process ended without a result (BrokenProcessPool: {exc})"]
        except Exception as exc:  # noqa: BLE001 - raised by run itself: the item's fault, not the campaign's end
            return False, [f"{item.id}: error: internal error: {type(exc).__name__}: {exc}"]


def _end_with_parent(parent: int) -> None:
    """In the item's process: be killed when the process that started it ends (Linux's parent-death signal), so
    that a campaign stopped by a signal its children do not get (``kill PID``) leaves no item running on; a parent
    gone before the signal was set is seen at once (this process was handed to another)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the item ends when its work does
        return
    if os.getppid() != parent:
        os._exit(1)


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
