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

# The children run our kernels, which only Triton's interpreter does on CPU tensors (CI): a
# forked child cannot use CUDA (torch refuses to initialize it again there).
in_interpreter_only = pytest.mark.skipif(DEVICE == "cuda", reason="a forked child cannot use "
                                         "CUDA; CPU runs (the interpreter) cover the locks")


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


def _one_torch_thread() -> None:
    """First thing in a forked child, as DataLoader workers do: torch's CPU ops run OpenMP
    parallel regions, and GNU OpenMP's thread pool, copied half-alive by the fork of a parent
    that used it (earlier tests), deadlocks the child's first one (torch.softmax, the
    reference here; seen in CI, not in this file alone)."""
    torch.set_num_threads(1)


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


@in_interpreter_only
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
            _one_torch_thread()
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


@in_interpreter_only
def test_a_child_forked_during_another_threads_reset_finishes_it(tmp_path, monkeypatch):
    """Defect: a fork while another thread was inside dispatch.reset() (past `disabled`, before
    the new generation and the clear) left the child with FLASHTUNE_DISABLE=1 set and the old
    plans stored: the hot path served our kernels there for good."""
    import sys

    from flashtune.dispatch.runtime import Runtime

    monkeypatch.setenv("FLASHTUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("FLASHTUNE_DISABLE", raising=False)
    dispatch.reset()
    runtime = dispatch.RUNTIME
    x = torch.randn(4, 32, device=DEVICE)
    flashtune.softmax(x)
    plans = runtime.plans["softmax"]
    assert plans, "no plan stored (needs the interpreter, tests/conftest.py)"
    kernel_result = torch.full_like(x, 7.0)  # what "the kernel plan" gives
    for key in list(plans):
        plans[key] = lambda t: kernel_result
    assert flashtune.softmax(x) is kernel_result
    monkeypatch.setenv("FLASHTUNE_DISABLE", "1")

    inside, forked = threading.Event(), threading.Event()
    code = Runtime._install.__code__  # reset()'s work under its lock

    def trace(frame, event, arg):
        if frame.f_code is not code:
            return None

        def local(frame, event, arg):
            # The first line after `self.disabled = ...` ran: the reset is half done.
            if event == "line" and runtime.disabled and not inside.is_set():
                inside.set()
                forked.wait()
            return local
        return local

    def resetting():
        sys.settrace(trace)
        try:
            dispatch.reset()
        finally:
            sys.settrace(None)

    thread = threading.Thread(target=resetting)
    thread.start()
    assert inside.wait(30)
    try:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            status = 1
            try:
                _one_torch_thread()
                out = flashtune.softmax(x)
                assert out is not kernel_result, "the child served a plan of the old settings"
                torch.testing.assert_close(out, torch.softmax(x, -1))
                assert runtime.disabled and runtime.dispatcher.settings.disabled
                status = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(status)
    finally:
        forked.set()
        thread.join()
    status = _wait(pid, CHILD_TIMEOUT_S)
    assert status is not None, f"the forked child hung (> {CHILD_TIMEOUT_S} s)"
    assert os.waitstatus_to_exitcode(status) == 0, "the forked child failed (its stderr above)"
    monkeypatch.delenv("FLASHTUNE_DISABLE")
    dispatch.reset()


def test_a_remake_that_raises_says_nothing_in_the_child(tmp_path):
    """Defect: a remake that raised (a monkeypatched RUNTIME.dispatcher without remake_lock,
    say) was printed by Python in every forked child ("Exception ignored in ...")."""
    import subprocess
    import sys

    script = (
        "import os, sys\n"
        "from flashtune.forks import after_fork_in_child\n"
        "def remake():\n"
        "    raise AttributeError('no remake_lock')\n"
        "after_fork_in_child(remake)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(0)\n"
        "os.waitpid(pid, 0)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(flashtune.__file__)))
    env = {**os.environ, "PYTHONPATH": root}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "no remake_lock" not in done.stderr and "Exception ignored" not in done.stderr, \
        done.stderr
