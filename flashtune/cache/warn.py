"""Warnings that are said once per process (per database and kind of trouble)."""

from __future__ import annotations

import warnings

from .errors import CacheWarning

# The (where, kind) pairs said so far. No lock: dict.setdefault is one atomic step, so of two
# threads with the same pair only one warns. (A lock here could be left held in a forked child,
# see flashtune.forks, and waited on forever by a signal handler's flashtune call that
# interrupted this function in the same thread.)
_said: dict[tuple[str, str], object] = {}


def warn_once(where: str, kind: str, message: str, stacklevel: int = 3) -> bool:
    """Warn with CacheWarning unless (where, kind) was already reported; True if it warned."""
    mine = object()
    if _said.setdefault((where, kind), mine) is not mine:
        return False
    warnings.warn(message, CacheWarning, stacklevel=stacklevel)
    return True
