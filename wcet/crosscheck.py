"""Two independent analyses of one function: Assay's analyzer and OTAWA's ``owcet``, with their disagreements
located and explained (``assay wcet --engine both``).

Both read the same ELF and the same flow facts (``.ff`` or ``.ffx``) under the
same cost model (``trivial``: 5 cycles per instruction, OTAWA's script of that
name). ``cross_check`` runs both on the function. When the figures differ, or
OTAWA gives none, it locates the cause with checks, not guesses:

1. **Per function.** Every routine Assay analysed is bounded alone by both
   tools (``FunctionAgreement``); the routines whose figures differ are where
   the cause lies.
2. **Decoding.** OTAWA's raw decoding of every CFG reached from the function
   (``odisasm --cfg-raw``, ``wcet.otawa.run_odisasm``) is compared with Assay's
   (the instructions of its CFGs), routine by routine, in address order: the
   first instruction whose decoded length or branch target (direct target, or
   whether it is a control instruction at all) differs, or that one tool
   reaches and the other does not, is the ``Divergence``, with OTAWA's lines
   around it (``excerpt``). Code that only Assay reaches is traced back to the
   indirect branch or call that leads there, whose targets OTAWA did not follow.
3. **Explanation.** The divergence, or the absence of one, is matched against
   ``OTAWA_ERRORS``, the declared list of OTAWA's known faults, each with the
   check that recognises it: two decoder errors of OTAWA's armv7t loader
   (``decoder``); a table branch OTAWA leaves unresolved (``cfg``); an FFX
   ``multicall`` OTAWA ignores and call-context bounds it does not apply
   (``flowfacts``: the first recognised by OTAWA's own warning, the second by
   Assay's figure without those bounds, which is then computed); its ILP
   solver's answer (lp_solve 5.5, floating point) where it stops below the
   exact optimum or does not finish (``ilp``), recognised only when every
   routine's own figure and the whole decoding agree and Assay's optimum is
   certified in exact arithmetic.

A disagreement that matches no declared error is reported as unexplained: for
a certification user, it is a finding to investigate, never silently accepted.
A divergence carries the instruction's bytes and state, from which
``harness/stages/wcet/reproducers.py`` makes an upstream-ready case.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from wcet import otawa
from wcet.errors import WcetError

EXCERPT_CONTEXT = 2  # instructions printed on each side of a divergence
AGREE, EXPLAINED, UNEXPLAINED, NOT_COMPARED = "agree", "explained", "unexplained", "not compared"


@dataclass(frozen=True)
class Decoded:
    """One instruction as a tool decoded it: size in bytes, text, whether it is a control instruction, and its
    direct target (None: none, or an indirect one)."""

    size: int
    text: str
    control: bool
    target: int | None
    indirect: bool = False  # a jump or call through a register or a table (Assay: its targets in ``successors``)
    successors: tuple[int, ...] = ()  # Assay: where control goes from it in the CFG (branch and jump edges)

    def as_dict(self) -> dict:
        return {"size": self.size, "text": self.text, "control": self.control,
                "target": None if self.target is None else f"{self.target:#x}", "indirect": self.indirect,
                "successors": [f"{address:#x}" for address in self.successors]}


@dataclass(frozen=True)
class Divergence:
    """The first instruction whose decoding differs between Assay and OTAWA (None on a side: not reached there)."""

    function: str
    address: int
    assay: Decoded | None
    otawa: Decoded | None
    # "length", "branch target", "control", "indirect targets" (an indirect branch whose targets Assay follows and
    # OTAWA does not), "reached by Assay only", "reached by OTAWA only"
    what: str
    excerpt: tuple[str, ...]  # OTAWA's odisasm lines around it
    encoding: bytes = b""  # the instruction's bytes in the ELF (Assay's length)
    thumb: bool = False

    def describe(self) -> str:
        assay = f"Assay: {self.assay.text} ({self.assay.size} bytes)" if self.assay else "Assay: not reached"
        theirs = f"OTAWA: {self.otawa.text} ({self.otawa.size} bytes)" if self.otawa else "OTAWA: not reached"
        return f"{self.function} at {self.address:#x}: {self.what} differs; {assay}; {theirs}"

    def as_dict(self) -> dict:
        return {"function": self.function, "address": f"{self.address:#x}", "what": self.what,
                "assay": self.assay.as_dict() if self.assay else None,
                "otawa": self.otawa.as_dict() if self.otawa else None, "excerpt": list(self.excerpt),
                "encoding": self.encoding.hex(), "thumb": self.thumb}


@dataclass(frozen=True)
class FunctionAgreement:
    """One routine bounded alone by both tools."""

    function: str
    assay_cycles: int | None
    otawa_cycles: int | None
    otawa_error: str | None = None

    @property
    def agree(self) -> bool:
        return self.otawa_error is None and self.assay_cycles == self.otawa_cycles

    def as_dict(self) -> dict:
        return {"function": self.function, "assay_cycles": self.assay_cycles, "otawa_cycles": self.otawa_cycles,
                "otawa_error": self.otawa_error, "agree": self.agree}


@dataclass(frozen=True)
class OtawaError:
    """A declared fault of OTAWA, with the check that recognises it (``matches``) and what to tell upstream."""

    name: str
    kind: str  # "decoder" or "ilp"
    description: str
    matches: Callable[["CrossCheck"], bool] = field(compare=False, repr=False)


@dataclass
class CrossCheck:
    """What ``cross_check`` found for one function; ``status`` is ``agree``, ``explained`` (a declared OTAWA
    error: ``explanation``) or ``unexplained``."""

    elf: str
    function: str
    flow_facts: str
    assay_cycles: int
    assay_certified: bool
    otawa_cycles: int | None
    otawa_error: str | None
    otawa_command: tuple[str, ...]
    functions: list[FunctionAgreement] = field(default_factory=list)
    divergence: Divergence | None = None
    explanation: OtawaError | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    otawa_warnings: tuple[str, ...] = ()  # OTAWA's WARNING lines (a flow fact it ignored, a CFG it found odd)
    # Assay's figure with the call-context loop bounds left out (None: the facts have none, or not computed)
    assay_cycles_without_contexts: int | None = None
    facts_format: str = ""  # ".ff" or ".ffx"

    @property
    def agree(self) -> bool:
        return self.otawa_error is None and self.otawa_cycles == self.assay_cycles

    @property
    def status(self) -> str:
        return AGREE if self.agree else EXPLAINED if self.explanation is not None else UNEXPLAINED

    def describe(self) -> str:
        """One line: the two figures and, on a difference, its cause."""
        theirs = f"OTAWA {self.otawa_cycles}" if self.otawa_error is None else f"OTAWA: {self.otawa_error}"
        line = f"{self.function}: Assay {self.assay_cycles}, {theirs}: {self.status}"
        if self.explanation is not None:
            line += f" (OTAWA {self.explanation.kind} error '{self.explanation.name}')"
        if self.divergence is not None:
            line += f"; first divergence: {self.divergence.describe()}"
        elif not self.agree:
            differing = [f.function for f in self.functions if not f.agree]
            line += ("; every routine alone and the whole decoding agree" if not differing
                     else f"; routines that differ alone: {', '.join(differing)}")
        return line

    def as_dict(self) -> dict:
        return {"elf": self.elf, "function": self.function, "flow_facts": self.flow_facts, "status": self.status,
                "assay_cycles": self.assay_cycles, "assay_certified": self.assay_certified,
                "otawa_cycles": self.otawa_cycles, "otawa_error": self.otawa_error,
                "otawa_command": list(self.otawa_command), "otawa_warnings": list(self.otawa_warnings),
                "assay_cycles_without_contexts": self.assay_cycles_without_contexts,
                "difference": (None if self.otawa_cycles is None else self.otawa_cycles - self.assay_cycles),
                "functions": [f.as_dict() for f in self.functions],
                "divergence": self.divergence.as_dict() if self.divergence else None,
                "explanation": None if self.explanation is None else {
                    "name": self.explanation.name, "kind": self.explanation.kind,
                    "description": self.explanation.description},
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}}


# ---------------------------------------------------------------- the declared OTAWA errors


def _is_vnmls(check: CrossCheck) -> bool:
    found = check.divergence
    return (found is not None and found.assay is not None and found.assay.text.startswith("vnmls")
            and (found.otawa is None or found.otawa.size != found.assay.size
                 or found.otawa.text.startswith("<unknown>")))


def _ldr_pc_not_a_branch(check: CrossCheck) -> bool:
    found = check.divergence
    if found is None or found.assay is None or found.otawa is None:
        return False
    mnemonic, _, operands = found.assay.text.partition(" ")
    return (mnemonic.startswith("ldr") and operands.startswith("pc,") and found.assay.control
            and not found.otawa.control)


def _contexts_ignored(check: CrossCheck) -> bool:
    """OTAWA's figure is Assay's without the call-context loop bounds: it applied only the context-free ones."""
    return (check.assay_cycles_without_contexts is not None and check.otawa_error is None
            and check.otawa_cycles == check.assay_cycles_without_contexts != check.assay_cycles)


def _ffx_multicall_ignored(check: CrossCheck) -> bool:
    """OTAWA said it ignored a multicall of the .ffx file ("no call found") at an indirect call Assay follows."""
    return check.facts_format == ".ffx" and any("multicall ignored" in line and "no call found" in line
                                                for line in check.otawa_warnings)


def _unresolved_indirect(check: CrossCheck) -> bool:
    found = check.divergence
    return (found is not None and found.what == "indirect targets" and found.otawa is not None
            and found.otawa.control and found.otawa.target is None)


def _ilp_only(check: CrossCheck) -> bool:
    """OTAWA's figure is below Assay's certified optimum, or missing for lack of time, while every routine alone
    and every decoded instruction agree: the two tools solve the same IPET problem and OTAWA's solver answers
    otherwise."""
    if check.divergence is not None or not check.functions or not check.assay_certified:
        return False
    if not all(f.agree for f in check.functions if f.function != check.function):
        return False
    if check.otawa_error is not None:
        return "did not finish" in check.otawa_error
    return check.otawa_cycles is not None and check.otawa_cycles < check.assay_cycles


OTAWA_ERRORS: tuple[OtawaError, ...] = (
    OtawaError("ffx-multicall-not-a-call", "flowfacts",
               "OTAWA's FFX loader applies <multicall> only to an instruction its decoder marks as a call; ARMv4T's "
               "indirect call (mov lr, pc; bx rN: what gcc emits for a function pointer on the ARM7TDMI) is none, so "
               "it warns 'multicall ignored ... no call found' and the path ends at the call (a figure far too low), "
               "where the same F4 multicall statement is applied",
               _ffx_multicall_ignored),
    OtawaError("context-bounds-ignored", "flowfacts",
               "owcet -s trivial (with -p virtual=true, without which it reads no call context) does not tighten a "
               "loop by a call-context bound (F4 'in \"f\" / @site', FFX nesting of <function> and <call>) when a "
               "context-free bound is given for it too, where Assay takes the tightest applicable bound: its figure "
               "is Assay's without the contextual bounds (sound, looser)",
               _contexts_ignored),
    OtawaError("vnmls-unknown", "decoder",
               "OTAWA's armv7t decoder (8962987) reads the 32-bit VFP instruction vnmls.f32 as a 16-bit <unknown> "
               "followed by another instruction, so it counts two instructions where one runs",
               _is_vnmls),
    OtawaError("ldr-pc-not-a-branch", "decoder",
               "OTAWA's armv7t decoder does not mark a load into the pc (ldr.w pc, [...], a Thumb-2 jump table) "
               "as a control instruction, so its CFG falls through to the next instruction instead of the table's "
               "targets",
               _ldr_pc_not_a_branch),
    OtawaError("unresolved-indirect-branch", "cfg",
               "OTAWA decodes the table branch (ldrls pc, [pc, rI, lsl #2], tbb, tbh) as a control instruction with "
               "an unknown target and, without a multibranch fact for it, ends the path there: its figure leaves out "
               "every case of the switch (too low, unsound); Assay reads the table from the ELF, bounded by the range "
               "check before it. A multibranch statement giving the table's targets makes OTAWA follow them",
               _unresolved_indirect),
    OtawaError("lp_solve-ilp", "ilp",
               "OTAWA's ILP (one problem for the whole program, callees shared) solved by lp_solve 5.5 in floating "
               "point: on large soft-float programs its answer is below the exact optimum of the same IPET problem "
               "(Assay's, proved in integer arithmetic) or it does not finish; every routine bounded alone and every "
               "decoded instruction agree",
               _ilp_only),
)


def explain(check: CrossCheck) -> OtawaError | None:
    """The first declared OTAWA error whose check recognises this disagreement (None: unexplained)."""
    return next((error for error in OTAWA_ERRORS if error.matches(check)), None)


# ---------------------------------------------------------------- the cross-check


def cross_check(elf: Path, function: str, flow_facts: Path, timing="trivial", script: str = "trivial",
                home: Path | None = None, timeout: float = 120.0, facts=None, program=None) -> CrossCheck:
    """Both analyses of ``function`` in ``elf`` with the flow facts ``flow_facts`` (.ff or .ffx), and on a
    difference its located cause (module docstring). ``facts``: the facts already read from that file (else they
    are read here, with the library annotations); ``timing``: Assay's model, which must be what ``script``
    computes (``trivial``). OTAWA's tools are looked up as ``wcet.otawa.tool`` does (``home``)."""
    from wcet import bound
    from wcet.analyzer import analyze
    from wcet.program import load_program

    elf, flow_facts = Path(elf), Path(flow_facts)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    program = program or load_program(elf)
    facts = facts if facts is not None else bound.facts_for_elf(elf, flow_facts, function)
    result = analyze(program, function, facts, timing)
    seconds["assay"] = time.perf_counter() - start
    start = time.perf_counter()
    params = otawa_params(facts)
    outcome = otawa.run_owcet(elf, function, flow_facts, script, params, timeout=timeout, home=home)
    seconds["otawa"] = time.perf_counter() - start
    check = CrossCheck(str(elf), function, str(flow_facts), int(result.wcet_cycles), result.certified,
                       outcome.wcet_cycles, outcome.error, outcome.command, seconds=seconds,
                       otawa_warnings=tuple(line.strip() for line in outcome.stdout.splitlines()
                                            if "WARNING" in line and "no flow fact file" not in line),
                       facts_format=flow_facts.suffix)
    if check.agree:
        check.functions = [FunctionAgreement(function, check.assay_cycles, check.otawa_cycles)]
        return check
    start = time.perf_counter()
    if any(loop.context for loop in facts.loops):
        free = facts._replace(loops=tuple(loop for loop in facts.loops if not loop.context))
        check.assay_cycles_without_contexts = int(analyze(program, function, free, timing).wcet_cycles)
    check.functions = _per_function(program, elf, result.functions, facts, flow_facts, timing, script, home, timeout,
                                    {function: (check.assay_cycles, outcome)})
    check.divergence = first_divergence(program, elf, function, facts, flow_facts, home, timeout,
                                        [f.function for f in check.functions if not f.agree])
    check.explanation = explain(check)
    seconds["locate"] = time.perf_counter() - start
    return check


