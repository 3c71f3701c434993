"""Errors that the CLI turns into a one-line message and exit status 2.

Anything raised as an ``AssayError`` is a problem with the user's input (a
missing model, an unknown name, an unsupported layer) rather than a bug in
Assay, so it is reported without a traceback. The ``wcet`` library is
standalone and has its own base error (``wcet.errors.WcetError``); the two are
user errors alike (``USER_ERRORS``).
"""

from pathlib import Path

from wcet.errors import WcetError


class AssayError(Exception):
    """A user-facing error: its message names the item and the cause."""


class ModelError(AssayError):
    """A model file is missing, corrupt, or uses something we do not support."""


class ConfigError(AssayError):
    """A profile or option is invalid."""


class NotSupported(AssayError):
    """A generator refuses the model (a layer or option it does not implement): the ``not supported`` verdict.

    Distinct from a failure (wrong outputs) and an error (a crash, a build failure): the message is the
    generator's own.
    """


class Unbuildable(AssayError):
    """A generator wrote C that cannot be compiled as delivered (keras2c from PyPI lacks its backend): an
    ``error`` verdict everywhere; the memory stage still reads the source (``directory``) for its stack arrays
    and heap allocation from the functions a caller calls (``entries``), declaring ``opaque_types`` that the
    missing headers would have defined."""

    def __init__(self, message: str, directory: Path, entries: list[str], opaque_types: list[str]):
        super().__init__(message)
        self.directory, self.entries, self.opaque_types = directory, entries, opaque_types


class RunError(AssayError):
    """Building or running generated code failed (a compile error, a crash, a hang, an image too large for the
    target, a target that cannot run code): the message is a one-line cause, an item's ``error`` verdict."""


# What a stage or the CLI reports as one line (an item's error, or exit 2) rather than a traceback.
USER_ERRORS: tuple[type[Exception], ...] = (AssayError, WcetError)
