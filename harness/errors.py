"""Errors that the CLI turns into a one-line message and exit status 2.

Anything raised as an ``AssayError`` is a problem with the user's input (a
missing model, an unknown name, an unsupported layer) rather than a bug in
Assay, so it is reported without a traceback.
"""


class AssayError(Exception):
    """A user-facing error: its message names the item and the cause."""


class ModelError(AssayError):
    """A model file is missing, corrupt, or uses something we do not support."""


class ConfigError(AssayError):
    """A profile or option is invalid."""
