"""What generated code leaves behind is never trusted (issue 38, docs/sandbox.md): a link or a FIFO planted where
Assay reads a run's outputs, a file planted beside the build, an ``entry`` that smuggles a path into the compiler's
command, a symlinked source. Each test shows the attack work on the old path (Assay reading the outputs by path,
the build folder writable by the run, every absolute path of the command bound) and fail now, with an ``error``
cause naming what was refused, on the host and on arm7tdmi (qemu-arm, through the guest's own system calls).

The hostile code computes zeros (wrong) and, when the process exits, replaces its outputs file: by a link to a
file holding the right outputs (were Assay to follow it, wrong code would pass), or by a FIFO (were Assay to open
it, it would wait forever)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from harness import sandbox, targets
from harness.errors import ConfigError
from harness.generators.generated import GeneratedCode
from harness.runners import RunError, host, qemu

needs_sandbox = pytest.mark.skipif(not sandbox.isolation().confined,
                                   reason=f"no sandbox on this machine: {sandbox.isolation().reason}")
INPUTS = np.arange(12, dtype=np.float32).reshape(4, 3)
HONEST = ("void net(const float *input, float *output)\n{\n"
          "    for (int i = 0; i < 3; ++i) output[i] = 2.0f * input[i];\n}\n")

# At exit, after the driver has written and closed its outputs file: replace it (host: libc; ARM: the guest's
# Linux system calls under qemu-arm, r7 = number: unlink 10, symlink 83, mknod 14).
HOST_PLANT = """#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
static void plant(void)
{
    unlink(OUTPUTS);
#ifdef LINK_TO
    symlink(LINK_TO, OUTPUTS);
#else
    mkfifo(OUTPUTS, 0666);
#endif
}
"""
ARM_PLANT = """#include <stdlib.h>
static int linux_call(int number, int a, int b, int c)
{
    register int r0 __asm__("r0") = a;
    register int r1 __asm__("r1") = b;
    register int r2 __asm__("r2") = c;
    register int r7 __asm__("r7") = number;
    __asm__ volatile("svc 0" : "+r"(r0) : "r"(r1), "r"(r2), "r"(r7) : "memory");
    return r0;
}
static void plant(void)
{
    linux_call(10, (int)OUTPUTS, 0, 0);
#ifdef LINK_TO
    linux_call(83, (int)LINK_TO, (int)OUTPUTS, 0);
#else
    linux_call(14, (int)OUTPUTS, 0010666, 0);
#endif
}
"""
WRONG = """void net(const float *input, float *output)
{
    static int registered;
    if (!registered) {
        registered = 1;
        atexit(plant);
    }
    for (int i = 0; i < 3; ++i) output[i] = 0.0f * input[i];
}
"""


def folder_of(tmp_path: Path, name: str, source: str, manifest: dict | None = None) -> GeneratedCode:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "net.c").write_text(source)
    (directory / "assay.json").write_text(json.dumps(manifest or {"entry": "net", "input_size": 3,
                                                                   "output_size": 3}))
    return GeneratedCode.from_directory(directory)


def honest_outputs(tmp_path: Path) -> Path:
    """The right outputs of ``INPUTS``, computed by honest code, in a file outside every run's folder."""
    built = host.build(folder_of(tmp_path, "honest", HONEST), tmp_path / "build-honest")
    path = tmp_path / "honest.f32"
    path.write_bytes(host.run(built, INPUTS).outputs.astype("<f4").tobytes())
    return path


def hostile(tmp_path: Path, target: str, outputs_name: str, link_to: Path | None) -> GeneratedCode:
    defines = f'#define OUTPUTS "{outputs_name}"\n' + (f'#define LINK_TO "{link_to}"\n' if link_to else "")
    return folder_of(tmp_path, f"hostile-{target}", defines + (HOST_PLANT if target == "host" else ARM_PLANT)
                     + WRONG)


def run_kept(tmp_path: Path, target: str, code: GeneratedCode, kept: Path, monkeypatch):
    """Run ``code`` on ``target`` in the folder ``kept``, which the test keeps to look at afterwards."""
    kept.mkdir()
    if target == "host":
        return host.run(host.build(code, tmp_path / f"build-{target}"), INPUTS, 30, folder=kept)
    monkeypatch.setattr(qemu, "run_folder", lambda: nullcontext(kept))
    return qemu.run(qemu.build(code, tmp_path / f"build-{target}", targets.get(target)), INPUTS, 30)


