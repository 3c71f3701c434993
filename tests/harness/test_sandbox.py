"""The sandbox's own rules (harness/sandbox.py, docs/sandbox.md): the fixed environment, the scratch folder
the only place a run writes and given back after it, a signal reported as one, the visible fallback, the
settings validated. Real bubblewrap, real processes; the hostile-code campaigns are in runners/test_hostile.py."""

from __future__ import annotations

import ast
import os
import sys

import pytest

from harness import sandbox
from harness.errors import ConfigError

needs_sandbox = pytest.mark.skipif(not sandbox.isolation().confined,
                                   reason=f"no sandbox on this machine: {sandbox.isolation().reason}")


def test_a_run_sees_only_the_fixed_environment_and_its_scratch_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_PRIVATE", "do not leak")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (tmp_path / "beside.txt").write_text("private")
    done = sandbox.run(["sh", "-c", "env; cat ../beside.txt; echo made > made.txt"], scratch, 30,
                       env={"ASSAY_NEEDED": "1"}, capture_output=True, text=True)
    environment = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    assert "ASSAY_TEST_PRIVATE" not in environment and environment["ASSAY_NEEDED"] == "1"
    assert {key: environment[key] for key in ("LC_ALL", "TZ")} == {"LC_ALL": "C", "TZ": "UTC"}
    assert environment["HOME"] == str(scratch.resolve())
    assert (scratch / "made.txt").read_text() == "made\n"
    # whatever the run made is the user's again afterwards
    assert (scratch / "made.txt").stat().st_uid == scratch.stat().st_uid == os.geteuid()
    if sandbox.isolation().confined:
        assert "private" not in done.stdout and "No such file" in done.stderr


@needs_sandbox
def test_a_signal_that_ends_the_run_is_reported_as_a_signal(tmp_path):
    done = sandbox.run(["sh", "-c", "kill -SEGV $$"], tmp_path, 30, capture_output=True)
    assert done.returncode == -11


def test_without_a_sandbox_assay_says_so_once_and_records_it(monkeypatch, capsys):
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setattr(sandbox, "isolation", sandbox.isolation.__wrapped__)
    found = sandbox.isolation()
    assert found.sandbox == sandbox.NONE and found.reason == f"{sandbox.SWITCH}=off"
    assert capsys.readouterr().err == f"assay: {found.describe()}\n"
    record = found.record()
    assert record["sandbox"] == "none" and record["network"] == "the machine's"


