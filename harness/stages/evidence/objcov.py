"""Object-code coverage on the target: which instructions of the generated functions executed at least once
under QEMU, and which conditional branches went both ways, with the rest mapped back to source lines and
manifest layers.

The counts are the counting plugin's (``harness.measurement.cycles.count_item``: per call, per address, the
executions and how many of them were followed by a jump). A conditional instruction that writes the PC
(``b<cond>``, ``cbz``, a conditional return) went both ways when some executions jumped and some fell
through. Other conditional instructions (an IT block's ``movgt``) may or may not have taken effect; the counts
cannot tell, so they are counted apart, not claimed. The instructions are the disassembly
(``wcet.armcode.ArmCode``) of the functions the manifest names, literal pools skipped; their source line is
the DWARF line table's and their layer the one whose line span holds it (``wcet.armcode.layer_ranges``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from elftools.elf.elffile import ELFFile

from harness.measurement import execcount
from harness.measurement.execcount import ExecCounts
from harness.stages.evidence.coverage import _percent
from wcet import armcode, timing

SCHEMA = "assay-object-coverage/1"


def measure(counts: ExecCounts, manifest: dict, entry: str) -> dict:
    """Object-code coverage of the generated functions by the calls in ``counts``."""
    code = counts.code
    names = execcount.bucket_names(manifest)
    ranges = armcode.layer_ranges(code, manifest, entry)
    executions: dict[int, int] = {}
    jumps: dict[int, int] = {}
    for call in counts.calls:
        for per_address in call.counts.values():
            for address, (ran, jumped) in per_address.items():
                executions[address] = executions.get(address, 0) + ran
                jumps[address] = jumps.get(address, 0) + jumped

    def where(address: int) -> dict:
        line = code.line(address)
        layer = next((names[r.bucket] for r in ranges if r.start <= address < r.end), None)
        return {"address": f"{address:#x}", "file": line[0] if line else None, "line": line[1] if line else None,
                "layer": layer}

    total = executed = branches = both_ways = other_conditional = 0
    never, one_way = [], []
    for insn in _instructions(code, ranges):
        total += 1
        ran = executions.get(insn.address, 0)
        executed += ran > 0
        text = f"{insn.mnemonic} {insn.op_str}".strip()
        if ran == 0:
            never.append({**where(insn.address), "instruction": text})
        if not timing.is_conditional(insn):
            continue
        if not timing.writes_pc(insn):
            other_conditional += 1
            continue
        branches += 1
        taken = jumps.get(insn.address, 0)
        if 0 < taken < ran:
            both_ways += 1
        else:
            direction = "never executed" if ran == 0 else "always taken" if taken == ran else "never taken"
            one_way.append({**where(insn.address), "instruction": text, "executions": ran, "taken": taken,
                            "direction": direction})
    return {"schema": SCHEMA, "functions": sorted({f.name for r in ranges if (f := code.containing(r.start))}),
            "calls": len(counts.calls), "instructions": total, "executed": executed,
            "instruction_percent": _percent(executed, total), "conditional_branches": branches,
            "both_ways": both_ways, "branch_percent": _percent(both_ways, branches),
            "conditional_non_branches": other_conditional, "never_executed": never,
            "branches_not_both_ways": one_way}


def _instructions(code: armcode.ArmCode, ranges: list[armcode.AddressRange]):
    """Every instruction of the address ranges in order, literal pools ($d) skipped."""
    for span in ranges:
        address = span.start
        while address < span.end:
            if code.kind(address) == "d":
                address += 2
                continue
            insn = code.decode(address)
            yield insn
            address += insn.size


def code_sha256(elf: Path) -> str:
    """SHA-256 over the addresses and bytes of the ELF's executable sections: two builds with the same code
    have the same digest even when their debug information (build folders) differs."""
    digest = hashlib.sha256()
    with Path(elf).open("rb") as stream:
        for section in ELFFile(stream).iter_sections():
            if section["sh_type"] == "SHT_PROGBITS" and section["sh_flags"] & 0x4:  # SHF_EXECINSTR
                digest.update(section["sh_addr"].to_bytes(8, "little") + section.data())
    return digest.hexdigest()