def otawa_params(facts) -> dict[str, str]:
    """owcet's script parameters for these facts: ``virtual=true`` (call virtualisation) when some loop bound
    holds in a call context only, without which OTAWA reads no context at all (../shared/otawa's FFX run)."""
    return {"virtual": "true"} if any(loop.context for loop in facts.loops) else {}


def _per_function(program, elf: Path, names: list[str], facts, flow_facts: Path, timing, script: str,
                  home: Path | None, timeout: float, known: dict) -> list[FunctionAgreement]:
    from wcet.analyzer import analyze

    agreements = []
    for name in names:
        if name in known:
            cycles, outcome = known[name]
        else:
            try:
                cycles = int(analyze(program, name, facts, timing).wcet_cycles)
            except WcetError:
                cycles = None
            outcome = otawa.run_owcet(elf, name, flow_facts, script, otawa_params(facts), timeout=timeout, home=home)
        agreements.append(FunctionAgreement(name, cycles, outcome.wcet_cycles, outcome.error))
    return agreements


def assay_decoding(program, function: str, facts) -> dict[int, dict[int, Decoded]]:
    """Assay's decoding of every routine reached from ``function``: routine entry -> address -> ``Decoded``."""
    from wcet.armcode import flow

    routines: dict[int, dict[int, Decoded]] = {}
    pending = [program.address(function)]
    while pending:
        entry = pending.pop()
        if entry in routines:
            continue
        cfg = program.cfg(entry, facts)
        decoded = routines[entry] = {}
        jumps: dict[int, set[int]] = {}
        for edge in cfg.edges:  # where control goes from a block's last instruction, the return point of a call too
            if edge.kind in ("branch", "call") and edge.source in cfg.blocks:
                jumps.setdefault(edge.source, set()).add(edge.target)
        for block in cfg.blocks.values():
            for insn in block.instructions:
                effect = flow(insn)
                target = effect.target if effect.kind in ("branch", "call") else None
                successors = tuple(sorted(jumps.get(block.start, ()))) if insn is block.instructions[-1] else ()
                decoded[insn.address] = Decoded(insn.size, f"{insn.mnemonic} {insn.op_str}".strip(),
                                                effect.kind != "none", target,
                                                effect.kind in ("indirect-call", "indirect-jump", "jump-table"),
                                                successors)
        for edge in cfg.edges:
            pending += [callee for callee in edge.callees if callee not in routines]
    return routines


