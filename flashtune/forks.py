"""Locks in a forked child: made anew, never inherited.

``os.fork()`` (multiprocessing's 'fork' start method, DataLoader workers) copies each lock as it
is at that moment. One that another thread of the parent held then stays held in the child,
where that thread does not exist, and the child's first flashtune call would wait on it
forever. Each module that owns a lock hands ``after_fork_in_child`` a function that makes its
locks anew.

What the locks guard is left as the fork found it: whatever a thread of the parent was making
then (a winner table, a kernel module, a plan) is made again in the child by the first call
that needs it. A ``flashtune.dispatch.reset()`` that another thread had under way is finished
in the child (Runtime.remake_locks): half done, the child would keep serving the plans of the
old settings (say, kernels after FLASHTUNE_DISABLE=1) until its own next reset.

A remake runs in every forked child, so it must never raise: Python would print the exception
in each child ("Exception ignored in ..."). ``after_fork_in_child`` drops one that does (the
child is then as it would be without that remake).
"""

from __future__ import annotations

import os
from typing import Callable


def after_fork_in_child(remake: Callable[[], None]) -> Callable[[], None]:
    """Run ``remake()`` in the child of every fork (nothing to do where there is no fork:
    Windows), never raising. Returns ``remake``, so it can decorate the function that does it."""
    if hasattr(os, "register_at_fork"):
        def quietly() -> None:
            try:
                remake()
            except Exception:  # noqa: BLE001 - see the module docstring
                pass

        os.register_at_fork(after_in_child=quietly)
    return remake
