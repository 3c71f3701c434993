"""The driver side of the peer JSON interface (run by a peer's own Python; imports nothing of Assay).

``python <driver>.py REQUEST RESPONSE``: the request is a JSON object; the
driver writes ``{"schema": "assay-peer-response/1", "status": "ok" | "not
supported" | "error", "message": ..., "result": {...}}`` to RESPONSE. A
refusal by the peer (one of the exception types the driver names as the
peer's way of saying "I do not implement this") is ``not supported`` with the
peer's own message; any other exception is ``error`` with its type and message.
Peers refuse in different ways (emlearn raises NotImplementedError, ACETONE a
TypeError or ValueError saying "not supported"), so each driver passes its own
test ``refuses(exception) -> bool``.
"""

import json
import sys
import traceback

SCHEMA = "assay-peer-response/1"


def main(handler, refuses=lambda exc: False):
    """Read the request, call ``handler(request) -> result``, write the response; exit 0 unless I/O failed."""
    request_path, response_path = sys.argv[1], sys.argv[2]
    with open(request_path) as stream:
        request = json.load(stream)
    try:
        response = {"status": "ok", "message": "", "result": handler(request)}
    except Exception as exc:  # a refusal, or the peer crashed: its own words and, for a crash, where
        if refuses(exc):
            response = {"status": "not supported", "message": _message(exc), "result": None}
        else:
            response = _crash(exc)
    response["schema"] = SCHEMA
    with open(response_path, "w") as stream:
        json.dump(response, stream)


def says(*phrases):
    """A ``refuses`` test: the exception's message contains one of ``phrases`` (case-insensitive)."""
    return lambda exc: any(phrase in str(exc).lower() for phrase in phrases)


def _crash(exc):
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return {"status": "error", "result": None,
            "message": f"{_message(exc)} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"}


def _message(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else '(no message)'}"
