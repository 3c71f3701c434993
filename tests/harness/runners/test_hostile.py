"""Hermetic execution (docs/sandbox.md): hostile generated code is an ``error`` verdict with its cause, touches
nothing outside its scratch folder, and the campaign goes on, on the host, arm7tdmi and cortex-m4f.

The hostile C is a ``dir:`` folder as any other tool would hand it over: a dense layer that, on its first call,
first tries one thing no generated code may do (or, ``include``, has the compiler read a private file). When
the sandbox refuses it, the code says what failed and exits with status 3 (the cause of the ``error``
verdict); were the sandbox missing, the attempt would succeed,
the outputs stay right (``pass``) or carry what was read (``fail``), and the tests fail. Bounded on purpose:
the "fork bomb" starts at most 200 sleeping children, the 10 GiB allocation touches two pages, so a broken
sandbox fails these tests without harming the machine.
"""

from __future__ import annotations

import json
import os
import socket
import threading

import numpy as np
import pytest

from harness import sandbox
from harness.core.results import ResultStore
from harness.stages.semantic import run as campaign

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
WEIGHTS = np.array([[0.5, -1.0], [0.25, 2.0], [-0.75, 0.125]], np.float32)
BIAS = np.array([0.1, -0.2], np.float32)
HOSTILE = ("read", "write", "socket", "processes", "memory", "include", "link")

needs_sandbox = pytest.mark.skipif(not sandbox.isolation().confined,
                                   reason=f"no sandbox on this machine: {sandbox.isolation().reason}")

# What each hostile folder tries on its first call, for the host (glibc) and for the ARM targets (newlib or
# picolibc, through semihosting: files by host path, and SYS_SYSTEM, which has the host run a command).
HOST_ATTEMPTS = {
    "read": 'FILE *f = fopen(SECRET, "r"); if (!f) fail("read " SECRET); output[0] = (float)fgetc(f); return;',
    "write": 'FILE *f = fopen(WRITTEN, "w"); if (!f) fail("write " WRITTEN); fputs("owned", f); fclose(f);',
    "socket": "int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a; memset(&a, 0, sizeof a);"
              " a.sin_family = AF_INET; a.sin_port = htons(PORT); a.sin_addr.s_addr = htonl(0x7f000001);"
              ' if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) fail("connect"); close(s);',
    "processes": "for (int i = 0; i < 200; ++i) { pid_t p = fork(); if (p == 0) { sleep(30); _exit(0); }"
                 ' if (p < 0) fail("fork"); }',
    "memory": 'size_t n = (size_t)10 << 30; char *p = malloc(n); if (!p) fail("malloc 10 GiB");'
              " p[0] = 1; p[n - 1] = 1; free(p);",
    # wrong outputs, and at exit a link in their place to a file Assay would read outside the sandbox
    "link": "atexit(plant_link); output[0] = output[1] = 0.0f; return;",
}
CONNECT = "python3 -c \\\"import socket; socket.create_connection(('127.0.0.1', %d), 5)\\\""
ARM_ATTEMPTS = {
    "read": HOST_ATTEMPTS["read"],
    "write": HOST_ATTEMPTS["write"],
    "socket": 'if (host_system(CONNECT) != 0) fail("system: connect");',
    "processes": 'if (host_system("i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done") != 0)'
                 ' fail("system: fork");',
    # a 32-bit target cannot ask for 10 GiB: 3 GiB is the most its malloc takes
    "memory": 'char *p = malloc(0xC0000000u); if (!p) fail("malloc 3 GiB"); p[0] = 1; free(p);',
    "link": HOST_ATTEMPTS["link"],  # through the guest's own system calls (qemu-arm: Linux's, in the sandbox)
}
HOST_PRELUDE = """#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>
static void plant_link(void)
{
    unlink("outputs.f32");
    symlink(SECRET, "outputs.f32");
}
"""
ARM_PRELUDE = """#include <string.h>
/* semihosting SYS_SYSTEM (0x12): the host runs the command */
static int semihost(int op, void *arg)
{
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
#ifdef __thumb__
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
#else
    __asm__ volatile("svc 0x123456" : "+r"(r0) : "r"(r1) : "memory");
#endif
    return r0;
}
static int host_system(const char *command)
{
    struct { const char *text; int length; } block = {command, (int)strlen(command)};
    return semihost(0x12, &block);
}
#ifndef __thumb__
/* qemu-arm: the guest's Linux system calls (r7 = number: unlink 10, symlink 83) */
static int linux_call(int number, const char *a, const char *b)
{
    register const char *r0 __asm__("r0") = a;
    register const char *r1 __asm__("r1") = b;
    register int r7 __asm__("r7") = number;
    __asm__ volatile("svc 0" : "+r"(r0) : "r"(r1), "r"(r7) : "memory");
    return (int)r0;
}
static void plant_link(void)
{
    linux_call(10, "assay_outputs.f32", 0);
    linux_call(83, SECRET, "assay_outputs.f32");
}
#endif
"""


def hostile_c(attempt: str, prelude: str, defines: dict[str, str]) -> str:
    rows = []
    for j in range(2):
        terms = " + ".join(f"input[{i}] * {float(WEIGHTS[i, j])!r}f" for i in range(3))
        rows.append(f"    output[{j}] = {terms} + {float(BIAS[j])!r}f;")
    macros = "".join(f"#define {name} {value}\n" for name, value in defines.items())
    return (f"{macros}{prelude}#include <errno.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
            'static void fail(const char *what)\n{\n    fprintf(stderr, "hostile: %s: %s\\n", what, strerror(errno));\n'
            "    fflush(stderr);\n    exit(3);\n}\n"
            "void dense(const float *input, float *output)\n{\n    static int tried;\n"
            + "\n".join(rows) + f"\n    if (!tried) {{\n        tried = 1;\n        {attempt}\n    }}\n}}\n")


