"""WCET of the generated Writing/Reading operators per tensor size (cortex-m4f, cortex-m4 timing): the copy
loop bounded by the generator's count, the busy wait by 0, linear in the size; a target that cannot build
them is one line."""

from __future__ import annotations

import shutil

import pytest

from harness import targets
from harness.errors import AssayError
from harness.stages.schedule.operator_wcet import operator_wcets

pytestmark = pytest.mark.skipif(shutil.which("arm-none-eabi-gcc") is None, reason="needs arm-none-eabi-gcc")


def test_operator_wcets_grow_linearly_with_the_tensor(tmp_path):
    profile = targets.get("cortex-m4f")
    small, medium, large = (operator_wcets(n, "assay-v2", profile, "cortex-m4", None, tmp_path) for n in (1, 11, 101))
    for kind in ("write", "read"):
        per_float = (medium[kind] - small[kind]) / 10
        assert per_float >= 5 and (large[kind] - medium[kind]) == 10 * per_float * 9  # one copy-loop trip each
        assert small[kind] > per_float  # the flag check, barriers and flag update on top of the copy
    assert abs(large["write"] - large["read"]) < 0.01 * large["write"]
    assert operator_wcets(11, "assay-v2", profile, "cortex-m4", None, tmp_path) == medium  # cached


def test_a_target_whose_compiler_cannot_build_the_operators_is_one_line(tmp_path):
    """ARMv4T has no barrier instruction and newlib no __sync_synchronize: the parallel code cannot run there."""
    with pytest.raises(AssayError, match=r"^operators of 4 floats for arm7tdmi: compile error: .*__sync_synchronize"):
        operator_wcets(4, "assay-v2", targets.get("arm7tdmi"), "arm7tdmi", None, tmp_path)
