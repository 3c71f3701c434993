"""Driving OTAWA (``owcet``, ``mkff``) when it is installed, on the same ELF and flow facts.

OTAWA is not on any package registry Assay installs from; when ``owcet`` is on
PATH, ``run_owcet`` runs it::

    owcet -s SCRIPT [-p NAME=VALUE ...] ELF FUNCTION -f FLOWFACTS

``SCRIPT`` is a script OTAWA ships (``trivial``: 5 cycles per instruction;
``generic``; ``stm32``) or a path to a user's ``.osx`` script. The answer is
the ``WCET[FUNCTION] = N cycles`` line; a non-zero exit status, an ``ERROR:``
line, a missing WCET line or a time-out is an error result carrying OTAWA's
own message (../shared/otawa/README.md records real runs, e.g. exit status 2
and ``ERROR: otawa::FlowFactLoader ...: no bound for loop at 08000052`` for a
loop left at ``?``).

``mkff_loops`` runs ``mkff ELF FUNCTION``, whose output is an F4 template
listing every loop OTAWA finds with ``?`` bounds; ``uncovered_loops`` lists
those our flow facts do not bound (each one is an error for the caller).

``run_odisasm`` runs ``odisasm --cfg-raw -b -t -k ELF FUNCTION -f FLOWFACTS``:
OTAWA's decoding of every instruction of every CFG reached from the function
(address, bytes, text, kind, branch target), before its CFG transformations
(which duplicate a predicated instruction as ``(C) insn`` and ``NOP``);
``wcet.crosscheck`` compares it with Assay's decoding.

The tools are looked up in ``home``'s ``bin`` when a caller gives one (an
unpacked OTAWA, ``harness.core.otawa_install``), else on PATH, else in
``$OTAWA_HOME/bin``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from wcet import elfread
from wcet.errors import ConfigurationError
from wcet.facts import FlowFacts
from wcet.ffformat import FlowFactFormatError, parse_f4_statements

OWCET = "owcet"
MKFF = "mkff"
ODISASM = "odisasm"
SCRIPTS = ("trivial", "generic", "stm32")  # scripts of OTAWA's distribution recorded in ../shared/otawa
_WCET_LINE = re.compile(r"^WCET\[(?P<function>[^\]]+)\]\s*=\s*(?P<cycles>\d+)\s*cycles\s*$")
_ERROR_LINE = re.compile(r"^\s*ERROR:\s*(?P<message>.*)$")


@dataclass(frozen=True)
class OtawaResult:
    """One owcet run: ``wcet_cycles`` or ``error`` (never both), with what OTAWA printed."""

    wcet_cycles: int | None
    error: str | None
    stdout: str
    exit_status: int | None  # None: did not finish (timed out)
    command: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class MkffLoop:
    """A loop mkff lists: its header as written (``"fn" + 0xoff`` or an address) and the absolute address."""

    function: str | None
    offset: int
    address: int | None  # resolved with the ELF's symbols; None if the label is unknown
    line: int  # in mkff's output

    def label(self) -> str:
        where = f"{self.function} + {self.offset:#x}" if self.function else f"{self.offset:#x}"
        return where + (f" ({self.address:#x})" if self.address is not None and self.function else "")


def tool(name: str, home: Path | None = None) -> str | None:
    """The path of OTAWA's ``name`` (``owcet``, ``mkff``, ``odisasm``): in ``home``/bin when given, else on PATH,
    else in ``$OTAWA_HOME``/bin; None when it is nowhere."""
    if home is not None:
        path = Path(home) / "bin" / name
        return str(path) if path.is_file() else None
    found = shutil.which(name)
    if found is None and os.environ.get("OTAWA_HOME"):
        path = Path(os.environ["OTAWA_HOME"]) / "bin" / name
        found = str(path) if path.is_file() else None
    return found


def available(home: Path | None = None) -> bool:
    """Whether ``owcet`` is there (``tool``)."""
    return tool(OWCET, home) is not None


def mkff_available(home: Path | None = None) -> bool:
    return tool(MKFF, home) is not None


def owcet_command(elf: Path, function: str, ff_path: Path | None, script: str = "trivial",
                  params: Mapping[str, str] | None = None, home: Path | None = None) -> list[str]:
    """The owcet command line (``script``: a name from OTAWA's distribution or a path to an .osx file; no ``-f``
    without ``ff_path``)."""
    if "/" in script or script.endswith(".osx"):
        if not Path(script).is_file():
            raise ConfigurationError(f"OTAWA script {script}: no such file")
        script = str(Path(script).resolve())
    elif not re.fullmatch(r"[\w.+-]+", script):
        raise ConfigurationError(f"OTAWA script name '{script}' (expected one like {', '.join(SCRIPTS)}, or a path)")
    command = [tool(OWCET, home) or OWCET, "-s", script]
    for name, value in (params or {}).items():
        if not re.fullmatch(r"[\w.:-]+", str(name)):
            raise ConfigurationError(f"OTAWA parameter name '{name}'")
        command += ["-p", f"{name}={value}"]
    return command + [str(elf), function] + (["-f", str(ff_path)] if ff_path is not None else [])


def run_owcet(elf: Path, function: str, ff_path: Path, script: str = "trivial",
              params: Mapping[str, str] | None = None, timeout: float = 600.0,
              home: Path | None = None) -> OtawaResult:
    """Run owcet on ``elf``'s ``function`` with the flow facts ``ff_path`` (.ff or .ffx).

    Never raises for what OTAWA does: a failure is an ``OtawaResult`` with
    ``error`` set to OTAWA's message (or the exit status, or the time-out).
    A missing ``owcet`` is a ``ConfigurationError``.
    """
    if not available(home):
        raise ConfigurationError("OTAWA's owcet is not on PATH (OTAWA is not on the package registries: "
                                 "'bash .ci/setup --otawa' unpacks ../shared/otawa-bin; Assay's own analyzer does "
                                 "not need it)")
    command = owcet_command(Path(elf), function, Path(ff_path), script, params, home)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                                stdin=subprocess.DEVNULL, cwd=Path(elf).resolve().parent)
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        return OtawaResult(None, f"owcet did not finish within {timeout:g} s", output, None, tuple(command))
    except OSError as exc:
        return OtawaResult(None, f"cannot run owcet: {exc.strerror}", "", None, tuple(command))
    output = result.stdout + (("\n" if result.stdout and not result.stdout.endswith("\n") else "") + result.stderr
                              if result.stderr else "")
    parsed = parse_owcet_output(output, result.returncode, function)
    return OtawaResult(parsed.wcet_cycles, parsed.error, output, result.returncode, tuple(command))


def _text(data) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def parse_owcet_output(output: str, exit_status: int | None, function: str | None = None) -> OtawaResult:
    """Read what owcet printed: ``WCET[fn] = N cycles``, or the error (``ERROR:`` lines, exit status)."""
    wcets = {}
    errors = []
    for line in output.splitlines():
        match = _WCET_LINE.match(line.strip())
        if match:
            wcets[match.group("function")] = int(match.group("cycles"))
        error = _ERROR_LINE.match(line)
        if error:
            errors.append(error.group("message").strip())
    if errors or exit_status != 0:
        message = "; ".join(errors)
        if exit_status is None:
            message = message or "owcet did not finish"
        elif exit_status != 0:
            message = f"owcet exited with status {exit_status}" + (f": {message}" if message else _last_line(output))
        return OtawaResult(None, message, output, exit_status)
    if function is not None:
        if function not in wcets:
            other = f" (it printed WCET[{', '.join(wcets)}])" if wcets else ""
            return OtawaResult(None, f"owcet printed no WCET[{function}] line{other}", output, exit_status)
        return OtawaResult(wcets[function], None, output, exit_status)
    if len(wcets) != 1:
        return OtawaResult(None, f"owcet printed {len(wcets)} WCET lines", output, exit_status)
    return OtawaResult(next(iter(wcets.values())), None, output, exit_status)


def _last_line(output: str) -> str:
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    return f": {lines[-1]}" if lines else " and printed nothing"


def mkff_loops(elf: Path, function: str, timeout: float = 600.0, home: Path | None = None) -> list[MkffLoop]:
    """The loops ``mkff ELF FUNCTION`` finds (its F4 template, read strictly)."""
    if not mkff_available(home):
        raise ConfigurationError("OTAWA's mkff is not on PATH")
    command = [tool(MKFF, home) or MKFF, str(elf), function]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                                stdin=subprocess.DEVNULL, cwd=Path(elf).resolve().parent)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(f"mkff did not finish within {timeout:g} s on {elf}") from None
    if result.returncode != 0:
        message = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise ConfigurationError(f"mkff exited with status {result.returncode}" + (f": {message[-1]}" if message else ""))
    return parse_mkff_output(result.stdout, function_symbols(elf), name=f"mkff {Path(elf).name} {function}")


def parse_mkff_output(text: str, symbols: Mapping[str, int] | None = None, name: str = "mkff") -> list[MkffLoop]:
    """The loops of mkff's template (F4 with ``?`` bounds), with absolute addresses when ``symbols`` know them."""
    try:
        statements = parse_f4_statements(text, name)
    except FlowFactFormatError as exc:
        raise ConfigurationError(f"mkff printed something Assay cannot read: {exc}") from None
    loops = []
    for statement in statements:
        if statement.kind != "loop":
            continue
        label, offset = statement.address.label, statement.address.offset
        if label is None:
            loops.append(MkffLoop(None, offset, offset, statement.line))
        else:
            base = (symbols or {}).get(label)
            loops.append(MkffLoop(label, offset, None if base is None else base + offset, statement.line))
    return loops


