"""Items run several at a time (``run_items``' ``workers``): each in a process of its own, a process that dies is
that item's error line and the other items go on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from progress_support import outcome

from harness.core.plan import ModelItem
from harness.core.progress import run_items


def test_items_run_in_processes_of_their_own_and_a_dying_one_is_its_items_error_line(capsys):
    items = [ModelItem(name) for name in ("passes", "dies", "raises", "fails", "also-passes")]
    assert run_items(items, outcome, quiet=True, workers=2) == 3  # the dead one, the raising one, the failing one
    lines = capsys.readouterr().err.splitlines()
    (dead,) = [line for line in lines if line.startswith("dies")]
    assert dead.startswith("dies: error: its process ended without a result (BrokenProcessPool")
    assert "raises: error: internal error: ValueError: a fault of the item's own code" in lines
    ran = {line.split(":")[0]: line.rsplit(" ", 1)[1] for line in lines if "ran in process" in line}
    assert sorted(ran) == ["also-passes", "fails", "passes"]
    assert len(set(ran.values())) == 3 and str(os.getpid()) not in ran.values()


def test_one_worker_runs_the_items_in_this_process_in_order(capsys):
    items = [ModelItem(name) for name in ("passes", "fails")]
    assert run_items(items, outcome, quiet=True, workers=1) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"passes: ran in process {os.getpid()}", f"fails: ran in process {os.getpid()}"]


def test_a_campaign_stopped_by_a_signal_leaves_no_item_running(tmp_path):
    pids = [tmp_path / "first", tmp_path / "second"]
    script = ("import sys; from progress_support import sleeps; from harness.core.plan import ModelItem; "
              "from harness.core.progress import run_items; "
              "run_items([ModelItem(p) for p in sys.argv[1:]], sleeps, quiet=True, workers=2)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), *sys.path]))
    campaign = subprocess.Popen([sys.executable, "-c", script, *map(str, pids)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not all(p.is_file() and p.read_text() for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        items = [int(p.read_text()) for p in pids]
        os.kill(campaign.pid, signal.SIGTERM)  # the campaign's process alone, not its group
        campaign.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in items) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in items if _alive(pid)]
    finally:
        campaign.kill()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.is_file() and state.read_text().split(") ")[-1].startswith("Z"))  # a zombie has ended
