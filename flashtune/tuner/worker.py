"""Compile, check and time candidates, in this process or in a restartable worker process.

``LocalRunner`` does the work: ``setup(task)`` builds the problem's inputs, oracle and gate once
(reused by every trial of that problem), ``measure(config)`` launches once (compiling on first
use; a config is compiled once per process and Triton's disk cache keeps it across restarts),
checks the output with the gate, then times it. ``retime(configs, rounds)`` checks each
finalist with the gate again (and the case's ``recheck`` launch, if it has one), then times
them round-robin.

``ProcessRunner`` runs a ``LocalRunner`` in a ``multiprocessing`` *spawn* child. A kernel that
faults the CUDA context (illegal address: every later CUDA call fails) or kills the process, or a
trial that runs past its timeout, becomes a failed trial; the child is killed and a fresh one is
started on the next request, with the current problem set up again. The sweep goes on.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from .timing import TimingOptions, bench


@dataclass(frozen=True)
class Task:
    """One problem as the worker sees it (picklable)."""

    op: str
    problem: Any  # SoftmaxProblem | AttentionProblem (frozen, picklable)
    device: str  # "cuda:0", "cpu" under the interpreter
    seed: int = 0


@dataclass(frozen=True)
class Measurement:
    status: str  # "ok" | "failed"
    median_ms: float | None = None
    p20_ms: float | None = None
    p80_ms: float | None = None
    error: str | None = None
    first_launch_s: float | None = None  # compile (or cache load) + one run
    fatal: bool = field(default=False, compare=False)  # the worker cannot go on

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @classmethod
    def failed(cls, error: str, fatal: bool = False, first_launch_s: float | None = None):
        return cls("failed", error=error[:2000], fatal=fatal, first_launch_s=first_launch_s)


class WorkerError(RuntimeError):
    """The worker could not set a problem up (e.g. its inputs do not fit in memory)."""


class OutOfTime(WorkerError):
    """A setup cut short (``begun``) or never begun because the runner's deadline passed."""

    def __init__(self, message: str, *, begun: bool):
        super().__init__(message)
        self.begun = begun


def _describe(err: BaseException) -> str:
    kind = type(err).__name__
    if kind == "OutOfResources":
        return f"out of resources: {err}"
    if kind in ("CompilationError", "CompileTimeAssertionFailure") or "compil" in kind.lower():
        return f"compile error: {kind}: {err}"
    return f"launch error: {kind}: {err}"


