"""CacheWarning notices, said once per process (per database and trouble), through
flashtune.once's registry."""

from __future__ import annotations

from ..once import warn_once as _warn_once
from .errors import CacheWarning
from .records import printable


def warn_once(where: str, kind: str, message: str) -> bool:
    """Warn with CacheWarning unless this notice (where, kind and message) was already given;
    True if it warned.

    The message is part of the key: one kind ("error") covers every way a read can fail, and
    a trouble that comes after another one (a database found locked, then, after
    flashtune.dispatch.reset(), corrupt) must be said too, not taken for the first. The same
    trouble read again after each reset() is said once.

    Control characters are spelled out: a notice names a database path or URL (FLASHTUNE_DB,
    a folder name) and quotes rows, any of which may hold an escape sequence or a newline."""
    message = printable(message)
    return _warn_once((where, kind, message), CacheWarning, message)
