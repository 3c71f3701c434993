"""The campaign's items in the default test command run 200 inputs each and judge the default (derived) verdict on
10 of them, sampled, and every input outside the fixed tolerance, instead of ``assay semantic``'s 1000 and 100:
cifarnet's layer-local bounds cost 1 to 2.5 s per input, its two items took 160 s and 126 s of the test run with
100, and the default test command is held to 20 minutes. ``tox -e semantic`` (the campaign itself: 1000 and 100)
and any ``--assay-inputs`` or ``--assay-derived-inputs`` given on the command line keep theirs."""

from __future__ import annotations

import pytest

TEST_RUN = {"assay_inputs": ("--assay-inputs", 200), "assay_derived_inputs": ("--assay-derived-inputs", 10)}


def pytest_configure(config: pytest.Config) -> None:
    for dest, (flag, value) in TEST_RUN.items():
        if not any(arg.startswith(flag) for arg in config.invocation_params.args):
            setattr(config.option, dest, value)
