"""Warnings that are said once per process (per database and trouble)."""

from __future__ import annotations

import warnings

from .errors import CacheWarning
from .records import printable

# The notices said so far, keyed by (where, kind, message). No lock: dict.setdefault is one
# atomic step, so of two threads with the same notice only one warns. (A lock here could be
# left held in a forked child, see flashtune.forks, and waited on forever by a signal handler's
# flashtune call that interrupted this function in the same thread.)
_said: dict[tuple[str, str, str], object] = {}


def warn_once(where: str, kind: str, message: str, stacklevel: int = 3) -> bool:
    """Warn with CacheWarning unless this notice (where, kind and message) was already given;
    True if it warned.

    The message is part of the key: one kind ("error") covers every way a read can fail, and
    a trouble that comes after another one (a database found locked, then, after
    flashtune.dispatch.reset(), corrupt) must be said too, not taken for the first. The same
    trouble read again after each reset() is said once.

    Control characters are spelled out: a notice names a database path or URL (FLASHTUNE_DB,
    a folder name) and quotes rows, any of which may hold an escape sequence or a newline."""
    message = printable(message)
    mine = object()
    if _said.setdefault((where, kind, message), mine) is not mine:
        return False
    warnings.warn(message, CacheWarning, stacklevel=stacklevel)
    return True