@pytest.fixture(scope="module")
def dense_model(tmp_path_factory):
    import keras

    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.set_weights([WEIGHTS, BIAS])
    model.save(path)
    return path


class Listener:
    """A TCP server on the loopback that counts the connections it accepts."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()


def run_hostile(tmp_path, model, target: str) -> tuple[dict, dict]:
    """The campaign on ``target`` over the five hostile folders and an honest one: verdict and cause by name,
    and what lay outside the scratch folders."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("v")  # 'v': the byte the issue's example read back
    written = outside / "written.txt"
    listener = Listener()
    arm = target != "host"
    defines = {"SECRET": json.dumps(str(secret)), "WRITTEN": json.dumps(str(written)), "PORT": str(listener.port),
               "CONNECT": f'"{CONNECT % listener.port}"'}
    generators = {}
    # cortex-m4f (qemu-system-arm) has no system call to make a link with: its attack was the entry's (test_planted)
    for name in (*(h for h in HOSTILE if not (h == "link" and target == "cortex-m4f")), "honest"):
        folder = tmp_path / "c" / name
        folder.mkdir(parents=True)
        attempt = "" if name in ("honest", "include") else (ARM_ATTEMPTS if arm else HOST_ATTEMPTS)[name]
        prelude = (ARM_PRELUDE if arm else HOST_PRELUDE) + ("#include SECRET\n" if name == "include" else "")
        (folder / "net.c").write_text(hostile_c(attempt, prelude, defines))
        (folder / "assay.json").write_text(json.dumps({"entry": "dense", "input_size": 3, "output_size": 2}))
        generators[f"dir:{folder}"] = name
    settings = campaign.Settings(n_inputs=5, work_dir=tmp_path / "work", timeout=60, arbiter=False)
    store = ResultStore(tmp_path / "out" / "results.json")
    plan = campaign.plan([str(model)], list(generators), ["keras"], [target], settings)
    assert not plan.bad_input and len(plan.items) == len(generators)
    for item in plan.items:
        campaign.run_item(item, settings, store)
    verdicts = {generators[r["generator"]]: (r["verdict"], r["cause"]) for r in store.records()}
    isolation = {generators[r["generator"]]: r["provenance"]["isolation"]["sandbox"] for r in store.records()}
    listener.server.close()
    return verdicts, {"secret": secret.read_text(), "written": written.exists(), "accepted": listener.accepted,
                      "outside": sorted(p.name for p in outside.iterdir()), "isolation": isolation}


def check_refused(verdicts: dict, seen: dict, causes: dict) -> None:
    assert verdicts["honest"][0] == "pass", verdicts["honest"]  # the campaign went on after each
    for name, cause in causes.items():
        verdict, text = verdicts[name]
        assert verdict == "error" and "\n" not in text and cause in text, (name, verdict, text)
    assert seen["secret"] == "v" and not seen["written"] and seen["accepted"] == 0
    assert seen["outside"] == ["secret.txt"]
    assert set(seen["isolation"].values()) == {"bubblewrap"}


@needs_sandbox
@pytest.mark.tor("TOR-SEM-004")
def test_hostile_code_on_the_host_is_refused_and_the_campaign_goes_on(tmp_path, dense_model):
    verdicts, seen = run_hostile(tmp_path, dense_model, "host")
    check_refused(verdicts, seen, {
        "read": "secret.txt: No such file or directory",
        "write": "written.txt: No such file or directory",
        "socket": "hostile: connect: Connection refused",  # the sandbox's own loopback: nobody listens
        "processes": "hostile: fork: Resource temporarily unavailable",
        "memory": "hostile: malloc 10 GiB: Cannot allocate memory",
        "include": "secret.txt: No such file or directory",  # the compiler runs in the sandbox too
        "link": "the outputs file (outputs.f32) refused: a symbolic link",  # not followed to the secret
    })


@needs_sandbox
@pytest.mark.arm
@pytest.mark.parametrize("target", ["arm7tdmi", "cortex-m4f"])
def test_hostile_code_under_qemu_is_refused_and_the_campaign_goes_on(tmp_path, dense_model, target):
    verdicts, seen = run_hostile(tmp_path, dense_model, target)
    # qemu-arm runs the host command in the sandbox, which refuses; qemu-system-arm's filter refuses to start it
    filtered = "crashed with SIGSYS: the emulator's system-call filter refused"
    check_refused(verdicts, seen, {
        "read": "exited with status 3: hostile: read ",
        "write": "exited with status 3: hostile: write ",
        "socket": filtered if target == "cortex-m4f" else "exited with status 3: hostile: system: connect",
        "processes": filtered if target == "cortex-m4f" else "exited with status 3: hostile: system: fork",
        "memory": "exited with status 3: hostile: malloc 3 GiB",
        "include": "secret.txt: No such file or directory",
        **({} if target == "cortex-m4f" else {"link": "the outputs file (assay_outputs.f32) refused: a symbolic link"}),
    })


@needs_sandbox
def test_qemu_system_runs_under_its_own_system_call_filter():
    from harness import targets
    from harness.runners import qemu

    emulator = targets.get("cortex-m4f").emulator_path()
    assert qemu.has_seccomp(emulator)  # Debian's QEMU is built with it
