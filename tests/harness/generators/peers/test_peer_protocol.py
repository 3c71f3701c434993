"""The peer JSON interface, driven end to end with this interpreter and a throw-away driver (fast: no venv)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import NotSupported
from harness.generators.peers import DRIVERS, PeerEnvError, call_driver

DRIVER = """
import sys
sys.path.insert(0, {drivers!r})
from _protocol import main, says

def handler(request):
    if request["do"] == "refuse":
        raise TypeError("Error: layer Foo not supported")
    if request["do"] == "crash":
        return [][1]
    if request["do"] == "die":
        sys.exit(3)
    return {{"echo": request["value"]}}

main(handler, refuses=says("not supported"))
"""


@pytest.fixture
def driver(tmp_path: Path) -> Path:
    path = tmp_path / "drive_fake.py"
    path.write_text(DRIVER.format(drivers=str(DRIVERS)))
    return path


def _call(driver: Path, tmp_path: Path, request: dict) -> dict:
    return call_driver(sys.executable, driver, request, tmp_path, timeout=60, who="fake")


def test_result_comes_back(driver, tmp_path):
    assert _call(driver, tmp_path, {"do": "ok", "value": [1, 2]})["result"] == {"echo": [1, 2]}


def test_refusal_is_not_supported_with_the_peer_message(driver, tmp_path):
    with pytest.raises(NotSupported, match="fake: TypeError: Error: layer Foo not supported"):
        _call(driver, tmp_path, {"do": "refuse"})


def test_crash_is_an_error_naming_where(driver, tmp_path):
    with pytest.raises(PeerEnvError, match=r"fake: IndexError: list index out of range \(at drive_fake.py:\d+\)"):
        _call(driver, tmp_path, {"do": "crash"})


def test_driver_dying_without_response_is_an_error(driver, tmp_path):
    with pytest.raises(PeerEnvError, match="exited 3 without a response"):
        _call(driver, tmp_path, {"do": "die"})
