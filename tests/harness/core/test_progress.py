"""Items run several at a time (``run_items``' ``workers``): each in a process of its own, a process that dies is
that item's error line and the other items go on."""

from __future__ import annotations

import os

from progress_support import outcome

from harness.core.plan import ModelItem
from harness.core.progress import run_items


def test_items_run_in_processes_of_their_own_and_a_dying_one_is_its_items_error_line(capsys):
    items = [ModelItem(name) for name in ("passes", "dies", "fails", "also-passes")]
    assert run_items(items, outcome, quiet=True, workers=2) == 2  # the dead one and the failing one
    lines = capsys.readouterr().err.splitlines()
    (dead,) = [line for line in lines if line.startswith("dies")]
    assert dead.startswith("dies: error: its process ended without a result (BrokenProcessPool")
    ran = {line.split(":")[0]: line.rsplit(" ", 1)[1] for line in lines if "ran in process" in line}
    assert sorted(ran) == ["also-passes", "fails", "passes"]
    assert len(set(ran.values())) == 3 and str(os.getpid()) not in ran.values()


def test_one_worker_runs_the_items_in_this_process_in_order(capsys):
    items = [ModelItem(name) for name in ("passes", "fails")]
    assert run_items(items, outcome, quiet=True, workers=1) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"passes: ran in process {os.getpid()}", f"fails: ran in process {os.getpid()}"]
