"""The cache's error and warning types."""

from __future__ import annotations


class CacheError(OSError):
    """The tuned-winner database cannot be opened, read or written (tuning-time paths).

    An OSError, so the command line reports it like any other file problem. The runtime read
    (``read_runtime_winners``) never raises it: it warns with ``CacheWarning`` and falls back.
    """


class CacheWarning(UserWarning):
    """Trouble with the tuned-winner database that flashtune worked around."""
