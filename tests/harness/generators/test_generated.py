"""The small manifest (``assay.json``) of a ``dir:`` folder: its ``symbols`` checked as data, and
``copy_as_prebuilt``, which describes C with a full manifest as a third-party generator's ``assay.json`` would."""

from __future__ import annotations

import json

import pytest

from harness.errors import ConfigError
from harness.generators.generated import SMALL_MANIFEST, GeneratedCode, copy_as_prebuilt
from harness.references.bounds import Order

SOURCE = "static const float w[2] = {0.5f, -0.25f};\nvoid net(const float *input, float *output)\n" \
         "{\n    output[0] = input[0] * w[0] + input[1] * w[1];\n}\n"
OUTPUT = {"tensor": "dense:0", "symbol": "output", "offset": 0, "size": 1, "shape": [1], "layout": "C"}


def _small(tmp_path, **keys) -> GeneratedCode:
    (tmp_path / "net.c").write_text(SOURCE)
    (tmp_path / SMALL_MANIFEST).write_text(json.dumps({"entry": "net", "input_size": 2, "output_size": 1, **keys}))
    return GeneratedCode.from_directory(tmp_path)


def test_symbols_of_an_assay_json_are_read_and_refused_unless_lists_of_c_identifiers(tmp_path):
    assert _small(tmp_path, symbols={"code": ["net"], "data": ["w"]}).manifest["symbols"]["data"] == ["w"]
    for bad in (["w"], {"data": "w"}, {"data": ["w[0]"]}, {"data": ["w; exit(1)"]}, {"weights": ["w"]}):
        with pytest.raises(ConfigError, match="'symbols' must be"):
            _small(tmp_path, symbols=bad)


def _full(tmp_path) -> GeneratedCode:
    """A folder as an Assay generator writes it: the C, a header and the full manifest."""
    folder = tmp_path / "generated"
    folder.mkdir()
    (folder / "net.c").write_text(SOURCE)
    (folder / "net.h").write_text("void net(const float *input, float *output);\n")
    manifest = {"schema": "assay-manifest/1", "generator": {"name": "assay-v2"},
                "model": {"name": "tiny", "format": "keras"},
                "entry": {"symbol": "net", "file": "net.c"}, "sources": ["net.c"], "headers": ["net.h"],
                "inputs": [{"name": "x", "shape": [2], "layout": "C", "size": 2}],
                "outputs": [{"name": "y", "shape": [1], "layout": "C", "size": 1}],
                "symbols": {"code": ["net"], "data": ["w"]},
                "layers": [{"index": 0, "name": "dense", "op": "Dense", "function": "net", "file": "net.c",
                            "lines": [3, 5], "loops": [], "inputs": [None], "output": OUTPUT},
                           {"index": 1, "name": "dense_relu", "op": "Relu", "file": "net.c", "lines": [4, 4]}],
                "accumulation": {"rule": "sequential", "conv_taps": [], "flatten": []}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return GeneratedCode.from_directory(folder)


@pytest.mark.parametrize("declare_order", [True, False])
def test_copy_as_prebuilt_describes_the_same_code_in_an_assay_json(tmp_path, declare_order):
    code = _full(tmp_path)
    folder = copy_as_prebuilt(code, tmp_path / "dir", declare_order)
    assert sorted(p.name for p in folder.iterdir()) == [SMALL_MANIFEST, "net.c", "net.h"]
    copied = GeneratedCode.from_directory(folder)  # read from the assay.json: no full manifest is left
    assert (copied.entry, copied.input_size, copied.output_size, copied.input_layout, copied.output_layout) == \
        ("net", 2, 1, "C", "C")
    assert [p.name for p in copied.sources] == ["net.c"] and "schema" not in copied.manifest
    # only the layers with an output buffer, with what assay.json says of one
    assert copied.manifest["layers"] == [{"index": 0, "name": "dense", "file": "net.c", "lines": [3, 5],
                                          "output": OUTPUT}]
    assert copied.manifest["symbols"] == {"code": ["net"], "data": ["w"]}
    assert copied.manifest["model"] == {"format": "keras"}
    assert Order.from_manifest(copied.manifest) == (Order.from_manifest(code.manifest) if declare_order else None)
