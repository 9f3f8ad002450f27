"""Audit of fork safety: a child forked (os.fork, multiprocessing's 'fork' start method,
DataLoader workers) while another thread of the parent was inside flashtune, holding one of its
locks. CPU only (Triton's interpreter, tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback

import pytest
import torch

import flashtune
import flashtune.dispatch as dispatch
from blocking import flashtune_locks
from dispatch_helpers import DEVICE, fresh_db  # noqa: F401
from flashtune.gen import row_sync

pytestmark = [pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
              pytest.mark.filterwarnings("ignore::RuntimeWarning:triton"),
              pytest.mark.filterwarnings("ignore::flashtune.cache.CacheWarning"),
              # Python 3.12+ warns of any fork of a process with threads: the subject here.
              pytest.mark.filterwarnings("ignore:This process .* is multi-threaded"),
              pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")]

CHILD_TIMEOUT_S = 60


def _first_calls_in_child() -> None:
    """What the child runs: first calls of each op, and a polled-partials launch's workspace
    (the persistent split's, CUDA only in real use)."""
    x = torch.randn(5, 56, device=DEVICE)
    torch.testing.assert_close(flashtune.softmax(x), torch.softmax(x, -1))
    q, k, v = (torch.randn(1, 2, 20, 32, device=DEVICE, dtype=torch.float16) for _ in "qkv")
    expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    torch.testing.assert_close(flashtune.attention(q, k, v).float(), expected,
                               atol=2e-2, rtol=2e-2)
    with row_sync.polled_partials(torch.device("cpu"), 8):
        pass


def _wait(pid: int, seconds: float) -> int | None:
    """The child's wait status, or None (child killed) if it did not end within seconds."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def test_a_child_forked_while_a_thread_held_flashtune_locks_runs_first_calls(
        fresh_db, tmp_path, monkeypatch):
    """Defect: a fork copies each lock as it is; one that another thread of the parent held
    (loading the winner table, importing a kernel, storing a plan, saying a cache warning)
    stayed held in the child, where that thread does not exist, and the child's first
    flashtune call waited on it forever. Here a thread holds every flashtune lock at the fork."""
    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path / "cache"))  # kernels to import
    dispatch.reset()  # and a winner table to load
    with row_sync.polled_partials(torch.device("cpu"), 8):  # a workspace (and its lock)
        pass
    locks = flashtune_locks()
    assert len(locks) >= 4, locks
    held, forked = threading.Event(), threading.Event()

    def hold_them_all():
        for lock in locks:
            lock.acquire()
        held.set()
        forked.wait()
        for lock in reversed(locks):
            lock.release()

    holder = threading.Thread(target=hold_them_all)
    holder.start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            _first_calls_in_child()
            status = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(status)
    forked.set()
    holder.join()
    status = _wait(pid, CHILD_TIMEOUT_S)
    assert status is not None, f"the forked child's first calls hung (> {CHILD_TIMEOUT_S} s)"
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (its stderr above)"
