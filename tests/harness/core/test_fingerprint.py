"""Content keys hold content only: the same profile, tools and settings give the same key wherever the checkout
lies (an rsynced copy on a build host, issue 30), and two keys that differ name the components that do."""

from __future__ import annotations

import json
import platform
import shutil

import pytest

from harness import targets
from harness.core import fingerprint
from harness.core.fingerprint import components_of, content_key, differences, profile_identity
from harness.core.shards import Shard, ShardStore
from harness.digests import digest
from harness.models.model import file_sha256


def test_a_profile_copied_to_another_folder_has_the_same_identity(tmp_path):
    original = targets.get(targets.HOST)
    copy = tmp_path / "elsewhere" / original.path.name
    copy.parent.mkdir()
    shutil.copy(original.path, copy)
    moved = targets.load_profile(copy)
    assert moved.path != original.path
    assert profile_identity(moved, "-O0") == profile_identity(original, "-O0")
    assert str(original.path.parent) not in json.dumps(profile_identity(original, "-O0"))


@pytest.mark.arm
def test_a_linker_script_counts_by_its_bytes_not_its_path(tmp_path):
    original = targets.get("cortex-m4f-ext")
    assert original.linker_script is not None
    identity = profile_identity(original, "-O0")
    assert identity["profile"]["linker_script"] == file_sha256(original.linker_script)
    folder = tmp_path / "board"
    folder.mkdir()
    shutil.copy(original.path, folder / original.path.name)
    shutil.copy(original.linker_script, folder / original.linker_script.name)  # found beside the profile first
    moved = targets.load_profile(folder / original.path.name)
    assert moved.linker_script == folder / original.linker_script.name
    assert profile_identity(moved, "-O0") == identity  # same bytes elsewhere: same key
    (folder / original.linker_script.name).write_text(original.linker_script.read_text() + "\n/* edited */\n")
    edited = profile_identity(targets.load_profile(folder / original.path.name), "-O0")
    assert differences(identity, edited, "b") and [d.component for d in differences(identity, edited, "b")] == [
        "profile.linker_script"]


def test_the_reset_code_of_a_multi_core_profile_counts_by_its_bytes(tmp_path):
    original = targets.get("cortex-a15x4")
    start = original.path.parent / "cortex-a15x4-start.S"
    identity = profile_identity(original, "-O0")
    assert identity["profile"]["startup"] == file_sha256(start)
    folder = tmp_path / "board"
    folder.mkdir()
    shutil.copy(original.path, folder / original.path.name)
    (folder / start.name).write_text(start.read_text() + "\n@ edited\n")  # found beside the profile first
    edited = profile_identity(targets.load_profile(folder / original.path.name), "-O0")
    assert [d.component for d in differences(identity, edited, "b")] == ["profile.startup"]
    assert "startup" not in profile_identity(targets.get(targets.HOST), "-O0")["profile"]


def test_the_platform_in_a_key_is_the_system_and_c_library_not_the_kernel_release():
    tools = fingerprint.key_tools()
    assert platform.machine() in tools["platform"] and platform.system() in tools["platform"]
    assert platform.release() not in tools["platform"]
    assert {"python", "numpy", "assay", "codegen"} <= set(tools)


def test_a_content_key_is_the_digest_of_its_components_which_this_process_remembers():
    components = {"tools": {"onnx": "1.17.0"}, "target": {"flags": ("-O0", "-ffp-contract=off")}}
    key = content_key(components)
    assert type(key) is str and key == digest(components)  # plain data: xdist sends records holding it
    assert components_of(key) is components and components_of("ef" * 32) is None


def test_differences_name_each_differing_component_with_both_values():
    here = {"tools": {"onnx": "1.17.0", "numpy": "1.26.4"}, "target": {"compiler": "gcc (Debian 12.2.0-14) 12.2.0",
                                                                       "flags": ("-O0",)}}
    there = {"tools": {"onnx": "1.16.1", "numpy": "1.26.4"}, "target": {"compiler": "gcc (Debian 12.3.0-1) 12.3.0",
                                                                        "flags": ["-O0"]}, "extra": 1}
    lines = [str(d) for d in differences(here, there, "build2")]
    assert lines == ["extra: 1 on build2, (none) here",
                     "target.compiler: gcc (Debian 12.3.0-1) 12.3.0 on build2, gcc (Debian 12.2.0-14) 12.2.0 here",
                     "tools.onnx: 1.16.1 on build2, 1.17.0 here"]  # a tuple and its JSON list are the same
    assert differences(here, json.loads(json.dumps(here)), "build2") == []


def test_a_stored_shard_carries_its_key_components_for_another_host_to_compare(tmp_path):
    key = content_key({"tools": {"onnx": "1.17.0"}, "target": {"flags": ("-O0",)}})
    store = ShardStore(tmp_path)
    store.put("m/g/v/host", key, Shard(0, 0, 1), {}, {"host": "a"})
    meta = store.get("m/g/v/host", key, Shard(0, 0, 1)).meta
    assert meta["fingerprint"] == key and meta["key"] and differences(components_of(key), meta["key"], "a") == []
    store.put("m/g/v/host", "cd" * 32, Shard(0, 0, 1), {}, {"host": "a"})  # a key computed elsewhere: no components
    assert store.get("m/g/v/host", "cd" * 32, Shard(0, 0, 1)).meta["key"] is None