TARGETS = ["host", pytest.param("arm7tdmi", marks=pytest.mark.arm)]
OUTPUT_NAMES = {"host": host.OUTPUTS_FILE, "arm7tdmi": qemu.OUTPUTS_FILE}


@needs_sandbox
@pytest.mark.tor("TOR-SEM-004")
@pytest.mark.parametrize("target", TARGETS)
def test_a_link_planted_at_the_outputs_is_refused_not_followed(tmp_path, monkeypatch, target):
    honest = honest_outputs(tmp_path)
    code = hostile(tmp_path, target, OUTPUT_NAMES[target], honest)
    kept = tmp_path / "kept"
    with pytest.raises(RunError) as refused:
        run_kept(tmp_path, target, code, kept, monkeypatch)
    assert str(refused.value) == f"the outputs file ({OUTPUT_NAMES[target]}) refused: a symbolic link"
    # the old path, reading the outputs by their name, would have read the right outputs: wrong code passing
    planted = kept / OUTPUT_NAMES[target]
    assert planted.is_symlink() and planted.read_bytes() == honest.read_bytes()


@needs_sandbox
@pytest.mark.tor("TOR-SEM-004")
@pytest.mark.parametrize("target", TARGETS)
def test_a_fifo_planted_at_the_outputs_is_refused_at_once(tmp_path, monkeypatch, target):
    code = hostile(tmp_path, target, OUTPUT_NAMES[target], None)
    kept = tmp_path / "kept"
    with pytest.raises(RunError, match=r"refused: not a regular file"):
        run_kept(tmp_path, target, code, kept, monkeypatch)
    # the old path, opening the outputs to read them, waits for a writer that never comes
    fifo = kept / OUTPUT_NAMES[target]
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", f"open({str(fifo)!r}, 'rb').read()"], timeout=2)


BESIDE = """#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
void net(const float *input, float *output)
{
    Dl_info info;
    char path[4096];
    FILE *planted;
    dladdr((void *)net, &info);
    snprintf(path, sizeof path, "%s", info.dli_fname);
    strcpy(strrchr(path, '/'), "/libassay.so.planted");
    planted = fopen(path, "w");
    if (planted == NULL) {
        fprintf(stderr, "hostile: write beside the library: %s\\n", strerror(errno));
        exit(3);
    }
    fclose(planted);
    for (int i = 0; i < 3; ++i) output[i] = 2.0f * input[i];
}
"""


@needs_sandbox
@pytest.mark.tor("TOR-SEM-004")
def test_the_build_folder_is_read_only_to_the_run(tmp_path, monkeypatch):
    """A run that could write beside its library could plant a stamp, a log link or another build; now it cannot
    (the run's folder is a fresh one). Without the sandbox the same code writes there: the test can fail."""
    built = host.build(folder_of(tmp_path, "beside", BESIDE), tmp_path / "build")
    with pytest.raises(RunError, match="hostile: write beside the library: (Permission denied|Read-only file system)"):
        host.run(built, INPUTS, 30)
    assert not (built.library.parent / "libassay.so.planted").exists()
    monkeypatch.setenv(sandbox.SWITCH, "off")
    sandbox.isolation.cache_clear()
    try:
        host.run(built, INPUTS, 30)
    finally:
        sandbox.isolation.cache_clear()
    assert (built.library.parent / "libassay.so.planted").exists()


def test_an_entry_that_smuggles_a_path_into_the_compile_is_refused(tmp_path):
    """cortex-m4f's attack: ``entry`` became ``-DASSAY_ENTRY=x/*,/private/file,*/``, the compiler's sandbox bound
    every absolute path of its command, and ``.incbin`` compiled the file into the image. Now ``entry`` must be
    a C identifier, and a compile binds only paths inside the folders Assay chose."""
    secret = tmp_path / "private.bin"
    secret.write_bytes(b"\x00\x00\x80\x3f")
    directory = tmp_path / "smuggler"
    directory.mkdir()
    (directory / "net.c").write_text("void x(const float *i, float *o) { o[0] = i[0]; }\n")
    manifest = {"entry": f"x/*,{secret},*/", "input_size": 1, "output_size": 1}
    (directory / "assay.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match=r"'entry' must be a C identifier"):
        GeneratedCode.from_directory(directory)
    command = ["gcc", f"-DASSAY_ENTRY={manifest['entry']}", str(directory / "net.c")]
    assert secret in sandbox._named(command, tmp_path / "build")  # the old scan bound the smuggled file
    assert secret not in sandbox._named(command, tmp_path / "build", within=[directory, tmp_path / "build"])


@pytest.mark.parametrize("attack", ["link", "dotdot", "absolute"])
def test_sources_outside_the_folder_or_through_a_link_are_refused(tmp_path, attack):
    secret = tmp_path / "secret.c"
    secret.write_text("float leaked = 1.0f;\n")
    directory = tmp_path / "code"
    directory.mkdir()
    (directory / "net.c").write_text(HONEST)
    sources = {"link": ["net.c", "extra.c"], "dotdot": ["net.c", "../secret.c"], "absolute": [str(secret)]}[attack]
    if attack == "link":
        (directory / "extra.c").symlink_to(secret)
    (directory / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 3, "output_size": 3,
                                                      "sources": sources}))
    with pytest.raises(ConfigError, match="refused as a source: a symbolic link|must be a relative path inside"):
        GeneratedCode.from_directory(directory)