class LocalRunner:
    """Runs candidates in this process (the interpreter, tests, and inside the worker child)."""

    def __init__(self, adapter=None, timing: TimingOptions | None = None):
        from .adapter import OpAdapter

        self.adapter = adapter if adapter is not None else OpAdapter()
        self.timing = timing or TimingOptions()
        self.task: Task | None = None
        self.case = None
        self._pristine: list = []  # (input tensor, its copy as the case made it)

    @property
    def on_gpu(self) -> bool:
        return self.task is not None and self.task.device.startswith("cuda")

    def setup(self, task: Task) -> None:
        import torch

        if task == self.task:
            return
        self.task, self.case, self._pristine = None, None, []  # free the previous tensors first
        if task.device.startswith("cuda"):
            torch.cuda.set_device(torch.device(task.device))
            torch.cuda.empty_cache()
        case = self.adapter.make_case(task.op, task.problem, task.device, task.seed)
        # A copy of each input: the gate checks the outputs only, and a kernel that also wrote
        # to its input would pass, then every later candidate would run on the changed input
        # and fail against the oracle (the problem left without a winner, or with that one).
        outputs = {id(case.out), *(id(t) for t in (case.recheck.outputs if case.recheck else ()))}
        self._pristine = [(t, t.clone()) for t in case.args
                          if isinstance(t, torch.Tensor) and id(t) not in outputs]
        self.case = case
        self.task = task
        self._sync()

    def _inputs_changed(self) -> str | None:
        """Why the last launches failed if they wrote to an input (which is then restored for
        the next candidate), else None."""
        import torch

        from .gate import WRONG

        changed = [i for i, (t, copy) in enumerate(self._pristine) if not torch.equal(t, copy)]
        for i in changed:
            self._pristine[i][0].copy_(self._pristine[i][1])
        if not changed:
            return None
        return f"{WRONG}: the kernel wrote to its input (launch argument(s) {changed})"

    def _sync(self) -> None:
        if self.on_gpu:  # launches are asynchronous: errors and faults surface here
            import torch

            torch.cuda.synchronize()

    def _context_broken(self) -> bool:
        """After a failed launch on a GPU: can this process still use CUDA?"""
        if not self.on_gpu:
            return False
        import torch

        try:
            torch.cuda.synchronize()
            probe = torch.ones(1, device=self.task.device)
            return float((probe + 1).item()) != 2.0
        except Exception:  # noqa: BLE001 - any failure here means the context is gone
            return True

    def _launcher(self, config, args=None):
        """A launch of ``config`` with the case's arguments, or with ``args`` instead."""
        op, case, adapter = self.task.op, self.case, self.adapter
        if args is not None:
            case = replace(case, args=args)
        return lambda: adapter.launch(op, config, case)

    def measure(self, raw_config: Mapping[str, Any]) -> Measurement:
        if self.task is None:
            raise WorkerError("measure() before setup()")
        with warnings.catch_warnings():
            # The interpreter's numpy warns on masked lanes (-inf - -inf); results are checked.
            warnings.simplefilter("ignore", RuntimeWarning)
            return self._measure(raw_config)

    def _checked_run(self, run, outputs=None, check=None) -> tuple[float | None, Measurement | None]:
        """One launch of ``run``, then the correctness gate on its output: (seconds the launch
        took, None) if it passes, else (seconds or None, the failed Measurement).

        ``outputs`` and ``check``: what the launch writes and the check of it (a Recheck's),
        instead of the case's output and gate."""
        for t in outputs if outputs is not None else (self.case.out,):
            t.fill_(float("nan"))  # a kernel that writes nothing cannot pass the gate
        t0 = time.perf_counter()
        try:
            run()
            self._sync()
        except Exception as err:  # noqa: BLE001 - every launch failure is a failed trial
            return None, Measurement.failed(_describe(err), fatal=self._context_broken())
        first = time.perf_counter() - t0
        try:
            wrong = self._inputs_changed() or (
                check() if check is not None else self.case.gate.check(self.case.out))
        except Exception as err:  # noqa: BLE001 - a fault surfaces at the gate's sync
            return first, Measurement.failed(_describe(err), fatal=self._context_broken(),
                                             first_launch_s=first)
        if wrong:
            return first, Measurement.failed(wrong, first_launch_s=first)
        return first, None

    def _measure(self, raw_config: Mapping[str, Any]) -> Measurement:
        from ..gen import validate_config

        config = validate_config(self.task.op, raw_config)
        run = self._launcher(config)
        first, failed = self._checked_run(run)
        if failed is not None:
            return failed
        try:
            med, p20, p80 = bench(run, self.on_gpu, self.timing)
            wrong = self._inputs_changed()  # a launch after the gate's changed an input
        except Exception as err:  # noqa: BLE001
            return Measurement.failed(_describe(err), fatal=self._context_broken(), first_launch_s=first)
        if wrong:
            return Measurement.failed(wrong, first_launch_s=first)
        return Measurement("ok", med, p20, p80, first_launch_s=first)

    def retime(self, raw_configs: list, rounds: int) -> list[Measurement]:
        """Time the finalists round-robin, the order rotated each round (no position bias).

        Each finalist passes the correctness gate again first, on this run's problem: its
        trial may come from a journal written for another shape of the same bucket (or by
        another run), and a kernel that is right only some of the time should not be stored
        on the strength of one check."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return self._retime(raw_configs, rounds)

    def _retime(self, raw_configs: list, rounds: int) -> list[Measurement]:
        from ..gen import validate_config

        configs = [validate_config(self.task.op, c) for c in raw_configs]
        runs = [self._launcher(c) for c in configs]
        samples: list[list[tuple[float, float, float]]] = [[] for _ in runs]
        errors: list[str | None] = [None] * len(runs)
        recheck = self.case.recheck
        for i, run in enumerate(runs):
            _, failed = self._checked_run(run)
            if failed is None and recheck is not None:
                # Here only, not in every trial: the recheck's launch is another compile.
                _, failed = self._checked_run(self._launcher(configs[i], recheck.args),
                                              recheck.outputs, recheck.check)
            if failed is not None and failed.fatal:
                return [Measurement.failed(failed.error, fatal=True) for _ in runs]
            errors[i] = failed.error if failed is not None else None
        n = len(runs)
        for r in range(rounds):
            for j in range(n):
                i = (j + r) % n
                if errors[i]:
                    continue
                try:
                    samples[i].append(bench(runs[i], self.on_gpu, self.timing, retime=True))
                    errors[i] = self._inputs_changed()
                except Exception as err:  # noqa: BLE001
                    errors[i] = _describe(err)
                    if self._context_broken():
                        return [Measurement.failed(errors[i], fatal=True) for _ in runs]
        out = []
        for err, s in zip(errors, samples):
            if err or not s:
                out.append(Measurement.failed(err or "no samples"))
                continue
            med = sorted(x[0] for x in s)[len(s) // 2]
            p20 = sorted(x[1] for x in s)[len(s) // 2]
            p80 = sorted(x[2] for x in s)[len(s) // 2]
            out.append(Measurement("ok", med, p20, p80))
        return out

    def close(self) -> None:
        self.task, self.case, self._pristine = None, None, []


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this child process when its parent dies (Linux; elsewhere a no-op).

    A parent that is killed outright (kill -9, the OOM killer, a scheduler's hard stop) cannot
    stop its children: one in a trial or compile that never ends (a kernel in an endless loop)
    would otherwise run on for ever, holding its GPU. The child reads its requests from a pipe
    and only notices a dead parent when it next reads. (The signal comes when the thread that
    started the child ends: the runner's and the pool's are started by the thread tuning.)"""
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # no libc prctl (a static or unusual build): as before
        return
    if os.getppid() != parent_pid:  # the parent died before prctl: no signal will come
        os._exit(1)