def uncovered_loops(loops: list[MkffLoop], facts: FlowFacts, symbols: Mapping[str, int] | None = None) -> list[str]:
    """A problem for each loop mkff lists that ``facts`` do not bound (compared by absolute address)."""
    symbols = symbols or {}
    bounded_addresses, bounded_names = set(), set()
    for loop in facts.loops:
        if loop.function is None:
            bounded_addresses.add(loop.offset)
        else:
            bounded_names.add((loop.function, loop.offset))
            if loop.function in symbols:
                bounded_addresses.add(symbols[loop.function] + loop.offset)
    problems = []
    for loop in loops:
        if (loop.function, loop.offset) in bounded_names or (loop.address is not None
                                                             and loop.address in bounded_addresses):
            continue
        problems.append(f"mkff finds a loop at {loop.label()} that the flow facts do not bound")
    return problems


def function_symbols(elf: Path) -> dict[str, int]:
    """Every function symbol of ``elf`` -> its address (Thumb bit cleared)."""
    symbols = {}
    for name, value, _, info, section in elfread.ElfFile(Path(elf)).symbols():
        if info & 0xF == 2 and section != 0:  # STT_FUNC, not SHN_UNDEF
            symbols.setdefault(name, value & ~1)
    return symbols


def mkff_problems(elf: Path, function: str, facts: FlowFacts, timeout: float = 600.0) -> list[str]:
    """Run mkff and list every loop it finds that ``facts`` leave unbounded (empty: all covered)."""
    return uncovered_loops(mkff_loops(elf, function, timeout), facts, function_symbols(elf))


