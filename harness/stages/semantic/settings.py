"""The semantic campaign's settings: what ``run``, ``sanitize``, ``sharded`` and the pytest campaign share."""

from __future__ import annotations

from dataclasses import dataclass

from harness.core import plan as core_plan
from harness.models.model import Model
from harness.stages.semantic.parallel import ParallelOptions
from harness.stages.semantic.spec import SPEC


@dataclass(frozen=True)
class Settings(core_plan.Settings):
    """The campaign's settings; ``atol``/``rtol`` override every model's own tolerances when given. The defaults
    are those of the options declared in ``spec``."""

    n_inputs: int = SPEC.default("n_inputs")
    timeout: float = SPEC.default("timeout")
    redo: bool = SPEC.default("redo")
    keep_history: bool = SPEC.default("keep_history")  # the records a run supersedes: kept whole (results.py)
    atol: float | None = SPEC.default("atol")
    rtol: float | None = SPEC.default("rtol")
    tolerance: str = SPEC.default("tolerance")  # "fixed" or "derived" (the verdict rule, docs/semantic.md)
    derived_inputs: int = SPEC.default("derived_inputs")  # inputs the derived rule judges (run.derived_rows); 0: all
    arbiter: bool = SPEC.default("arbiter")
    sanitize: int = SPEC.default("sanitize")  # inputs of the host item run again under ASan and UBSan; 0: none
    parallel: ParallelOptions | None = None  # --cores N > 1: run parallel code (parallel.py)

    def tolerances(self, model: Model) -> tuple[float, float]:
        """(atol, rtol) for ``model``: the command line's, else the model's (zoo entry or sidecar TOML)."""
        return (model.tolerance if self.atol is None else self.atol,
                model.rtol if self.rtol is None else self.rtol)