def _serve(conn, adapter, timing: TimingOptions, parent_pid: int | None = None) -> None:
    """The worker child's loop: one request, one reply; exits after a fatal fault."""
    if parent_pid is not None:
        die_with_parent(parent_pid)
    # Ctrl-C reaches the whole process group: the parent handles it (and kills this process);
    # here it would only print a second traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Imported before the first request: a worker started early (ProcessRunner.start_early)
    # does this while the parent lists the first problem's candidates.
    import torch  # noqa: F401
    import triton  # noqa: F401

    runner = LocalRunner(adapter, timing)
    while True:
        try:
            kind, payload = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if kind == "setup":
                runner.setup(payload)
                reply: Any = ("ok", None)
            elif kind == "measure":
                reply = ("ok", runner.measure(payload))
            elif kind == "retime":
                reply = ("ok", runner.retime(*payload))
            else:
                return
        except Exception as err:  # noqa: BLE001 - report, do not die silently
            reply = ("error", f"{type(err).__name__}: {err}\n{traceback.format_exc(limit=4)}")
        try:
            conn.send(reply)
        except OSError:
            return  # the parent is gone (killed, or it gave up on this request)
        result = reply[1]
        fatal = isinstance(result, Measurement) and result.fatal or (
            isinstance(result, list) and any(m.fatal for m in result))
        if fatal:
            return  # the CUDA context is gone: the parent starts a fresh process


# Longer waits than this mean "no limit": poll() cannot take inf or huge values (OverflowError).
MAX_WAIT_S = 7 * 24 * 3600.0


def wait_limit(timeout_s: float) -> float | None:
    """A timeout for poll()/get(): None (no limit) for waits of a week or more."""
    return None if timeout_s >= MAX_WAIT_S else timeout_s


