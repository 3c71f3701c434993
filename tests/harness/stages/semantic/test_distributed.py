"""``assay semantic --workers N --tx SPEC``: the campaign on pytest-xdist workers, local and "remote", merged
into the controller's results.json with the records of an unsharded run.

The remote host is simulated the way xdist starts one, as a separate process
(``--tx popen//chdir=DIR``): it runs in its own folder, with its own
``--out`` and ``--work`` (relative paths), so it generates and builds its own
copy of the code and writes its shards where the controller cannot see them;
they can reach the controller's results.json only through xdist's reports.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.results import ResultStore
from harness.stages.semantic import distributed
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
N_INPUTS, SHARD_SIZE = 20, 10


def test_the_pytest_command_passes_every_setting_and_paths_as_option_values(tmp_path):
    settings = campaign.Settings(n_inputs=50, seed=3, opt="-O3", work_dir=tmp_path / "w", atol=1e-4, arbiter=False,
                                 tolerance="fixed", derived_inputs=7)
    selection = distributed.Selection(["acas-reg50", "lenet5"], ["assay-v2"], ["keras"], ["host", "arm7tdmi"])
    command = distributed.pytest_command(selection, settings, tmp_path / "out", 0, ["ssh=h//python=python3"], 5, False)
    assert {"--assay-models=acas-reg50,lenet5", "--assay-inputs=50", "--assay-seed=3", "--assay-opt=-O3",
            f"--assay-work={tmp_path / 'w'}", f"--assay-out={tmp_path / 'out'}", "--assay-atol=0.0001",
            "--assay-no-arbiter", "--assay-shard-size=5", "--assay-targets=host,arm7tdmi", "--assay-tolerance=fixed",
            "--assay-derived-inputs=7"} <= set(command)
    assert "--assay-rtol" not in " ".join(command)  # not given: each model's own
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--tx"] == ["ssh=h//python=python3"]
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--rsyncdir"] == [
        str(distributed.CHECKOUT / name) for name in distributed.RSYNC_DIRS]
    plugins = {command[i + 1] for i, arg in enumerate(command) if arg == "-p"}
    assert {"xdist", "assay", "no:cacheprovider"} <= plugins  # named: run() turns autoloading off
    assert not any("hypothesis" in name or "benchmark" in name for name in plugins)  # never loaded, so not named
    local = distributed.pytest_command(selection, settings, tmp_path / "out", 2, [], None, True)
    assert local[local.index("-n") + 1] == "2" and "--tx" not in local and "--assay-shard-size" not in " ".join(local)


@pytest.mark.tor("TOR-SEM-010")
def test_shards_on_a_local_and_a_remote_worker_merge_into_the_unsharded_records(tmp_path):
    remote = tmp_path / "remote"
    command = [sys.executable, "-m", "harness.cli", "semantic", "--models", "acas-reg50", "--generators",
               "assay-v2:onnx", "--references", "onnxruntime", "--inputs", str(N_INPUTS), "--shard-size",
               str(SHARD_SIZE), "--workers", "1", "--tx", f"popen//chdir={remote}//python={sys.executable}",
               "--out", "out", "--work", "work", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[4]))
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 items, 0 failed" in done.stdout
    settings = campaign.Settings(n_inputs=N_INPUTS, work_dir=tmp_path / "unsharded-work")
    item = campaign.plan(["acas-reg50"], ["assay-v2:onnx"], ["onnxruntime"], ["host"], settings).items[0]
    expected = campaign.run_item(item, settings, ResultStore(tmp_path / "unsharded.json"))
    merged = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    volatile = ("timings", "finished_at", "seal")  # the seal is over every field, timings included
    strip = lambda records: [{k: v for k, v in r.items() if k not in volatile} for r in records]
    assert strip(merged) == strip(expected)
    assert merged[0]["timings"]["shards"] == 2
    assert len(list((tmp_path / "out" / "shards").rglob("*.npz"))) == 2  # both came back to the controller
    assert (remote / "harness" / "stages" / "semantic" / "pytest_items.py").is_file()  # rsynced like a real host
