"""Sharded campaigns over real SSH workers (issue 30): an OpenSSH server on 127.0.0.1, reached by xdist's
``--tx ssh=...`` gateways exactly as a remote build host is.

The server is Debian's ``openssh-server`` (``.ci/setup`` installs it), started
by the test on a free port with a throw-away host key and user key in a
temporary folder; the test skips with the reason where it cannot start. Each
gateway runs the venv's interpreter in a folder of its own (``chdir=``), where
xdist rsyncs the checkout (``assay semantic --tx``; or not at all, the way
docs/sharding.md recommends): the workers import that copy, generate, build and
compute the references there, and their shards reach the controller only
through xdist's reports. Real compiler, real references, no mock.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata as installed
from pathlib import Path

import pytest

from harness.core.results import ResultStore
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
SSHD = Path("/usr/sbin/sshd")
HOST_ALIAS = "assay-ssh-test"  # the ssh_config entry the gateways name
CHECKOUT = Path(__file__).resolve().parents[4]
MODEL, GENERATOR, REFERENCE, N_INPUTS, SHARD_SIZE = "acas-reg50", "assay-v2:onnx", "onnxruntime", 20, 10
# (model, generators, inputs, shard size): a quick case, and the issue's own command (both assay-v2 variants)
CASES = [pytest.param(MODEL, GENERATOR, N_INPUTS, SHARD_SIZE, id="acas-reg50"),
         pytest.param("cifarnet", "assay-v2", 200, 50, id="cifarnet-issue-30", marks=pytest.mark.slow)]
# Another version of a package the content keys count (harness.core.provenance), as the remote's Python sees
# it: a distribution's metadata found first on its sys.path (the worker's folder), as on a host where another
# onnx was installed.
OTHER_ONNX = "0.0.1"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ssh_config(tmp_path_factory: pytest.TempPathFactory):
    """An sshd of our own on 127.0.0.1 and the ssh_config file that reaches it; skips where it cannot run."""
    if not SSHD.is_file() or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        pytest.skip(f"no OpenSSH server and client ({SSHD}, ssh, ssh-keygen): install Debian's openssh-server "
                    "(bash .ci/setup does)")
    folder = tmp_path_factory.mktemp("sshd")
    for key in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(folder / key)], check=True)
    (folder / "authorized_keys").write_text((folder / "user_key.pub").read_text())
    if os.geteuid() == 0:  # root's sshd checks its privilege separation folder (systemd makes it at boot)
        try:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        except OSError as exc:
            pytest.skip(f"sshd needs its privilege separation folder /run/sshd: {exc.strerror}")
    port, user = _free_port(), _user()
    (folder / "sshd_config").write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_key'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", f"PidFile {folder / 'sshd.pid'}", "UsePAM no",
        "StrictModes no", "PermitRootLogin prohibit-password", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", ""]))
    config = folder / "ssh_config"
    config.write_text("\n".join([
        f"Host {HOST_ALIAS}", "  HostName 127.0.0.1", f"  Port {port}", f"  User {user}",
        f"  IdentityFile {folder / 'user_key'}", "  IdentitiesOnly yes", "  StrictHostKeyChecking no",
        "  UserKnownHostsFile /dev/null", "  BatchMode yes", "  LogLevel ERROR", ""]))
    log = folder / "sshd.log"
    server = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(folder / "sshd_config")],
                              stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        _wait_for_login(config, server, log)
        yield config
    finally:
        server.terminate()
        server.wait(timeout=30)


def _user() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name


def _wait_for_login(config: Path, server: subprocess.Popen, log: Path, timeout: float = 20.0) -> None:
    """Return once ``ssh`` logs in through the server; skip with sshd's own message if it never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            break
        done = subprocess.run(["ssh", "-F", str(config), HOST_ALIAS, "true"], capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode == 0:
            return
        time.sleep(0.3)
    pytest.skip(f"sshd on 127.0.0.1 did not accept a login: {log.read_text().strip()[-500:] or 'no message'}")


def _gateway(config: Path, folder: Path) -> str:
    """An xdist gateway to the test's sshd running the venv's interpreter in ``folder`` (its rsync target)."""
    return f"ssh={HOST_ALIAS}//ssh_config={config}//python={sys.executable}//chdir={folder}"


def _sharded(tmp_path: Path, gateways: list[str], model: str = MODEL, generators: str = GENERATOR,
             n_inputs: int = N_INPUTS, shard_size: int = SHARD_SIZE) -> subprocess.CompletedProcess:
    """The issue's command: the campaign in shards over the gateways only (no local worker)."""
    command = [sys.executable, "-m", "harness.cli", "semantic", "--models", model, "--generators", generators,
               "--references", REFERENCE, "--inputs", str(n_inputs), "--seed", "3", "--shard-size", str(shard_size),
               *(arg for gateway in gateways for arg in ("--tx", gateway)), "--out", "out", "--work", "work",
               "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(CHECKOUT))
    return subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)


def _without_run_details(records: list[dict]) -> list[dict]:
    """A record but for what says how and where it ran: its timings (summed over shards), when it finished, and
    which copy of Assay ran it (an rsynced copy is no git work tree: it names its sources' digest instead of the
    commit); the rest of the provenance (tools, configuration, model and code hashes) stays."""
    kept = []
    for record in records:
        record = {k: v for k, v in record.items() if k not in ("timings", "finished_at", "seal")}
        record["provenance"] = {k: v for k, v in record["provenance"].items() if k != "assay"}
        kept.append(record)
    return sorted(kept, key=lambda record: (record["variant"], record["reference"]))


def _differences(merged, expected, path: str = "records") -> list[str]:
    """Where two JSON values differ, as paths with both values: the assertion's message."""
    if isinstance(merged, dict) and isinstance(expected, dict):
        return [d for key in sorted(set(merged) | set(expected), key=str)
                for d in _differences(merged.get(key), expected.get(key), f"{path}.{key}")]
    if isinstance(merged, list) and isinstance(expected, list) and len(merged) == len(expected):
        return [d for k, (a, b) in enumerate(zip(merged, expected)) for d in _differences(a, b, f"{path}[{k}]")]
    return [] if merged == expected else [f"{path}: sharded {merged!r}, unsharded {expected!r}"]


@pytest.mark.parametrize("model, generators, n_inputs, shard_size", CASES)
def test_shards_over_two_ssh_workers_merge_into_the_unsharded_records(tmp_path, ssh_config, model, generators,
                                                                      n_inputs, shard_size):
    remote = tmp_path / "remote"
    done = _sharded(tmp_path, [_gateway(ssh_config, remote)] * 2, model, generators, n_inputs, shard_size)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    settings = campaign.Settings(n_inputs=n_inputs, seed=3, work_dir=tmp_path / "unsharded-work")
    items = campaign.plan([model], [generators], [REFERENCE], ["host"], settings).items
    assert f"{len(items)} items, 0 failed" in done.stdout
    assert done.stdout.count(f"{n_inputs // shard_size} shards merged") == len(items)
    store = ResultStore(tmp_path / "unsharded.json")
    expected = [record for item in items for record in campaign.run_item(item, settings, store)]
    merged = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    assert _without_run_details(merged) == _without_run_details(expected), \
        _differences(_without_run_details(merged), _without_run_details(expected))
    assert all(record["verdict"] == "pass" and record["timings"]["shards"] == n_inputs // shard_size
               for record in merged)
    back = sorted(path.relative_to(tmp_path / "out") for path in (tmp_path / "out" / "shards").rglob("*.npz"))
    there = sorted(path.relative_to(remote / "out") for path in (remote / "out" / "shards").rglob("*.npz"))
    assert back == there and len(back) == len(items) * n_inputs // shard_size  # all computed over SSH, sent back
    assert (remote / "harness" / "stages" / "semantic" / "pytest_items.py").is_file()  # rsynced like a real host


@pytest.mark.slow
def test_without_rsync_the_workers_run_the_assay_installed_on_the_host(tmp_path, ssh_config):
    """The way that outlives xdist's deprecated ``--rsyncdir``: Assay installed at the same commit on every host
    (here: the venv whose editable install is this checkout), the gateway running that venv's interpreter in a
    folder of its own (xdist still copies pytest itself there), the command as docs/sharding.md gives it."""
    out, work = tmp_path / "out", tmp_path / "work"
    gateway = f"ssh={HOST_ALIAS}//ssh_config={ssh_config}//python={sys.executable}//chdir={tmp_path / 'remote'}"
    # --pyargs: the test module by its name, which each host resolves in its own installation (xdist would
    # refuse a path outside its rsync roots)
    command = [sys.executable, "-m", "pytest", "--pyargs", "harness.stages.semantic.pytest_items",
               "-p", "no:cacheprovider", "--import-mode=importlib", "-q", "--tx", gateway, "--tx", gateway,
               "--dist", "load", f"--assay-models={MODEL}", f"--assay-generators={GENERATOR}",
               f"--assay-references={REFERENCE}", f"--assay-inputs={N_INPUTS}", "--assay-seed=3",
               f"--assay-shard-size={SHARD_SIZE}", f"--assay-out={out}", f"--assay-work={work}"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{MODEL}/assay-v2/onnx/host: 2 shards merged" in done.stdout
    assert "--rsyncdir" not in done.stdout + done.stderr  # no deprecation warning: the feature is not used
    assert not (tmp_path / "remote" / "harness").exists()  # the host's own Assay ran, not a copy
    (record,) = json.loads((out / "results.json").read_text())["records"]
    assert record["verdict"] == "pass" and record["n_inputs"] == N_INPUTS and record["timings"]["shards"] == 2


def test_a_worker_with_another_tool_version_is_named_in_one_line(tmp_path, ssh_config):
    remote = tmp_path / "remote"
    metadata = remote / f"onnx-{OTHER_ONNX}.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: onnx\nVersion: {OTHER_ONNX}\n")
    done = _sharded(tmp_path, [_gateway(ssh_config, remote)])
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if "not merged" in line]
    assert line.startswith(f"{MODEL}/assay-v2/onnx/host: not merged: the shards from ")
    assert f"tools.onnx: {OTHER_ONNX} on " in line and f", {installed.version('onnx')} here" in line
    assert "target." not in line and "generator." not in line  # only what differs is named