class ProcessRunner:
    """A ``LocalRunner`` in a spawn child, restarted after a fault, a crash or a timeout."""

    def __init__(self, adapter=None, timing: TimingOptions | None = None,
                 trial_timeout_s: float = 120.0, setup_timeout_s: float = 600.0,
                 deadline: float | None = None):
        from .adapter import OpAdapter

        if not (trial_timeout_s > 0 and setup_timeout_s > 0):  # NaN fails too
            raise ValueError("trial_timeout_s and setup_timeout_s must be > 0")
        self.adapter = adapter if adapter is not None else OpAdapter()
        self.timing = timing or TimingOptions()
        self.trial_timeout_s = trial_timeout_s
        self.setup_timeout_s = setup_timeout_s
        # time.monotonic() after which no problem's first setup is waited for (a session's
        # --total-time): a worker slow to start or to make a problem's inputs would else wait
        # setup_timeout_s whatever was left of the run's time.
        self.deadline = deadline
        self.task: Task | None = None
        self.restarts = 0
        self._proc = None
        self._conn = None
        self._child_task: Task | None = None
        self._busy = False  # a request sent, its reply not read: the child is working

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # fork would inherit a (broken) CUDA context
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, self.adapter, self.timing, os.getpid()),
                           name="flashtune-tune-worker", daemon=True)
        proc.start()
        child.close()
        self._proc, self._conn, self._child_task = proc, parent, None
        self._busy = False

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.is_alive():
                self._proc.kill()
            self._proc.join(timeout=10)
        if self._conn is not None:
            self._conn.close()
        self._proc, self._conn, self._child_task = None, None, None
        self._busy = False

    def _request(self, kind: str, payload, timeout_s: float):
        """Send one request; (status, value) with status ok | error | timeout | crashed."""
        try:
            self._busy = True
            self._conn.send((kind, payload))
            if not self._conn.poll(wait_limit(timeout_s)):
                self._kill()
                self.restarts += 1
                return "timeout", f"timeout: no result after {timeout_s:g} s (worker restarted)"
            reply = self._conn.recv()
            self._busy = False
            return reply
        except (EOFError, OSError, BrokenPipeError):
            code = self._proc.exitcode if self._proc is not None else None
            if self._proc is not None:
                self._proc.join(timeout=5)
                code = self._proc.exitcode
            self._kill()
            self.restarts += 1
            return "crashed", f"worker process died (exit code {code}; worker restarted)"

    def _ensure(self, by_deadline: bool = False) -> None:
        """A live worker holding ``self.task``. ``by_deadline``: a problem's first setup, which
        waits no later than ``self.deadline``; a setup again after a restart (a fatal trial)
        waits its full time, as the search and its finalists' re-check need it to finish."""
        if self.task is None:
            raise WorkerError("measure() before setup()")
        alive = self._proc is not None and self._proc.is_alive()
        if alive and self._child_task == self.task:
            return
        timeout, cut = self.setup_timeout_s, False
        if by_deadline and self.deadline is not None:
            # before a worker is spawned: with no time left, none is started in vain
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise OutOfTime(f"no time left to set up {self.task.op} {self.task.problem}",
                                begun=False)
            timeout, cut = min(timeout, left), left < timeout
        if not alive:
            self._kill()
            self._start()
        status, value = self._request("setup", self.task, timeout)
        if status != "ok":
            self._kill()
            if status == "timeout" and cut:
                # stopped for the run's end, not restarted after a fault: no restart to count
                # in the run's summary (_request counted one)
                self.restarts -= 1
                raise OutOfTime(f"the time ran out while the worker set up {self.task.op} "
                                f"{self.task.problem} ({timeout:.1f} s were left)", begun=True)
            raise WorkerError(f"worker could not set up {self.task.op} {self.task.problem}: {value}")
        self._child_task = self.task

    def start_early(self) -> None:
        """Start the worker process now, if none is running: it imports torch and Triton
        while this process lists the first problem's candidates (an H100 host took 11.5 s to
        list and 4.4 s to set the worker up, one after the other, thirty-ninth session)."""
        if self._proc is None or not self._proc.is_alive():
            self._kill()
            self._start()

    def setup(self, task: Task) -> None:
        self.task = task
        self._ensure(by_deadline=True)

    def _after(self, result) -> None:
        fatal = isinstance(result, Measurement) and result.fatal or (
            isinstance(result, list) and any(m.fatal for m in result))
        if fatal:  # the child exits on its own; reap it so the next request starts fresh
            self._kill()
            self.restarts += 1

    def measure(self, raw_config: Mapping[str, Any]) -> Measurement:
        self._ensure()
        status, value = self._request("measure", dict(raw_config), self.trial_timeout_s)
        if status in ("timeout", "crashed"):
            return Measurement.failed(value, fatal=True)
        if status == "error":
            return Measurement.failed(f"worker error: {value}")
        self._after(value)
        return value

    def retime(self, raw_configs: list, rounds: int) -> list[Measurement]:
        self._ensure()
        timeout = self.trial_timeout_s * max(1, len(raw_configs))
        status, value = self._request("retime", ([dict(c) for c in raw_configs], rounds), timeout)
        if status != "ok":
            return [Measurement.failed(str(value), fatal=status != "error") for _ in raw_configs]
        self._after(value)
        return value

    def close(self) -> None:
        # Interrupted mid-request (Ctrl-C): the child is busy with a trial; do not wait for it.
        if not self._busy and self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(("stop", None))
            except OSError:
                pass
            self._proc.join(timeout=5)
        self._kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
