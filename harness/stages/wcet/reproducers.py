"""OTAWA's decoder errors found by ``assay wcet --engine both``, as upstream-ready reproducers.

For each decoder divergence in ``wcet.json`` (the first one per declared
error, and every unexplained one), a folder ``OUT/otawa-reproducers/<name>/``
holds what an OTAWA maintainer needs and nothing of Assay: ``probe.S`` (the
instruction's own bytes, ``.inst``, in a function ``probe`` of its own),
``run.sh`` (build it with ``arm-none-eabi-gcc``, then ``odisasm`` and
``owcet -s trivial`` on it), ``README.md`` (the error, expected against actual,
where it was found) and, when the toolchain and OTAWA are here, ``probe.elf``
with ``odisasm.out`` and ``owcet.out``, OTAWA's actual outputs on it, which the
README quotes. Expected is Assay's decoding (capstone), which the README
names; actual is OTAWA's on the tiny ELF, never typed in.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from harness.core.results import ResultStore
from harness.stages.wcet.spec import SPEC

RUN_TIMEOUT_S = 120.0
_FLAGS = {True: ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"], False: ["-mcpu=arm7tdmi"]}


def divergences(records: list[dict]) -> dict[str, tuple[dict, dict]]:
    """name -> (the divergence, the cross-check it comes from): the first decoder divergence per declared error
    (by record order), and each unexplained one (named by its function and address)."""
    found: dict[str, tuple[dict, dict]] = {}
    for record in records:
        for check in ((record.get("crosscheck") or {}).get("files") or {}).values():
            divergence = check.get("divergence")
            if not divergence or not divergence.get("encoding"):
                continue
            explanation = check.get("explanation")
            if explanation is not None and explanation["kind"] != "decoder":
                continue
            name = (explanation["name"] if explanation
                    else f"unexplained-{divergence['function']}-{divergence['address']}")
            found.setdefault(name, (divergence, check))
    return found


def probe_source(divergence: dict) -> str:
    """``probe.S``: the instruction as ``.inst`` (its own bytes: an assembler need not accept Assay's text of it)
    in a function ``probe`` that returns, and ``_start``, the image's entry."""
    encoding = bytes.fromhex(divergence["encoding"])
    thumb = divergence["thumb"]
    if thumb:
        halves = [int.from_bytes(encoding[i:i + 2], "little") for i in range(0, len(encoding), 2)]
        inst = (f".inst.w 0x{halves[0]:04x}{halves[1]:04x}" if len(halves) == 2 else f".inst.n 0x{halves[0]:04x}")
        header = ".syntax unified\n.thumb\n"
    else:
        inst, header = f".inst 0x{int.from_bytes(encoding, 'little'):08x}", ".arm\n"
    text = (divergence.get("assay") or {}).get("text", "?")
    return (f"@ {text}: the instruction at {divergence['address']} of {divergence['function']}, by its bytes "
            f"({encoding.hex()})\n{header}.text\n.global probe\n.type probe, %function\nprobe:\n\t{inst}\n\tbx lr\n"
            ".size probe, . - probe\n.global _start\n.type _start, %function\n_start:\n\tbl probe\n1:\tb 1b\n")


def build_command(thumb: bool) -> list[str]:
    return ["arm-none-eabi-gcc", *_FLAGS[thumb], "-g", "-nostdlib", "-nostartfiles", "-Wl,-e,_start",
            "-Wl,-Ttext=0x8000", "probe.S", "-o", "probe.elf"]


def write(wcet_json: Path, out: Path, otawa_home: Callable[[], Path | None]) -> list[Path]:
    """A reproducer folder per divergence of ``wcet_json`` in ``out`` (module docstring); the README paths."""
    from wcet import otawa

    written = []
    found = divergences(ResultStore.of(SPEC, wcet_json).records())
    try:
        home = otawa_home()
    except Exception:  # OTAWA gone since the campaign: the folder without OTAWA's outputs, and says so
        home = False
    for name, (divergence, check) in found.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "probe.S").write_text(probe_source(divergence))
        commands = [" ".join(build_command(divergence["thumb"])), "odisasm --cfg-raw -b -t -k probe.elf probe",
                    "owcet -s trivial probe.elf probe"]
        (folder / "run.sh").write_text("#!/bin/sh\n# needs arm-none-eabi-gcc and OTAWA's bin on PATH\nset -e\n"
                                       + "\n".join(commands) + "\n")
        (folder / "run.sh").chmod(0o755)
        actual = _run(folder, divergence["thumb"], None if home is False else home, otawa)
        (folder / "README.md").write_text(_readme(name, divergence, check, commands, actual))
        written.append(folder / "README.md")
    return written


