"""ELF section and symbol sizes against hand-written C with known array sizes,
cross-compiled for the ARM targets (and the host's shared library)."""

import json
import shutil
import struct

import pytest

from harness import targets
from harness.binary import elf
from harness.errors import AssayError
from harness.generators.generated import GeneratedCode
from harness.runners import host, qemu

ARM_TOOLS = ("arm-none-eabi-gcc", "qemu-arm", "qemu-system-arm")
needs_arm = pytest.mark.skipif(not all(shutil.which(tool) for tool in ARM_TOOLS),
                               reason="ARM toolchain or QEMU not installed (.ci/setup installs them)")

KNOWN = """
const float w[100] = {1.0f, 2.0f};          /* 400 bytes of .rodata */
static float buf[50];                        /* 200 bytes of .bss, a local symbol */
float initialised[3] = {1.0f, 2.0f, 3.0f};   /* 12 bytes of .data */
static const int table[7] = {1, 2, 3, 4, 5, 6, 7};  /* 28 bytes of .rodata, local */

void net(const float *input, float *output) {
    buf[(int)input[0] & 31] = input[1];
    output[0] = w[(int)input[0] & 63] + buf[3] + initialised[1] + (float)table[2];
}
"""


def prebuilt(tmp_path):
    directory = tmp_path / "src"
    directory.mkdir()
    (directory / "net.c").write_text(KNOWN)
    (directory / "assay.json").write_text(json.dumps({"entry": "net", "input_size": 2, "output_size": 1}))
    return GeneratedCode.from_directory(directory)


@pytest.fixture(scope="module", params=["arm7tdmi", "cortex-m4f", "cortex-a15"])
def arm_image(request, tmp_path_factory):
    if not all(shutil.which(tool) for tool in ARM_TOOLS):
        pytest.skip("ARM toolchain or QEMU not installed")
    profile = targets.get(request.param)
    built = qemu.build(prebuilt(tmp_path_factory.mktemp(request.param)), tmp_path_factory.mktemp("build"), profile)
    return profile, built, elf.read(built.elf)


def flash_of(profile):
    region = profile.region("flash")
    return range(region.origin, region.origin + region.size) if region and region.origin is not None else None


@pytest.mark.tor("TOR-MEM-004")
@pytest.mark.arm
@needs_arm
def test_symbol_sizes_by_kind(arm_image):
    profile, _, image = arm_image
    sizes = elf.symbol_sizes(image, ["w", "buf", "initialised", "table", "net"], flash_of(profile))
    by_name = {row["name"]: row for row in sizes["symbols"]}
    assert (by_name["w"]["kind"], by_name["w"]["size"]) == ("rodata", 400)
    assert (by_name["buf"]["kind"], by_name["buf"]["size"]) == ("bss", 200)
    assert (by_name["initialised"]["kind"], by_name["initialised"]["size"]) == ("data", 12)
    assert (by_name["table"]["kind"], by_name["table"]["size"]) == ("rodata", 28)
    assert by_name["net"]["kind"] == "text" and by_name["net"]["size"] > 0
    assert sizes["rodata"] == 428 and sizes["bss"] == 200 and sizes["data"] == 12
    assert sizes["text"] == by_name["net"]["size"] and sizes["missing"] == []


@pytest.mark.arm
@needs_arm
def test_local_symbols_and_missing_names(arm_image):
    _, _, image = arm_image
    (buf,) = image.symbols_named("buf")
    assert buf.binding == "LOCAL" and buf.section == ".bss"
    assert elf.symbol_sizes(image, ["no_such_symbol"])["missing"] == ["no_such_symbol"]


@pytest.mark.tor("TOR-MEM-004")
@pytest.mark.arm
@needs_arm
def test_whole_image_matches_the_runners_flash_and_ram(arm_image):
    profile, built, image = arm_image
    sizes = elf.image_sizes(image, flash_of(profile))
    assert sizes["text"] + sizes["rodata"] + sizes["data"] == built.size.flash
    assert sizes["data"] + sizes["bss"] + sizes["reserved"] == built.size.ram
    assert sizes["rodata"] >= 428 and sizes["bss"] >= 200 and sizes["data"] >= 12
    assert sum(s["size"] for s in sizes["sections"].values()) == (
        built.size.flash + sizes["bss"] + sizes["reserved"])


@pytest.mark.tor("TOR-MEM-004")
@pytest.mark.arm
@needs_arm
def test_constants_inside_the_text_section_count_as_rodata(arm_image):
    """picolibc's linker script puts .rodata inside .text: the $d mapping symbols split it."""
    profile, _, image = arm_image
    sizes = elf.image_sizes(image, flash_of(profile))
    if profile.name == "cortex-m4f":
        assert image.section(".rodata") is None
        assert sizes["sections"][".text"]["kind"] == "text+rodata"
        assert sizes["reserved"] == 0x10000  # picolibc's .stack
    else:
        assert image.section(".rodata") is not None and sizes["reserved"] == 0
    (w,) = image.symbols_named("w")
    assert elf.symbol_kind(image, w) == "rodata"


@pytest.mark.arm
@needs_arm
def test_mapping_symbols_give_the_instruction_set(arm_image):
    profile, _, image = arm_image
    (net,) = [f for f in image.functions() if f.name == "net"]
    thumb = profile.name == "cortex-m4f"
    assert net.thumb == thumb
    assert image.mode_at(net.address) == ("t" if thumb else "a")
    assert image.read(net.address, 4) and len(image.read(net.address, 4)) == 4


def test_host_shared_library(tmp_path):
    built = host.build(prebuilt(tmp_path), tmp_path / "build")
    image = elf.read(built.library)
    assert not image.is_arm and image.mapping == []
    sizes = elf.symbol_sizes(image, ["w", "buf", "initialised", "table"])
    assert (sizes["rodata"], sizes["bss"], sizes["data"]) == (428, 200, 12)
    whole = elf.image_sizes(image)
    assert whole["text"] > 0 and whole["rodata"] >= 428


def test_the_bytes_that_initialise_an_object_are_found_in_the_file(tmp_path):
    built = host.build(prebuilt(tmp_path), tmp_path / "build")
    data = built.library.read_bytes()
    offset, size = elf.object_bytes(built.library, "initialised")
    assert size == 12 and data[offset:offset + size] == struct.pack("<3f", 1.0, 2.0, 3.0)
    offset, size = elf.object_bytes(built.library, "w")
    assert size == 400 and data[offset:offset + 8] == struct.pack("<2f", 1.0, 2.0)
    # zeroed at start-up, not held in the file; a function; a name no symbol has
    assert elf.object_bytes(built.library, "buf") is None and elf.object_bytes(built.library, "net") is None
    assert elf.object_bytes(built.library, "missing") is None


def test_not_an_elf(tmp_path):
    path = tmp_path / "junk.elf"
    path.write_bytes(b"not an elf at all")
    with pytest.raises(AssayError, match="cannot read ELF"):
        elf.read(path)
    with pytest.raises(AssayError, match="cannot read ELF"):
        elf.read(tmp_path / "missing.elf")
