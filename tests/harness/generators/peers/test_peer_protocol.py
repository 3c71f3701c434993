"""The peer JSON interface, driven end to end with this interpreter and a throw-away driver (fast: no venv)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.errors import NotSupported
from harness.generators.peers import DRIVERS, PeerEnvError, check_response, session

DRIVER = """
import os, sys, time
sys.path.insert(0, {drivers!r})
from _protocol import main, says
INSTANCE = os.urandom(8).hex()  # which interpreter answered (in the sandbox's PID namespace every driver is pid 2)

def handler(request):
    print("chatter on stdout, as TensorFlow and emlearn do")
    os.write(1, b"and from C\\n")
    if request["do"] == "refuse":
        raise TypeError("Error: layer Foo not supported:\\n  - first reason\\n  - second reason")
    if request["do"] == "crash":
        return [][1]
    if request["do"] == "die":
        sys.exit(3)
    if request["do"] == "hang":
        time.sleep(60)
    if request["do"] == "wander":
        os.chdir("/")
    return {{"echo": request.get("value"), "pid": INSTANCE, "cwd": os.getcwd()}}

main(handler, refuses=says("not supported"))
"""


@pytest.fixture
def driver(tmp_path: Path):
    tmp_path.chmod(0o755)  # the sandboxed driver runs under a user id of its own: its folder must be readable
    path = tmp_path / "drive_fake.py"
    path.write_text(DRIVER.format(drivers=str(DRIVERS)))
    yield path
    session.close_all()


def _call(driver: Path, request: dict, timeout: float = 60) -> dict:
    return check_response(session.request(("fake", str(driver)), sys.executable, driver, "fake", request, timeout),
                          "fake")


def test_result_comes_back_and_one_interpreter_serves_many_requests(driver):
    first, second = (_call(driver, {"do": "ok", "value": [1, n]})["result"] for n in (1, 2))
    assert (first["echo"], second["echo"]) == ([1, 1], [1, 2])
    assert first["pid"] == second["pid"]
    assert first["cwd"] != second["cwd"] and Path(first["cwd"]).name.startswith("tmp")  # a scratch per request


def test_refusal_is_not_supported_with_the_whole_peer_message(driver):
    with pytest.raises(NotSupported, match="^fake: TypeError: Error: layer Foo not supported: - first reason "
                                           "- second reason$"):
        _call(driver, {"do": "refuse"})


def test_crash_is_an_error_naming_where_and_the_session_goes_on(driver):
    pid = _call(driver, {"do": "ok"})["result"]["pid"]
    with pytest.raises(PeerEnvError, match=r"fake: IndexError: list index out of range \(at drive_fake.py:\d+\)"):
        _call(driver, {"do": "crash"})
    assert _call(driver, {"do": "ok"})["result"]["pid"] == pid


def test_driver_dying_is_an_error_and_the_next_request_gets_a_new_interpreter(driver):
    pid = _call(driver, {"do": "ok"})["result"]["pid"]
    with pytest.raises(PeerEnvError, match="exited 3 without a response: and from C"):
        _call(driver, {"do": "die"})
    assert _call(driver, {"do": "ok", "value": 5})["result"]["pid"] != pid


def test_hanging_driver_times_out_and_is_replaced(driver):
    pid = _call(driver, {"do": "ok"})["result"]["pid"]
    with pytest.raises(PeerEnvError, match="fake: driver timed out after 1 s"):
        _call(driver, {"do": "hang"}, timeout=1)
    assert _call(driver, {"do": "ok"})["result"]["pid"] != pid


def test_a_peer_changing_directory_does_not_move_the_next_request(driver):
    _call(driver, {"do": "wander"})
    assert _call(driver, {"do": "ok"})["result"]["cwd"] != "/"
