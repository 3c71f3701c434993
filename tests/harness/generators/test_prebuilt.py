"""A `dir:` generator's identity is the content of its folder, not where the folder lies."""

from __future__ import annotations

import shutil

from harness.generators.prebuilt import Prebuilt


def _folder(root):
    (root / "include").mkdir(parents=True)
    (root / "net.c").write_text("void net(const float *in, float *out) { out[0] = in[0]; }\n")
    (root / "include" / "net.h").write_text("void net(const float *in, float *out);\n")
    (root / "manifest.json").write_text("{}\n")
    return root


def test_a_copy_elsewhere_has_the_same_identity_and_an_edit_anywhere_in_it_changes_it(tmp_path):
    first = _folder(tmp_path / "a" / "gen")
    copy = tmp_path / "b" / "other-name"
    shutil.copytree(first, copy)
    identity = Prebuilt(first, f"dir:{first}").identity(None, "prebuilt")
    assert identity == Prebuilt(copy, f"dir:{copy}").identity(None, "prebuilt")
    assert str(tmp_path) not in repr(identity) and set(identity["files"]) == {"net.c", "include/net.h",
                                                                                "manifest.json"}
    (copy / "include" / "net.h").write_text("void net(const float *in, float *out); /* edited */\n")
    assert Prebuilt(copy, f"dir:{copy}").identity(None, "prebuilt") != identity