# ---------------------------------------------------------------- odisasm


@dataclass(frozen=True)
class OtawaInsn:
    """One instruction as ``odisasm -b -t -k`` prints it: its address, size (from its bytes), text, kind
    (``CONTROL``, ``COND``, ``CALL``, ``RETURN``, ... as OTAWA names them) and direct branch target (None: none
    printed). ``lines`` are the printed lines, for an excerpt."""

    address: int
    size: int
    text: str
    kind: tuple[str, ...]
    target: int | None
    lines: tuple[str, ...]

    @property
    def control(self) -> bool:
        return "CONTROL" in self.kind


_ODISASM_FUNCTION = re.compile(r"^# FUNCTION (?P<name>\S+)\s*$")
_ODISASM_INSN = re.compile(r"^(?P<address>[0-9a-fA-F]{8})\s+(?P<bytes>[0-9a-fA-F]+)\s+(?P<text>.*?)\s*$")
_ODISASM_KIND = re.compile(r"^\s+kind\s*=\s*(?P<kind>[^(]*)")
_ODISASM_TARGET = re.compile(r"^\s+target\s*=\s*(?P<target>[0-9a-fA-F]+|unknown)\s*$")


def parse_odisasm_output(text: str) -> dict[str, list[OtawaInsn]]:
    """``odisasm -b -t -k`` output: function name (as OTAWA names the CFG) -> its instructions, as printed.

    ``-b`` prints each byte as two characters (in memory order), so the size is half their number."""
    functions: dict[str, list[OtawaInsn]] = {}
    current: list[OtawaInsn] | None = None
    pending: dict | None = None

    def flush() -> None:
        if pending is not None and current is not None:
            current.append(OtawaInsn(pending["address"], pending["size"], pending["text"], tuple(pending["kind"]),
                                     pending["target"], tuple(pending["lines"])))

    for line in text.splitlines():
        match = _ODISASM_FUNCTION.match(line)
        if match:
            flush()
            pending = None
            current = functions.setdefault(match.group("name"), [])
            continue
        match = _ODISASM_INSN.match(line)
        if match and current is not None:
            flush()
            pending = {"address": int(match.group("address"), 16), "size": len(match.group("bytes")) // 2,
                       "text": match.group("text"), "kind": [], "target": None, "lines": [line.rstrip()]}
            continue
        if pending is None:
            continue
        match = _ODISASM_KIND.match(line)
        if match:
            pending["kind"] = match.group("kind").split()
            pending["lines"].append(line.rstrip())
            continue
        match = _ODISASM_TARGET.match(line)
        if match:
            pending["target"] = None if match.group("target") == "unknown" else int(match.group("target"), 16)
            pending["lines"].append(line.rstrip())
    flush()
    return functions


