"""Warnings said once per process, by key: the cache's CacheWarning notices
(``flashtune.cache.warn``) and the dispatcher's DispatchWarning ones (``flashtune.ops``,
``flashtune.gen.attention_ops``); and where any of flashtune's warnings is said: at the user's
line (``warn_at_user``).

Here, beside neither: it imports nothing of flashtune's, so flashtune.cache (no torch) and the
dispatch path (no SQLAlchemy) both use it without importing each other.
"""

from __future__ import annotations

import os
import sys
import warnings

# The notices said so far, keyed by (category, key) or first_time's key. No lock: dict.setdefault
# is one atomic step, so of two threads with the same notice only one warns. (A lock here could be
# left held in a forked child, see flashtune.forks, and waited on forever by a signal handler's
# flashtune call that interrupted this function in the same thread.) Tests empty it to hear a
# notice again.
_said: dict[tuple[type[Warning], object], object] = {}


def warn_once(key: object, category: type[Warning], message: str) -> bool:
    """Warn with ``category`` the first time ``key`` comes (for that category) in this process,
    at the user's line (see warn_at_user); True if it warned. Recorded before it is said: where
    the user's filters make it an error (python -W error) it raises once, and later calls fall
    back quietly."""
    if not first_time((category, key)):
        return False
    warn_at_user(message, category)
    return True


def first_time(key: object) -> bool:
    """True the first time ``key`` comes in this process (for notices said another way, such
    as a list the caller prints)."""
    mine = object()
    return _said.setdefault(key, mine) is mine


def warn_at_user(message: str, category: type[Warning]) -> None:
    """warnings.warn, naming the first frame outside flashtune (and torch, whose op dispatch,
    autograd and nn.Module calls sit between a user's line and ours): the file and line Python
    prints first must say which of the user's calls met the trouble. A fixed stacklevel cannot:
    the same notice is reached through different depths (a first call, a plan, torch.library).
    This is Python 3.12's skip_file_prefixes, which 3.10 and 3.11 lack."""
    internal = _internal_folders()
    frame = sys._getframe(1)  # our caller: warnings.warn's stacklevel 2 from here
    level = 2
    while frame.f_back is not None and (frame.f_code.co_filename.startswith(internal)
                                        or _is_importlib(frame.f_code.co_filename)):
        frame = frame.f_back
        # warnings.warn skips importlib's frames as it counts (a notice said while flashtune
        # is imported names the user's import line): they must not count here either.
        if not _is_importlib(frame.f_code.co_filename):
            level += 1
    warnings.warn(message, category, stacklevel=level)


def _is_importlib(filename: str) -> bool:
    """The test warnings.warn uses to skip the import machinery's frames."""
    return "importlib" in filename and "_bootstrap" in filename


_FLASHTUNE_FOLDER = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _internal_folders() -> tuple[str, ...]:
    """flashtune's folder, and torch's where it is imported (never imported here: the cache
    side of flashtune runs without torch)."""
    torch_file = getattr(sys.modules.get("torch"), "__file__", None)
    if not torch_file:
        return (_FLASHTUNE_FOLDER,)
    return (_FLASHTUNE_FOLDER, os.path.dirname(os.path.abspath(torch_file)) + os.sep)
