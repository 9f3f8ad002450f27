"""Tests of calls that must not block (a named pipe where a file should be, a lock that nobody
will release): fail instead of hanging the suite."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import pytest

PIPES = pytest.mark.skipif(not hasattr(os, "mkfifo") or not hasattr(signal, "SIGALRM"),
                           reason="needs named pipes and SIGALRM")


class Blocked(BaseException):
    """Raised by the alarm: a BaseException, so no `except OSError` on the way swallows it
    (TimeoutError is an OSError)."""


@contextlib.contextmanager
def within(seconds: int):
    """Fail when the body blocks longer than ``seconds``: a blocked open() or read() is
    interrupted by the alarm's exception."""
    def expired(signum, frame):
        raise Blocked(f"blocked for more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def flashtune_locks() -> list:
    """Every lock flashtune has now: its modules' own, the runtime's and its dispatcher's,
    and the polled-partials workspaces' (one entry per lock)."""
    import flashtune.dispatch as dispatch
    from flashtune.gen import row_sync

    kinds = (type(threading.Lock()), type(threading.RLock()))
    owners = [m for name, m in list(sys.modules.items())
              if name == "flashtune" or name.startswith("flashtune.")]
    owners += [dispatch.RUNTIME, dispatch.RUNTIME.dispatcher, *row_sync._PARTIALS.values()]
    found = {id(v): v for owner in owners for v in vars(owner).values() if isinstance(v, kinds)}
    return list(found.values())

