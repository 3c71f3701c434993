"""A peer's driver runs sandboxed (docs/sandbox.md): it reads the copies of what a request names and writes
only its output folder, which comes back; the rest of the machine and the network are out of its reach."""

from __future__ import annotations

import json
import sys

import pytest

from harness import sandbox
from harness.generators.peers import DRIVERS, check_response, session

DRIVER = """
import os, socket, sys
sys.path.insert(0, {drivers!r})
from _protocol import main

def handler(request):
    with open(request["model"]) as stream:
        model = stream.read()
    os.makedirs(request["out_dir"], exist_ok=True)
    with open(os.path.join(request["out_dir"], "net.c"), "w") as stream:
        stream.write("/* from " + model + " */")
    try:
        open({private!r}).read()  # a path the request does not name
        private = "read"
    except OSError as exc:
        private = type(exc).__name__
    try:
        socket.create_connection(("127.0.0.1", request["port"]), 5).close()
        network = "connected"
    except OSError as exc:
        network = type(exc).__name__
    return {{"private": private, "network": network, "env": sorted(os.environ), "out_dir": request["out_dir"]}}

main(handler)
"""


@pytest.mark.skipif(not sandbox.isolation().confined, reason="no sandbox on this machine")
def test_a_peer_reads_its_model_writes_its_output_folder_and_nothing_else(tmp_path, monkeypatch):
    import socket

    model, out_dir, private = tmp_path / "model.json", tmp_path / "generated", tmp_path / "private.txt"
    driver = tmp_path / "driver" / "drive_fake.py"  # its folder is readable to it: the private file is not there
    driver.parent.mkdir(mode=0o755)
    driver.write_text(DRIVER.format(drivers=str(DRIVERS), private=str(private)))
    model.write_text(json.dumps("the model"))
    private.write_text("the user's")
    monkeypatch.setenv("ASSAY_TEST_PRIVATE", "do not leak")
    server = socket.create_server(("127.0.0.1", 0))
    request = {"model": str(model), "out_dir": str(out_dir), "port": server.getsockname()[1]}
    try:
        result = check_response(session.request(("fake", str(driver)), sys.executable, driver, "fake", request, 60),
                                "fake")["result"]
    finally:
        session.close_all()
        server.close()
    assert (out_dir / "net.c").read_text() == '/* from "the model" */'
    assert result["out_dir"] == str(out_dir)  # the copy's path is reported as the original's
    assert result["private"] == "FileNotFoundError" and result["network"] == "ConnectionRefusedError"
    assert "ASSAY_TEST_PRIVATE" not in result["env"] and {"LC_ALL", "TZ", "HOME"} <= set(result["env"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["driver", "generated", "model.json", "private.txt"]
