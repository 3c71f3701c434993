"""The campaign's items in the default test command judge the default (derived) verdict on 10 sampled inputs per
item, and every input outside the fixed tolerance, instead of ``assay semantic``'s 100: cifarnet's layer-local
bounds cost 1 to 2.5 s per input, and its two items took 160 s and 126 s of the test run with 100. ``tox -e
semantic`` (the campaign itself) and any ``--assay-derived-inputs`` given on the command line keep theirs."""

from __future__ import annotations

import pytest

TEST_RUN_DERIVED_INPUTS = 10


def pytest_configure(config: pytest.Config) -> None:
    if not any(arg.startswith("--assay-derived-inputs") for arg in config.invocation_params.args):
        config.option.assay_derived_inputs = TEST_RUN_DERIVED_INPUTS