def test_a_linked_header_is_not_hashed(tmp_path):
    """Source hashing follows no link: the SHA-256 of a private file must not land in results.json."""
    secret = tmp_path / "secret.h"
    secret.write_text("#define SECRET 1\n")
    code = folder_of(tmp_path, "code", HONEST)
    (code.directory / "private.h").symlink_to(secret)
    with pytest.raises(ConfigError, match="private.h: refused as a source: a symbolic link"):
        code.source_hashes()


@needs_sandbox
def test_nothing_of_a_run_is_left_and_a_killed_assays_folders_are_swept(tmp_path, monkeypatch):
    """A run's folder goes with everything the run made there (world-writable, set-group-id); the folders of an
    Assay that was killed are removed by the next one."""
    monkeypatch.setenv(sandbox.SCRATCH_ENV, str(tmp_path / "runs"))
    with sandbox.fresh_folder() as folder:
        done = sandbox.run(["sh", "-c", "chmod 0777 . && mkdir -m 2777 shared && touch shared/f && chmod 0666 "
                            "shared/f"], folder, 30, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    root = sandbox.scratch_root()
    assert list(root.iterdir()) == []
    dead = root / "run-999999999-left"  # no such process
    (dead / "shared").mkdir(parents=True)
    os.chmod(dead / "shared", 0o2777)
    sandbox._swept.discard(root)
    sandbox.scratch_root()
    assert not dead.exists()


def test_a_scratch_root_of_another_user_or_open_to_all_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(sandbox.SCRATCH_ENV, str(tmp_path))
    root = tmp_path / f"assay-runs-{os.geteuid()}"
    root.mkdir(mode=0o777)
    os.chmod(root, 0o777)
    with pytest.raises(ConfigError, match="not a private folder of this user"):
        sandbox.scratch_root()
    shutil.rmtree(root)
    root.symlink_to(tmp_path)
    with pytest.raises(ConfigError, match="not a private folder of this user"):
        sandbox.scratch_root()


BOMB = "".join(f"#define X{i} X{i - 1}+X{i - 1}\n" for i in range(1, 31))
BOMB = "#define X0 1\n" + BOMB + "int net_bomb(void) { return X30; }\n" + HONEST


@needs_sandbox
def test_a_compile_bomb_ends_at_the_compilers_memory_limit(tmp_path, monkeypatch):
    """2^30 tokens from 30 doubling macros: cc1 grows without end. Its memory is bounded by a limit sized from the
    sources (here made 256 MiB): a compile error, in seconds. Unbounded (the old path), it passes 256 MiB."""
    from harness.runners import compiling

    code = folder_of(tmp_path, "bomb", BOMB)
    monkeypatch.setattr(compiling, "COMPILE_BASE_MIB", 256)
    with pytest.raises(RunError, match="compile error"):
        host.build(code, tmp_path / "build")
    command = ["gcc", "-c", str(code.directory / "net.c"), "-o", str(tmp_path / "unbounded.o")]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        peak = 0
        for _ in range(300):
            try:
                peak = max(peak, *(int(line.split()[1]) for child in Path("/proc").glob("[0-9]*")
                                   if (child / "stat").exists() and _parent_is(child, process.pid)
                                   for line in (child / "status").read_text().splitlines()
                                   if line.startswith("VmRSS:")))
            except (OSError, ValueError):
                pass
            if peak > 300 << 10 or process.poll() is not None:
                break
            subprocess.run(["sleep", "0.1"])
    finally:
        os.killpg(process.pid, 9)
        process.wait()
    assert peak > 300 << 10  # kB: the unbounded cc1 went past 300 MiB


def _parent_is(child: Path, pid: int) -> bool:
    fields = (child / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]) == pid or int(child.name) == pid