def _run(folder: Path, thumb: bool, home, otawa) -> dict[str, str]:
    """Build the probe and run OTAWA on it; what each printed, or why it was not run."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return {"build": "not built: arm-none-eabi-gcc not on PATH"}
    built = subprocess.run(build_command(thumb), cwd=folder, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                           check=False)
    if built.returncode != 0:
        return {"build": f"arm-none-eabi-gcc exited {built.returncode}: {built.stderr.strip()}"}
    outputs = {"build": "built", "assay": _assay_bound(folder / "probe.elf")}
    if home is False or not otawa.available(home):
        return {**outputs, "otawa": "not run: OTAWA is not installed here"}
    for key, command in (("odisasm", otawa.odisasm_command(folder / "probe.elf", "probe", None, home)),
                         ("owcet", otawa.owcet_command(folder / "probe.elf", "probe", None, "trivial", None, home))):
        result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                check=False, stdin=subprocess.DEVNULL)
        text = result.stdout + result.stderr
        (folder / f"{key}.out").write_text(text + f"exit status: {result.returncode}\n")
        outputs[key] = text.strip()
    return outputs


def _assay_bound(elf: Path) -> str:
    """Assay's figure for ``probe`` in the tiny ELF (trivial timing), or why there is none."""
    from wcet import bound, timing
    from wcet.errors import WcetError

    try:
        return f"WCET[probe] = {bound.bound(elf, 'probe', timing.get('trivial')).wcet_cycles} cycles"
    except WcetError as exc:
        return f"no figure: {exc}"


def _readme(name: str, divergence: dict, check: dict, commands: list[str], actual: dict[str, str]) -> str:
    explanation = check.get("explanation")
    assay, theirs = divergence.get("assay") or {}, divergence.get("otawa") or {}
    expected = (f"`{assay.get('text')}`: one instruction of {assay.get('size')} bytes"
                + (", a control instruction (it writes the pc)" if assay.get("control") else "")
                if assay else "not reached")
    found = (f"`{theirs.get('text')}`, {theirs.get('size')} bytes"
             + (", a control instruction" if theirs.get("control") else ", not a control instruction")
             if theirs else "not reached")
    lines = [f"# OTAWA: {name}", "",
             (explanation["description"] + "." if explanation else
              f"Unexplained: the {divergence['what']} of this instruction differs between OTAWA and Assay."), "",
             "## Reproduce", "", "```sh", *commands, "```", "",
             "## Expected", "",
             f"{expected} (capstone 5's decoding, as Assay reads it); `probe` is it and `bx lr`, two instructions "
             f"at 5 cycles each under `trivial`. Assay's analyzer on `probe.elf` (`python -m wcet probe.elf probe`): "
             f"{actual.get('assay', 'not built')}.", "",
             "## Actual", "", f"Where found: {found} (the {divergence['what']} differs).", ""]
    if "odisasm" in actual:
        lines += ["`odisasm` on `probe.elf` (odisasm.out):", "", "```", actual["odisasm"], "```", "",
                  "`owcet -s trivial probe.elf probe` (owcet.out):", "", "```", actual["owcet"], "```", ""]
    else:
        lines += [f"Not run here: {actual.get('otawa') or actual.get('build')}.", ""]
    lines += ["`odisasm --cfg-raw -b -t -k` where it was found (bytes as odisasm prints them):", "", "```",
              *divergence["excerpt"], "```", "",
              f"Found by `assay wcet --engine both` in {divergence['function']} at {divergence['address']} of "
              f"`{Path(check['elf']).name}` ({check['function']}: Assay {check['assay_cycles']} cycles, OTAWA "
              f"{check['otawa_cycles'] if check['otawa_error'] is None else check['otawa_error']}), with "
              f"`{' '.join(Path(part).name if i == 0 else part for i, part in enumerate(check['otawa_command']))}`.",
              ""]
    return "\n".join(lines)
