"""The WCET of parallel code composed along its cores (the multi-core paper, §5.4).

Per core, the generated code is a sequence of layers and Writing/Reading
operators (the manifest's ``parallel.per_core``). Each item has a WCET of its
own, the operators' waits excluded: a layer's is its WCET bound on one core
(the layers' code is the sequential V2 code, so the sequential per-layer bounds
apply); an operator's is the WCET bound of its copy and flag handshake with the
wait passing at once (``operator_wcet``, the generated operator analysed per
tensor size). The waits are
accounted for by the composition, which follows the protocol: a Reading
operator cannot start before the matching Writing operator has ended, and a
Writing operator cannot start before the previous message of its channel has
been read. Each core accumulates its items' WCETs and, at each wait, takes the
maximum of its own accumulated time and the time the awaited operator ends
(§5.4: "synchronizing cores at each barrier by adopting the maximum
accumulated WCET"). The parallel WCET is the latest core's end.

Interference: concurrent accesses to the shared memory slow every core down;
the paper treats it as a margin on every WCET (§2.1), as here:
``interference`` (default 0) multiplies each item's WCET by ``1 + interference``
in the parallel composition only. 0 is not a sound value for a real multi-core
platform; it states the bound without interference, which is what an
interference analysis would then inflate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ParallelWcet:
    sequential: int  # sum of the layers' WCETs (one core, no operator)
    parallel: float  # the latest core's composed end
    per_core: list[float]  # each core's composed end
    interference: float

    @property
    def gain(self) -> float:
        """1 - parallel / sequential (the paper's 8 % for its GoogLeNet)."""
        return 1.0 - self.parallel / self.sequential if self.sequential else 0.0

    def as_dict(self) -> dict:
        return {"sequential_cycles": self.sequential, "parallel_cycles": self.parallel,
                "per_core_cycles": self.per_core, "gain": self.gain, "speedup":
                self.sequential / self.parallel if self.parallel else None, "interference": self.interference}


def compose(per_core: list[dict], layer_wcet: dict[str, int], operator_wcet: Callable[[str, int], int],
            interference: float = 0.0) -> ParallelWcet:
    """Compose the parallel WCET of ``per_core`` (the manifest's ``parallel.per_core``).

    ``layer_wcet``: layer name -> cycles (a layer absent from it costs 0: no code);
    ``operator_wcet``: (kind "write" or "read", floats copied) -> cycles of one operator, waits excluded.
    """
    if interference < 0:
        raise ValueError(f"the interference margin must not be negative, not {interference:g}")
    scale = 1.0 + interference
    time = [0.0] * len(per_core)
    position = [0] * len(per_core)
    write_end: dict[tuple[int, int, int], float] = {}  # (src, dst, seq) -> end
    read_end: dict[tuple[int, int, int], float] = {}
    remaining = sum(len(core["items"]) for core in per_core)
    while remaining:
        progressed = False
        for index, core in enumerate(per_core):
            while position[index] < len(core["items"]):
                item = core["items"][position[index]]
                if item["kind"] == "layer":
                    time[index] += scale * layer_wcet.get(item["name"], 0)
                else:
                    key = (item["src"], item["dst"], item["seq"])
                    awaited = (write_end.get(key) if item["kind"] == "read" else
                               read_end.get((item["src"], item["dst"], item["seq"] - 1)) if item["seq"] else 0.0)
                    if awaited is None:
                        break  # the other side has not got there yet: try the other cores
                    time[index] = max(time[index], awaited) + scale * operator_wcet(item["kind"], item["floats"])
                    (write_end if item["kind"] == "write" else read_end)[key] = time[index]
                position[index] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("the operators wait for each other in a cycle: the code would deadlock")
    sequential = sum(layer_wcet.get(item["name"], 0) for item in _first_instances(per_core))
    return ParallelWcet(sequential=sequential, parallel=max(time, default=0.0), per_core=time,
                        interference=interference)


def _first_instances(per_core: list[dict]) -> list[dict]:
    seen: dict[str, dict] = {}
    for core in per_core:
        for item in core["items"]:
            if item["kind"] == "layer":
                seen.setdefault(item["name"], item)
    return list(seen.values())
