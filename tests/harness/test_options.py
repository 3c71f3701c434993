"""The options shared below the CLI (harness.options)."""

import argparse

import pytest

from harness.options import add_opt_option, opt_level


def test_opt_level_accepts_the_forms_argparse_allows():
    assert opt_level("O3") == opt_level("-O3") == opt_level("3") == "-O3"
    with pytest.raises(argparse.ArgumentTypeError):
        opt_level("fast")


def test_the_opt_option_defaults_to_the_certification_setting():
    parser = argparse.ArgumentParser()
    add_opt_option(parser)
    assert parser.parse_args([]).opt == "-O0" and parser.parse_args(["--opt=-O2"]).opt == "-O2"
    assert parser.parse_args(["--opt", "Os"]).opt == "-Os"
