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



def held_here(lock) -> bool:
    """Whether this thread holds ``lock`` (a plain lock: whether anyone does; the tests that
    ask run no other thread that takes flashtune's locks)."""
    is_owned = getattr(lock, "_is_owned", None)  # RLock
    return is_owned() if is_owned is not None else lock.locked()


@contextlib.contextmanager
def interrupting(handler, lock, *, code=None, at: int | None = None):
    """Run ``handler()`` at each line of flashtune's own code that runs while this thread
    holds ``lock``: where a signal handler can run (Python runs them between the bytecodes of
    the main thread, whatever that thread holds), deterministically. ``code``: only in frames
    of that code object; ``at``: only at the at-th such line (0-based). Never inside
    ``handler`` itself. Yields a list that gets the line number of each call of ``handler``."""
    import flashtune

    root = os.path.dirname(flashtune.__file__) + os.sep
    calls: list[int] = []
    state = {"busy": False, "seen": 0}

    def local(frame, event, arg):
        if event == "line" and not state["busy"] and held_here(lock):
            seen, state["seen"] = state["seen"], state["seen"] + 1
            if at is None or seen == at:
                state["busy"] = True
                try:
                    handler()
                finally:
                    state["busy"] = False
                calls.append(frame.f_lineno)
        return local

    def on_call(frame, event, arg):
        if frame.f_code.co_filename.startswith(root) and (code is None or frame.f_code is code):
            return local
        return None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        yield calls
    finally:
        sys.settrace(previous)
