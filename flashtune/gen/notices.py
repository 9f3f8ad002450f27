"""The warning category of run-time fallbacks (``flashtune.dispatch.DispatchWarning``), and
its once-per-process notice (``warn_once``).

Defined here, below both users: the kernel loader and the attention launcher (in this package)
warn with it, and ``flashtune.dispatch``, which imports this package, re-exports it.
"""

import warnings


class DispatchWarning(RuntimeWarning):
    """The dispatcher worked around trouble (it fell back to a default config)."""


# The once-only notices said so far, by key. setdefault, not a lock: one atomic step, so of two
# threads with the same notice only one warns (see flashtune.cache.warn for why no lock).
_said: dict[object, object] = {}


def warn_once(key: object, message: str, stacklevel: int = 2) -> None:
    """A DispatchWarning, said the first time ``key`` comes in this process. Recorded before it
    is said: where the user's filters make it an error (python -W error) it raises once, and
    later calls fall back quietly. ``stacklevel`` as for warnings.warn, from the caller."""
    mine = object()
    if _said.setdefault(key, mine) is mine:
        warnings.warn(message, DispatchWarning, stacklevel=stacklevel + 1)