def test_bad_settings_are_one_line_naming_the_file(tmp_path):
    path = tmp_path / "sandbox.toml"
    path.write_text('system = ["usr"]\n[limits]\nmemory_mib = 1\n[environment]\nLC_ALL = "C"\n')
    with pytest.raises(ConfigError) as caught:
        sandbox.settings(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert "absolute paths" in message and "[limits] must have exactly" in message


def test_the_shipped_settings_load():
    loaded = sandbox.settings()
    assert loaded.environment["LC_ALL"] == "C" and "/usr" in loaded.system
    assert loaded.memory_mib < 10 << 10  # the hostile 10 GiB allocation must not fit


def test_the_doctor_says_which_sandbox_and_its_absence_is_a_difference(monkeypatch):
    from harness.core import configuration

    found = sandbox.isolation()
    differences, notes = configuration.isolation()
    if found.confined:
        assert differences == [] and notes == [found.describe()]
        assert notes[0].startswith("sandbox: bubblewrap ")
    monkeypatch.setenv(sandbox.SWITCH, "off")
    monkeypatch.setattr(sandbox, "isolation", sandbox.isolation.__wrapped__)
    differences, notes = configuration.isolation()
    assert notes == [] and [str(d) for d in differences] == [
        f"sandbox: none ({sandbox.SWITCH}=off), bubblewrap in the tested configuration"]


needs_cgroups = pytest.mark.skipif(not sandbox.cgroups(), reason="no memory and pids cgroup this process may make")
THREE_CHILDREN = ("import os, time\n"
                  "for _ in range(3):\n"
                  "    if os.fork() == 0:\n"
                  "        block = bytearray(400 << 20); time.sleep(2); os._exit(0)\n"
                  "print(sorted(os.wait()[1] for _ in range(3)))\n")


@needs_sandbox
@needs_cgroups
def test_memory_is_bounded_per_run_not_per_process(tmp_path, monkeypatch):
    """Three processes of 400 MiB each fit a 1 GiB per-process limit; the run's cgroup holds all three to 1 GiB
    together, so one or more are killed. Without the cgroup (the old, per-process limits) all three live."""
    (tmp_path / "a").mkdir()
    done = sandbox.run(["python3", "-c", THREE_CHILDREN], tmp_path / "a", 60, memory_mib=1024, capture_output=True,
                       text=True)
    statuses = ast.literal_eval(done.stdout)  # the exit statuses the parent saw: 9 = killed by SIGKILL (the OOM killer)
    assert 9 in statuses, done.stdout + done.stderr
    monkeypatch.setattr(sandbox, "cgroups", lambda: {})
    (tmp_path / "b").mkdir()
    done = sandbox.run(["python3", "-c", THREE_CHILDREN], tmp_path / "b", 60, memory_mib=1024, capture_output=True,
                       text=True)
    assert ast.literal_eval(done.stdout) == [0, 0, 0], done.stdout + done.stderr


@needs_sandbox
@pytest.mark.skipif(os.geteuid() != 0, reason="the size-limited scratch folder is a tmpfs Assay mounts as root")
def test_the_files_of_a_run_together_are_bounded_by_its_folder(tmp_path):
    """Each file stays under the per-file limit, yet their sum cannot pass the folder's size (the old limit was
    per file only: three files of 1000 MiB were 3000 MiB)."""
    size = sandbox.settings().file_mib
    piece = size // 2 + 1
    with sandbox.fresh_folder() as folder:
        done = sandbox.run(["sh", "-c", f"head -c {piece}M /dev/zero > a && head -c {piece}M /dev/zero > b; "
                                        "echo $?; du -sm ."], folder, 60, capture_output=True, text=True)
    status, used = done.stdout.split()[0], int(done.stdout.split()[1])
    assert status != "0" and used <= size, done.stdout + done.stderr


@needs_sandbox
def test_what_a_run_prints_is_kept_to_its_first_and_last_part(tmp_path):
    """200 MiB on standard output cost Assay at most OUTPUT_KEEP bytes: the start and the last line survive, the
    rest is counted. (subprocess.run's capture, the old path, keeps all 200 MiB.)"""
    flood = "head -c 209715200 /dev/zero | tr '\\0' x; echo; echo the last line"
    done = sandbox.run(["sh", "-c", flood], tmp_path, 60, capture_output=True, text=True)
    assert len(done.stdout) < sandbox.OUTPUT_KEEP + 100 and done.stdout.startswith("xxxx")
    assert done.stdout.rstrip().endswith("the last line") and "bytes of output not kept]" in done.stdout


TTY_PROBE = "import subprocess, sys\n{call}\nsys.stdout.flush()\n"
SHELL = "read -t 1 line && echo read:$line; (echo hi > /dev/tty) 2>/dev/null && echo tty-open || echo no-tty"


def in_a_terminal(call: str) -> str:
    """What ``call`` (Python, ``done`` its result) prints when run by a process whose controlling terminal is a
    pseudo-terminal into which 'typed' was typed."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.executable, [sys.executable, "-c", TTY_PROBE.format(call=call)])
    os.write(fd, b"typed\n")
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


@needs_sandbox
def test_a_run_has_no_terminal_and_reads_nothing_typed(tmp_path):
    scratch = tmp_path / "s"
    scratch.mkdir()
    now = in_a_terminal(f"from harness import sandbox\ndone = sandbox.run(['sh', '-c', {SHELL!r}], "
                        f"__import__('pathlib').Path({str(scratch)!r}), 30, capture_output=True, text=True)\n"
                        "print(done.stdout)")
    assert "no-tty" in now and "read:" not in now, now
    old = in_a_terminal(f"done = subprocess.run(['sh', '-c', {SHELL!r}], capture_output=True, text=True)\n"
                        "print(done.stdout)")  # the old path: the terminal inherited
    assert "read:typed" in old or "tty-open" in old, old


def test_a_named_path_with_a_comma_is_bound_whole(tmp_path):
    """A library in a folder named ``relu-after-pool,fuse-activation`` (a variant's work folder): the argument is
    one path, bound as it is, not split at the comma as an option's list would be."""
    library = tmp_path / "a,b=c" / "libassay.so"
    library.parent.mkdir()
    library.write_bytes(b"")
    assert library in sandbox._named(["python3", str(library)], tmp_path / "scratch")
    plugin = tmp_path / "plugin.so"
    plugin.write_bytes(b"")
    assert sandbox._named(["-plugin", f"{plugin},map={library}"], tmp_path / "scratch") == [plugin]
