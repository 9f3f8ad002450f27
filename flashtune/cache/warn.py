"""Warnings that are said once per process (per database and kind of trouble)."""

from __future__ import annotations

import threading
import warnings

from .errors import CacheWarning

_said: set[tuple[str, str]] = set()
_lock = threading.Lock()


def warn_once(where: str, kind: str, message: str, stacklevel: int = 3) -> bool:
    """Warn with CacheWarning unless (where, kind) was already reported; True if it warned."""
    with _lock:
        if (where, kind) in _said:
            return False
        _said.add((where, kind))
    warnings.warn(message, CacheWarning, stacklevel=stacklevel)
    return True
