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


FULL = {"line_percent": 100.0, "branch_percent": 100.0,
        "mcdc": {"available": True, "decisions": 0, "mcdc_percent": None,
                 "note": "no decision of two or more conditions in the generated code"}}


@pytest.mark.tor("TOR-EVD-012")
@pytest.mark.parametrize(("code", "shortfall"), [
    (FULL, {"A": [], "B": [], "C": [], "D": []}),
    ({**FULL, "branch_percent": 50.0}, {"A": ["decisions (branch outcomes) 50.0 %"],
                                        "B": ["decisions (branch outcomes) 50.0 %"], "C": [], "D": []}),
    ({**FULL, "mcdc": {"available": True, "decisions": 3, "mcdc_percent": 10.0}},
     {"A": ["MC/DC 10.0 % of conditions"], "B": [], "C": [], "D": []}),
    ({**FULL, "mcdc": {"available": False, "reason": "no clang"}}, {"A": ["MC/DC not measured"], "B": [], "C": [],
                                                                    "D": []}),
    ({**FULL, "mcdc": {"available": True, "decisions": 0, "note": None}},
     {"A": ["MC/DC: 0 decisions and no reason given"], "B": [], "C": [], "D": []}),
    ({**FULL, "line_percent": 97.5, "branch_percent": None}, {"A": ["statements 97.5 %"], "B": ["statements 97.5 %"],
                                                              "C": ["statements 97.5 %"], "D": []}),
])
def test_the_coverage_criteria_are_those_of_the_software_level(code, shortfall):
    """DO-178C Table A-7: statements at C, and decisions at B, and MC/DC at A; none required at D. A code without a
    branch has no decision to cover; MC/DC not measured is a shortfall, never a pass."""
    assert {level: verdicts.coverage_shortfall(code, level) for level in "ABCD"} == shortfall
