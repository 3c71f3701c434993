"""Identifiers made from names a user chose (issue 44): ASCII, a letter first, whatever the file was called."""

import re

import pytest

from harness.models import nnef
from harness.models.names import identifier

ACCEPTED_EVERYWHERE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # a C identifier, an NNEF one and a TF root scope


@pytest.mark.parametrize("name, expected", [
    ("réseau ñ 2", "reseau_n_2"),
    ("dir with spaces ünï", "dir_with_spaces_uni"),
    ("nn_acas_COC", "nn_acas_COC"),
    ("a-b.c", "a_b_c"),
    ("2net", "model_2net"),
    ("_x", "model__x"),
    ("模型", "model"),
    ("", "model"),
])
def test_identifier_is_ascii_and_starts_with_a_letter(name, expected):
    assert identifier(name) == expected
    assert ACCEPTED_EVERYWHERE.match(identifier(name))


def test_nnef_names_are_ascii_and_never_a_keyword():
    assert [nnef.identifier(name) for name in ("réseau", "graph", "0", "ñ")] == ["reseau", "t_graph", "t_0", "n"]
