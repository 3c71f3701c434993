"""Identifiers made from names a user chose: a model's file name, a layer's name in a file.

A model's name is its file's stem as the user spelled it (``réseau ñ 2``), and so it stays in every record,
report and message. A library that needs an identifier gets ``identifier(name)`` instead: TensorFlow refuses a
scope name outside ``[A-Za-z0-9.][A-Za-z0-9_.\\/>-]*`` (a Keras model traced in a ``tf.function``, as the float64
arbiter does), C and NNEF take ASCII identifiers. ``str.isalnum`` and the regular expression ``\\w`` accept any
Unicode letter (``é``, ``ñ``), which is why neither decides what an identifier may hold.
"""

from __future__ import annotations

import re
import unicodedata

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


def identifier(name: str, fallback: str = "model") -> str:
    """``name`` as an ASCII identifier that starts with a letter, what a Keras scope, a C function and an NNEF
    graph all accept: accents dropped (``réseau ñ 2`` -> ``reseau_n_2``), anything else but letters, digits and
    underscores made ``_``; a name that is left with no letter first is prefixed with ``fallback`` and ``_``
    (``2net`` -> ``model_2net``), and one left with no letter or digit at all is ``fallback``."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    text = _NOT_IDENTIFIER.sub("_", folded)
    if not text.strip("_"):
        return fallback
    return text if text[0].isalpha() else f"{fallback}_{text}"
