"""Hand-written test programs for the WCET analyzer, and how to build them.

``build(name, target, tmp)`` compiles ``shapes.c`` (C, -O0 -g), ``counters.cpp`` (C++, -O0 -g), ``arm_flow.S``,
``thumb_flow.S``, ``counters.S`` or ``bad.S`` into a bare-metal ELF (no C library, entry
``entry``) with Debian's ``arm-none-eabi-gcc``; ``loop_lines(source)`` reads the
``LOOP: name bound [total T]`` markers of ``shapes.c``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
GCC = "arm-none-eabi-gcc"
GXX = "arm-none-eabi-g++"
HAVE_GCC = shutil.which(GCC) is not None
HAVE_GXX = shutil.which(GXX) is not None

FLAGS = {
    "arm7tdmi": ["-mcpu=arm7tdmi", "-marm", "-mfloat-abi=soft"],
    "cortex-m4": ["-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard"],
}


def build(source: str, target: str, directory: Path, extra: tuple[str, ...] = ()) -> Path:
    """``source`` (a file name here) built for ``target`` ("arm7tdmi" or "cortex-m4") into ``directory``; a
    ``.cpp`` file by g++ under the flags Assay gives C++ (C++17, no exceptions, no RTTI)."""
    elf = Path(directory) / f"{Path(source).stem}-{target}.elf"
    cxx = ["-std=c++17", "-fno-exceptions", "-fno-rtti"] if source.endswith(".cpp") else []
    command = [GXX if cxx else GCC, *FLAGS[target], *cxx, "-O0", "-g", "-nostdlib", "-nostartfiles", "-Wl,-e,entry",
               "-Wl,-Ttext=0x8000", "-Wl,--section-start=.far=0x4000000", *extra, str(HERE / source), "-o", str(elf)]
    subprocess.run(command, check=True, capture_output=True, text=True)
    return elf


def loop_lines(source: str = "shapes.c") -> dict[str, tuple[int, int, int | None]]:
    """name -> (line, bound, total or None) of the ``/* LOOP: name bound [total T] */`` markers."""
    marks = {}
    for number, text in enumerate((HERE / source).read_text().splitlines(), start=1):
        match = re.search(r"LOOP: (\w+) (\d+)(?: total (\d+))?", text)
        if match:
            marks[match[1]] = (number, int(match[2]), int(match[3]) if match[3] else None)
    return marks
