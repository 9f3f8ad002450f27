"""Warnings said once per process, by key: the cache's CacheWarning notices
(``flashtune.cache.warn``) and the dispatcher's DispatchWarning ones (``flashtune.ops``,
``flashtune.gen.attention_ops``).

Here, beside neither: it imports nothing of flashtune's, so flashtune.cache (no torch) and the
dispatch path (no SQLAlchemy) both use it without importing each other.
"""

from __future__ import annotations

import warnings

# The notices said so far, keyed by (category, key). No lock: dict.setdefault is one atomic
# step, so of two threads with the same notice only one warns. (A lock here could be left held
# in a forked child, see flashtune.forks, and waited on forever by a signal handler's flashtune
# call that interrupted this function in the same thread.) Tests empty it to hear a notice again.
_said: dict[tuple[type[Warning], object], object] = {}


def warn_once(key: object, category: type[Warning], message: str, stacklevel: int = 2) -> bool:
    """Warn with ``category`` the first time ``key`` comes (for that category) in this process;
    True if it warned. Recorded before it is said: where the user's filters make it an error
    (python -W error) it raises once, and later calls fall back quietly. ``stacklevel`` as for
    warnings.warn, from the caller."""
    mine = object()
    if _said.setdefault((category, key), mine) is not mine:
        return False
    warnings.warn(message, category, stacklevel=stacklevel + 1)
    return True
