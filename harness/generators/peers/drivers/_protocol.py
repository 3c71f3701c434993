"""The driver side of the peer JSON interface (run by a peer's own Python; imports nothing of Assay).

``python <driver>.py`` serves requests until its standard input ends: one JSON line in,
``{"scratch": folder, "request": {...}}``, one JSON line out, ``{"schema": "assay-peer-response/1", "status":
"ok" | "not supported" | "error", "message": ..., "result": {...}}``. One interpreter serves many requests, so
the peer's TensorFlow is imported once (25-60 s on a loaded 2-core machine), not once per model. Each request
runs in its ``scratch`` folder (a peer's scratch files land there, never in the user's folder), and the
working directory is restored after it, whatever the peer did (keras2c changes it).

The peers print to standard output (TensorFlow's logs, emlearn's compiler runs, even from C), so the
driver keeps a private copy of that file descriptor for its responses and points descriptor 1 at standard
error: nothing a peer prints can corrupt a response line.

A refusal by the peer (one of the exception types the driver names as the peer's way of saying "I do not
implement this") is ``not supported`` with the peer's whole message on one line; any other exception is
``error`` with its type, message and the file and line it came from. Peers refuse in different ways
(emlearn raises NotImplementedError or a ValueError saying "Unsupported", ACETONE a TypeError or ValueError
saying "not supported"), so each driver passes its own test ``refuses(exception) -> bool``.
"""

import json
import os
import sys
import traceback

SCHEMA = "assay-peer-response/1"


def main(handler, refuses=lambda exc: False):
    """Serve ``handler(request) -> result`` on standard input until it ends; a response line per request."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    home = os.getcwd()
    for line in sys.stdin:
        envelope = json.loads(line)
        try:
            os.chdir(envelope["scratch"])
            response = {"status": "ok", "message": "", "result": handler(envelope["request"])}
        except Exception as exc:  # a refusal, or the peer crashed: its own words and, for a crash, where
            if refuses(exc):
                response = {"status": "not supported", "message": _message(exc), "result": None}
            else:
                response = _crash(exc)
        finally:
            os.chdir(home)
        response["schema"] = SCHEMA
        channel.write(json.dumps(response) + "\n")
        channel.flush()


def says(*phrases):
    """A ``refuses`` test: the exception's message contains one of ``phrases`` (case-insensitive)."""
    return lambda exc: any(phrase in str(exc).lower() for phrase in phrases)


def _crash(exc):
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return {"status": "error", "result": None,
            "message": f"{_message(exc)} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"}


def _message(exc):
    """The exception's type and its whole message, its lines joined (keras2c lists its reasons one a line)."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return f"{type(exc).__name__}: {text or '(no message)'}"
