"""The package's overall verdict (``verdicts.overall``): ``pass`` only when every part passes and the tool
qualification is complete."""

from __future__ import annotations

import pytest

from harness.stages.evidence import verdicts

PASSING = {"semantic": "pass", "coverage": "pass", "tested-configuration": "pass"}


@pytest.mark.tor("TOR-EVD-006")
@pytest.mark.parametrize(("parts", "tool_qualification", "expected"), [
    (PASSING, "pass", "pass"),
    (PASSING, "incomplete", "incomplete"),  # a subset of Assay's tests, or one skipped: never pass
    (PASSING, "unverified", "incomplete"),  # a JUnit XML given, not run by the build
    (PASSING, "not run", "incomplete"),  # --tor-tests none
    (PASSING, "fail", "fail"),  # one of Assay's own tests failed
    ({**PASSING, "coverage": "incomplete"}, "pass", "fail"),
    ({**PASSING, "semantic": "fail"}, "incomplete", "fail"),
    ({}, "pass", "fail"),  # nothing verified
])
def test_the_package_passes_only_when_every_part_passes_and_tool_qualification_is_complete(parts, tool_qualification,
                                                                                          expected):
    assert verdicts.overall(parts, tool_qualification) == expected