SYSTEM = """#include <string.h>
static int semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("svc 0x123456" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
void net(const float *input, float *output)
{
    struct { const char *text; int length; } command = {"true", 4};
    for (int i = 0; i < 3; ++i) output[i] = input[i];
    output[0] = (float)semihost(0x12, &command); /* SYS_SYSTEM: the host runs the command */
}
"""


@needs_sandbox
@pytest.mark.arm
def test_semihosting_runs_no_host_command_on_arm7tdmi(tmp_path, monkeypatch):
    """qemu-arm's semihosting ``SYS_SYSTEM`` has the host run ``system(command)``: in the sandbox the shells are
    masked, so even ``true`` fails; with them (the old sandbox) it succeeds (status 0)."""
    built = qemu.build(folder_of(tmp_path, "system", SYSTEM), tmp_path / "build", targets.get("arm7tdmi"))
    status = qemu.run(built, INPUTS, 30).outputs[:, 0]
    assert (status != 0).all(), status
    monkeypatch.setattr(sandbox, "_no_shell", lambda: [])
    assert (qemu.run(built, INPUTS, 30).outputs[:, 0] == 0).all()


def test_inputs_are_written_as_a_new_file_never_through_a_planted_link(tmp_path):
    """A link planted at ``inputs.f32`` made a rerun (``--redo``) write the inputs into any file (another item's
    library). Each run's folder is new, and the inputs are written with ``O_EXCL | O_NOFOLLOW``: a link or a FIFO
    already there is refused, its target untouched. (The old path, ``write_bytes``, writes through the link.)"""
    from harness.runners import write_file

    victim = tmp_path / "libassay.so"
    victim.write_bytes(b"\x7fELF")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "inputs.f32").symlink_to(victim)
    with pytest.raises(RunError, match="inputs.f32: cannot be written for the run"):
        write_file(folder / "inputs.f32", b"\x00" * 16)
    assert victim.read_bytes() == b"\x7fELF"
    os.mkfifo(folder / "fifo.f32")
    with pytest.raises(RunError, match="cannot be written"):
        write_file(folder / "fifo.f32", b"\x00")
    (folder / "inputs.f32").write_bytes(b"\x00" * 16)  # the old path
    assert victim.read_bytes() == b"\x00" * 16
    with sandbox.fresh_folder() as fresh:
        assert list(fresh.iterdir()) == []


@pytest.mark.tor("TOR-RES-003")
def test_a_library_planted_with_a_forged_stamp_in_the_build_folder_is_rebuilt(tmp_path, monkeypatch):
    """Issue 39, B2: whoever can write a shared work folder can replace a build's library by code that computes
    zeros and write the stamp the old check accepted (the key is the SHA-256 of the command and the sources, which
    anyone can compute, then the library's SHA-256). Now a stamp is this user's seal of both: the forged stamp, and
    one sealed under another user's key, are refused; the library is built again and computes the right outputs."""
    from harness.digests import file_digest
    from harness.runners import compiling

    monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "user.key"))
    sealed: list[tuple] = []
    real_seal = compiling.seal.seal
    monkeypatch.setattr(compiling.seal, "seal", lambda *parts: sealed.append(parts) or real_seal(*parts))
    code = folder_of(tmp_path, "honest", HONEST)
    built = host.build(code, tmp_path / "build")
    key = sealed[-1][0]
    wrong = host.build(folder_of(tmp_path, "wrong", WRONG.replace("atexit(plant)", "(void)0")), tmp_path / "other")
    stamp = compiling.stamp_path(built.library)
    for forged in ("old format", "another user's seal"):
        shutil.copyfile(wrong.library, built.library)
        if forged == "old format":
            stamp.write_text(f"{key} {file_digest(built.library)}")  # what the old check compared with
        else:
            monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "attacker.key"))
            stamp.write_text(compiling.seal.seal(key, file_digest(built.library)))
            monkeypatch.setenv("ASSAY_SEAL_KEY", str(tmp_path / "user.key"))
        assert file_digest(built.library) == file_digest(wrong.library)
        again = host.build(code, tmp_path / "build")
        np.testing.assert_array_equal(host.run(again, INPUTS).outputs, 2 * INPUTS)