def first_divergence(program, elf: Path, function: str, facts, flow_facts: Path | None, home: Path | None = None,
                     timeout: float = 120.0, first: list[str] | None = None) -> Divergence | None:
    """The first instruction whose decoding differs (module docstring), looked for in the routines named in
    ``first`` before the others; None when every instruction both tools reach is decoded alike and both reach
    the same ones."""
    theirs = otawa.run_odisasm(elf, function, flow_facts, timeout=timeout, home=home)
    ours = assay_decoding(program, function, facts)
    by_address = {}
    for name, insns in theirs.items():  # OTAWA names a CFG by one of its entry's symbols (__mulsf3 for __aeabi_fmul)
        if insns:
            by_address.setdefault(_entry_of(program, name, insns), (name, insns))
    suspects = {_entry_of(program, name, []) for name in first or []}
    order = sorted(ours, key=lambda entry: (entry not in suspects, entry))
    for entry in order:
        name = program.name(entry)
        _, insns = by_address.get(entry, (name, []))
        found = _divergence(program, name, ours[entry], insns)
        if found is not None:
            return found
    return None


def _entry_of(program, name: str, insns) -> int | None:
    try:
        return program.address(name)
    except WcetError:
        return insns[0].address if insns else None


def _divergence(program, name: str, ours: dict[int, Decoded], insns: list) -> Divergence | None:
    theirs = {}
    for insn in insns:
        theirs.setdefault(insn.address, insn)
    listing = sorted(theirs.values(), key=lambda i: i.address)
    for address in sorted(set(ours) | set(theirs)):
        mine, other = ours.get(address), theirs.get(address)
        otawa_decoded = None if other is None else Decoded(other.size, other.text, other.control, other.target)
        what = None
        if mine is None:
            what = "reached by OTAWA only"
        elif other is None:
            what = "reached by Assay only"
        elif mine.size != other.size:
            what = "length"
        elif mine.control != other.control:
            what = "control"
        elif mine.target is not None and other.target is not None and mine.target != other.target:
            what = "branch target"
        if what is None:
            continue
        if what == "reached by Assay only":  # name the branch that leads there: the one OTAWA did not follow
            source = next((a for a in sorted(ours) if address in ours[a].successors and a in theirs), None)
            if source is not None and ours[source].indirect:
                address, mine, other, what = source, ours[source], theirs[source], "indirect targets"
                otawa_decoded = Decoded(other.size, other.text, other.control, other.target)
        size = mine.size if mine is not None else other.size
        try:
            thumb = program.code.kind(address) == "t"
            encoding = program.code.bytes(address, address + size)
        except (WcetError, ValueError, IndexError):
            thumb, encoding = False, b""
        return Divergence(name, address, mine, otawa_decoded, what, _excerpt(listing, address), encoding, thumb)
    return None


def _excerpt(listing: list, address: int) -> tuple[str, ...]:
    """odisasm's lines of the instructions around ``address`` (the nearest ones when OTAWA has none there)."""
    if not listing:
        return ()
    index = min(range(len(listing)), key=lambda i: (abs(listing[i].address - address), listing[i].address))
    chosen = listing[max(0, index - EXCERPT_CONTEXT):index + EXCERPT_CONTEXT + 1]
    return tuple(line for insn in chosen for line in insn.lines)

