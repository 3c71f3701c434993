"""What an item's run does in ``test_progress``: a module's function, so that a spawned process can import it."""

from __future__ import annotations

import os

from harness.core.plan import ModelItem


def outcome(item: ModelItem) -> tuple[bool, list[str]]:
    """``dies``: the process ends with no result (a library's crash); ``raises``: the item's code raises;
    ``fails``: a failing item; else a pass. Each says which process ran it, so that the test sees that items ran
    apart."""
    if item.model == "dies":
        os._exit(3)
    if item.model == "raises":
        raise ValueError("a fault of the item's own code")
    return item.model != "fails", [f"{item.id}: ran in process {os.getpid()}"]


def sleeps(item: ModelItem) -> tuple[bool, list[str]]:
    """Writes its process id to the file the item names, then sleeps: the item a stopped campaign must not leave
    running."""
    from pathlib import Path
    import time

    Path(item.model).write_text(str(os.getpid()))
    time.sleep(120)
    return True, []
