"""``assay semantic --workers N`` / ``--tx SPEC``: the campaign on pytest-xdist, for users who do not call pytest.

The command runs, in a subprocess, the very session a pytest user would
(``python -m pytest harness/stages/semantic/pytest_items.py -n N --assay-...``):
the same tests, the same shards, the same controller that gathers the workers'
records and shards into ``OUT/results.json`` (``harness.pytest_plugin``,
docs/sharding.md). xdist starts the workers (``-n N``: local processes; ``--tx
ssh=host//python=/abs/.venv/bin/python``: remote ones, which receive the checkout's
``harness``, ``codegen``, ``wcet`` and ``toolchains`` folders and its ``requirements.lock`` by rsync).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.stages.semantic import pytest_items
from harness.stages.semantic.settings import Settings

# What a remote worker needs of the checkout (the zoo, generators, runners, target profiles, WCET library), and
# the lock, which `assay doctor`'s comparison there (in every record's provenance) reads beside them.
CHECKOUT = Path(__file__).resolve().parents[3]
RSYNC_DIRS = ("harness", "codegen", "wcet", "toolchains", "requirements.lock")
# The session loads only the plugins it uses, by entry-point name: with autoloading off (run()), pytest does
# not scan every installed distribution's entry points, and the test suite's plugins (hypothesis,
# pytest-benchmark) are not imported. Hosts that autoload (ssh gateways do not get our environment) still
# load these two once: pytest skips an entry point already loaded under its name.
PLUGINS = ("xdist", "assay")
# Built-in plugins the campaign does not need: the cache, and the hooks that look for unraisable exceptions
# and thread exceptions (the first one runs gc.collect five times when a process ends).
UNUSED_PLUGINS = ("cacheprovider", "unraisableexception", "threadexception")


@dataclass(frozen=True)
class Selection:
    """What the campaign runs on, as the command line gave it."""

    models: list[str]
    generators: list[str]
    references: list[str]
    targets: list[str]


def pytest_command(selection: Selection, settings: Settings, out: Path, workers: int, tx: list[str],
                   shard_size: int | None, quiet: bool) -> list[str]:
    """The pytest command line that runs the campaign on ``workers`` local processes and the ``tx`` gateways."""
    options = {"models": ",".join(selection.models), "generators": ",".join(selection.generators),
               "references": ",".join(selection.references), "targets": ",".join(selection.targets),
               "inputs": settings.n_inputs, "seed": settings.seed, "model-seed": settings.model_seed,
               "opt": settings.opt, "work": settings.work_dir, "out": out, "timeout": settings.timeout,
               "sanitize": settings.sanitize, "atol": settings.atol, "rtol": settings.rtol, "shard-size": shard_size,
               "tolerance": settings.tolerance, "derived-inputs": settings.derived_inputs}
    # --option=value: an argument that names an existing path would have to lie in an rsync root (xdist).
    # importlib mode: a worker may import the harness from another folder than the (rsynced) test file's, as a
    # popen worker with chdir does; pytest's default mode would refuse that as an import file mismatch.
    # Every process of the session (controller and each worker) pays its plugins' start-up: against a default
    # session, the plugin options above and --assert=plain (no rewriting of the test module's asserts) save
    # about 0.9 s each, 0.6 s of it the test suite's plugins (docs/benchmarks.md, benchmarks/sharding.py).
    command = [sys.executable, "-m", "pytest", str(Path(pytest_items.__file__)),
               *(arg for plugin in PLUGINS for arg in ("-p", plugin)),
               *(arg for plugin in UNUSED_PLUGINS for arg in ("-p", f"no:{plugin}")),
               "--import-mode=importlib", "--assert=plain", "-qq" if quiet else "-q",
               *(f"--assay-{name}={value}" for name, value in options.items() if value is not None)]
    command += [] if settings.arbiter else ["--assay-no-arbiter"]
    command += ["--assay-redo"] if settings.redo else []
    command += ["--assay-keep-history"] if settings.keep_history else []
    if tx:
        command += [arg for spec in [f"{workers}*popen"] * (workers > 0) + tx for arg in ("--tx", spec)]
        command += ["--dist", "load", *(arg for name in RSYNC_DIRS for arg in ("--rsyncdir", str(CHECKOUT / name)))]
    else:
        command += ["-n", str(workers)]
    return command


def run(command: list[str]) -> int:
    """Run the pytest session with this checkout first on the path; its exit status (1: some test failed)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(CHECKOUT), os.environ.get("PYTHONPATH")])),
               PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # PLUGINS are named on the command line
    return subprocess.run(command, env=env, check=False).returncode
