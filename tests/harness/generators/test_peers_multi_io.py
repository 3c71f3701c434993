"""Peers refuse a model of several inputs or outputs with one line, before their environment is used."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import generators
from harness.errors import NotSupported
from harness.models.model import Tensor, packed_model


@pytest.mark.parametrize("peer, variant", [("acetone-nnet", "default"), ("keras2c", "stack"), ("emlearn", "loadable"),
                                           ("emx-onnx-cgen", "default")])
def test_a_peer_refuses_several_inputs_naming_the_reason(tmp_path, peer, variant):
    model = packed_model("two", {"keras": Path("two.keras"), "onnx": Path("two.onnx")},
                         [Tensor("a", (4,)), Tensor("b", (3,))], [Tensor("y", (2,))])
    with pytest.raises(NotSupported, match=f"{peer}: two has 2 inputs and 1 outputs; this peer's adapter takes one "
                                           "input and one output"):
        generators.get(peer).generate(model, variant, tmp_path / "c")
    assert not (tmp_path / "c").exists()