def odisasm_command(elf: Path, function: str, ff_path: Path | None = None, home: Path | None = None) -> list[str]:
    """The odisasm command line that prints OTAWA's raw decoding of every CFG reached from ``function``."""
    command = [tool(ODISASM, home) or ODISASM, "--cfg-raw", "-b", "-t", "-k", str(elf), function]
    return command + (["-f", str(ff_path)] if ff_path is not None else [])


def run_odisasm(elf: Path, function: str, ff_path: Path | None = None, timeout: float = 600.0,
                home: Path | None = None) -> dict[str, list[OtawaInsn]]:
    """OTAWA's decoding of the CFGs reached from ``function`` (``parse_odisasm_output``); a failure of odisasm is a
    ``ConfigurationError`` with its message."""
    if tool(ODISASM, home) is None:
        raise ConfigurationError("OTAWA's odisasm is not on PATH")
    command = odisasm_command(Path(elf), function, ff_path, home)
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                                stdin=subprocess.DEVNULL, cwd=Path(elf).resolve().parent)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(f"odisasm did not finish within {timeout:g} s on {elf}") from None
    errors = [m.group("message").strip() for m in map(_ERROR_LINE.match, result.stdout.splitlines()
                                                      + result.stderr.splitlines()) if m]
    if result.returncode != 0 or errors:
        raise ConfigurationError(f"odisasm exited with status {result.returncode}"
                                 + (f": {'; '.join(errors)}" if errors else _last_line(result.stderr)))
    return parse_odisasm_output(result.stdout)
