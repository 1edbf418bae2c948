"""Student ids, checked once and the same way everywhere: the roster, ``grade``, ``--merge`` and the exports.

An id is 1 to 64 ASCII characters: letters, digits and ``. _ @ + -``,
starting with a letter or a digit. It names files (``results/ID.json``,
``feedback/ID.html``), so nothing else is accepted: no path separator, no
``..``, no lookalike letters from other scripts (``ｂｏｂ``), and a file named
``bob!.ipynb`` is not quietly graded as ``bob``. A submission or a result whose
name is not an id is reported and skipped; the others are graded.
"""

from __future__ import annotations

import re

__all__ = ["STUDENT_ID", "problem", "RULE"]

STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")
RULE = "ids use letters, digits and . _ @ + - (up to 64 characters, starting with a letter or digit)"


def problem(text) -> str | None:
    """None for a valid id, else why it is not one (naming it safely)."""
    if not isinstance(text, str):
        return f"a student id must be text, not {type(text).__name__}"
    if STUDENT_ID.fullmatch(text):
        return None
    shown = text[:64].encode("ascii", "backslashreplace").decode("ascii")
    return f"{shown!r} is not a student id: {RULE}"
