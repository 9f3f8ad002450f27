"""A tuning run: many problems on one device, every measurement and winner written to the cache.

Cache rows: key = ``ProblemKey.make(op, dtype, problem_bucket(problem))`` (the op family's
bucket: rows/cols for softmax; head dim, Nq/Nk, batch x heads and causal for attention), family hash =
``gen.template_family_hash(op)``, device = ``DeviceInfo.current()``. Every measured config
becomes a trial row (failed ones with their error); the chosen config becomes the winner row.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from ..gen.loader import interpreter_mode
from .families import family as op_family
from .precompile import Precompiler
from .progress import Progress
from .study import ProblemResult, TuneOptions, tune_problem
from .timing import TimingOptions
from .worker import LocalRunner, OutOfTime, ProcessRunner, WorkerError


class NoDeviceError(RuntimeError):
    """No CUDA GPU and not in interpreter mode."""


class TuneInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM, turned into KeyboardInterrupt by the CLI) stopped a session.

    A KeyboardInterrupt, so callers that do not know it still stop; ``result`` holds what was
    done: the finished problems (their winners are in the database), then the interrupted one
    (``error`` says how many of its trials were stored), then none for the problems never started.
    """

    def __init__(self, result: "SessionResult", interrupted: str | None, trials_kept: int,
                 not_started: list[str]):
        super().__init__(f"tuning interrupted during {interrupted or 'start-up'}")
        self.result, self.interrupted = result, interrupted
        self.trials_kept, self.not_started = trials_kept, not_started




def pick_device(interpret: bool | None = None) -> str:
    """"cpu" for the Triton interpreter, else the current CUDA device; NoDeviceError if none.

    ``interpret`` None follows $TRITON_INTERPRET. Timing GPU problems under the interpreter
    would store meaningless winners, so interpret=False with the variable set is an error.
    """
    if interpret is None:
        interpret = interpreter_mode()
    if interpret:
        return "cpu"
    if interpreter_mode():
        raise NoDeviceError("TRITON_INTERPRET is set: kernels would run in the interpreter. "
                            "Unset it to tune the GPU, or pass --interpret for a CPU smoke run")
    import torch

    if not torch.cuda.is_available():
        raise NoDeviceError(
            "tuning needs a CUDA GPU (none is visible to torch). To try the pipeline on "
            "the CPU with tiny problems, run: flashtune tune --interpret")
    return f"cuda:{torch.cuda.current_device()}"


def max_shared_bytes(device: str) -> int | None:
    if not device.startswith("cuda"):
        return None
    try:
        import torch
        from triton.runtime import driver

        index = torch.device(device).index or 0
        return int(driver.active.utils.get_device_properties(index)["max_shared_mem"])
    except Exception:  # noqa: BLE001 - an estimate only: without it, compile errors catch misfits
        return None


# What the first problem of a --total-time run leaves for its finish (setting up, re-checking
# and re-timing the finalists: each re-check on a second shape is another compile), before any
# problem has finished to measure it on: the smaller of half its share and 20 s. An H100
# (thirty-eighth session) took 18.8 s past a 19 s search for softmax fp16 4096 x 50257, and
# with no reserve a 40 s run for two problems gave the first 37.8 s and the second nothing.
FIRST_FINISH_SHARE = 0.5
FIRST_FINISH_GUESS_S = 20.0


@dataclass
class SessionOptions:
    tune: TuneOptions = field(default_factory=TuneOptions)
    timing: TimingOptions = field(default_factory=TimingOptions)
    isolate: bool = True              # worker process (restart after faults) vs this process
    trial_timeout_s: float = 120.0
    precompile_workers: int = 0       # >0: compile proposals in parallel (CUDA only)
    total_budget_s: float | None = None  # shared by all problems (each gets a fair share)
    # time.monotonic() when the run began: the CLI's start, so that its imports and checks
    # (seconds: torch, Triton, Optuna) count against total_budget_s; None: run_session's call.
    started_at: float | None = None
    progress: bool = True
    # Search options of one op family ("attention": fewer trials, compiles are slower);
    # families not named here use ``tune``.
    family_tune: dict[str, TuneOptions] = field(default_factory=dict)


@dataclass
class SessionResult:
    device: object
    problems: list[ProblemResult]
    wall_s: float
    worker_restarts: int = 0

    @property
    def winners(self) -> int:
        return sum(1 for p in self.problems if p.winner is not None)


class _Recorder:
    """Writes one problem's trials and winner to the TuneDB."""

    def __init__(self, db, device_info, family_hash, key, label: str):
        self.db, self.device, self.family, self.key = db, device_info, family_hash, key
        self.label = label
        self.recorded = 0  # trial rows written (what an interruption keeps of this problem)
        self.read: dict | None = None  # the stored winner's config read by stored_config()

    @contextlib.contextmanager
    def _naming_the_problem(self):
        # A failed write ends the run: its error (the database's own words) also says which
        # problem's rows were being written, the one whose results did not all reach it.
        from ..cache import CacheError

        try:
            yield
        except CacheError as err:
            raise CacheError(f"{self.label}: {err}") from err

    def trial(self, config: dict, m) -> None:
        with self._naming_the_problem():
            if m.ok:
                self.db.record_trial(self.device, self.family, self.key, config,
                                     median_ms=m.median_ms, p20_ms=m.p20_ms, p80_ms=m.p80_ms)
            else:
                self.db.record_trial(self.device, self.family, self.key, config,
                                     error=m.error or "failed")
        self.recorded += 1

    def stored_config(self) -> dict | None:
        """The config of the winner stored for this problem's bucket, or None (none stored, or
        a row no reader can use: this run's winner replaces it, so it is not worth a warning).
        Kept as what this run read: its winner replaces only that row (see winner())."""
        import warnings

        from ..cache import CacheWarning

        with self._naming_the_problem(), warnings.catch_warnings():
            warnings.simplefilter("ignore", CacheWarning)
            stored = self.db.winner(self.device, self.family, self.key)
        self.read = stored.config if stored is not None else None
        return self.read

    def winner(self, result: ProblemResult) -> None:
        m = result.winner_ms
        with self._naming_the_problem():
            # Whatever the stored winner's median: it may come from another shape of the
            # bucket, and this run measured the stored config on its own shape (tune_problem's
            # ``stored``), so its winner is the faster one here. Only while the row is still
            # the one it read (if_stored): another tuner's winner, stored during this search
            # and never measured here, stays unless this one is faster.
            self.db.upsert_winner(self.device, self.family, self.key, result.winner,
                                  median_ms=m.median_ms, p20_ms=m.p20_ms, p80_ms=m.p80_ms,
                                  trials=len(result.measured), replace=True,
                                  if_stored=self.read)


def run_session(problems, db, options: SessionOptions | None = None, *, runner=None,
                adapter=None, device: str | None = None, device_info=None,
                precompiler=None) -> SessionResult:
    """Tune each problem in turn; a problem that cannot be set up is reported, the rest go on."""
    from ..cache import DeviceInfo
    from ..gen import template_family_hash
    from .storage import study_name

    problems = list(problems)
    options = options or SessionOptions()
    device = device or pick_device()
    device_info = device_info or DeviceInfo.current(device)
    t0 = options.started_at if options.started_at is not None else time.monotonic()
    # Where the total time ends: the searches stop there, and a worker's setup is not waited
    # for past it (setup and re-timing count against the total, as --total-time promises).
    deadline = t0 + options.total_budget_s if options.total_budget_s is not None else None
    own_runner = runner is None
    if own_runner:
        runner = (ProcessRunner(adapter, options.timing, options.trial_timeout_s,
                                deadline=deadline) if options.isolate
                  else LocalRunner(adapter, options.timing))
        if isinstance(runner, ProcessRunner):
            runner.start_early()
    own_precompiler = precompiler is None
    if own_precompiler and options.precompile_workers > 0 and device.startswith("cuda"):
        precompiler = Precompiler(options.precompile_workers, device, options.trial_timeout_s)
    progress = Progress(options.progress)
    shared = max_shared_bytes(device)
    results = []
    # Where an interruption lands: problem `index` is "searching" or "storing" (its winner
    # being written) until its result is appended; stage None means between problems.
    index, stage, recorder = 0, None, None
    # Seconds each finished problem spent outside its search budget (listing candidates, making
    # inputs, re-timing finalists): the next problems' searches leave that much room.
    outside: list[float] = []
    try:
        for index, tp in enumerate(problems):
            stage, recorder = "searching", None
            tune_opts = options.family_tune.get(op_family(tp.op).name, options.tune)
            if options.total_budget_s is not None:
                left = options.total_budget_s - (time.monotonic() - t0)
                if left <= 0:
                    results.append(ProblemResult(tp.label(), 0, 0, error=(
                        f"not tuned: the --total-time of {options.total_budget_s:g} s was spent "
                        "before it started")))
                    progress.message(_summary(results[-1]))
                    stage = None
                    continue
                share = left / (len(problems) - index)
                reserve = (sum(outside) / len(outside) if outside
                           else min(share * FIRST_FINISH_SHARE, FIRST_FINISH_GUESS_S))
                budget = max(0.5, share - reserve)  # a search always measures one config
                budget = min(budget, tune_opts.time_budget_s or budget)
                tune_opts = _replace(tune_opts, time_budget_s=budget)
            key = tp.key()
            family = template_family_hash(tp.op)
            recorder = _Recorder(db, device_info, family, key, tp.label())
            name = study_name(device_info.name, device_info.capability, family, tp.op, tp.dtype,
                              key.bucket_json())
            try:
                result = tune_problem(tp, runner, device=device, options=tune_opts, study_name=name,
                                      on_trial=recorder.trial, progress=progress,
                                      precompiler=precompiler, max_shared_bytes=shared,
                                      sm_count=device_info.sm_count,
                                      stored=recorder.stored_config(), deadline=deadline)
            except WorkerError as err:
                progress.close()
                error = str(err)
                if isinstance(err, OutOfTime) and options.total_budget_s is not None:
                    # Which part took the time: a worker set up too slowly, or what came before
                    # the setup (on a fresh process: the imports and the first listing of
                    # candidates, 10-15 s on an H100 host).
                    where = ("while its worker was being set up" if err.begun else
                             "before its first trial (setting up the run and listing its "
                             "candidates)")
                    error = (f"not tuned: the --total-time of {options.total_budget_s:g} s ran "
                             f"out {where}, {time.monotonic() - t0:.1f} s after the run began")
                result = ProblemResult(tp.label(), 0, 0, error=error)
            stage = "storing"
            if result.winner is not None:
                recorder.winner(result)
            results.append(result)
            if result.wall_s:
                outside.append(max(0.0, result.wall_s - result.search_s))
            stage = None
            progress.message(_summary(result))
    except KeyboardInterrupt as err:
        # Every finished problem's winner and every measured trial are already committed (one
        # short transaction each); say so instead of a traceback. The interrupted problem gets
        # no winner: its search was cut short and its finalists never re-timed.
        kept = recorder.recorded if recorder is not None else 0
        current = problems[index] if stage is not None and len(results) == index else None
        if current is not None:
            results.append(ProblemResult(current.label(), 0, 0, error=(
                f"{kept} measured trial(s) kept, " + (
                    "no winner stored (interrupted: its search was cut short)"
                    if stage == "searching" else
                    "interrupted while its winner was being stored (see `flashtune show`)"))))
        interrupted = TuneInterrupted(
            SessionResult(device_info, results, time.monotonic() - t0,
                          getattr(runner, "restarts", 0)),
            current.label() if current is not None else None, kept,
            [tp.label() for tp in problems[len(results):]])
        raise interrupted from err
    finally:
        progress.close()
        if own_precompiler and precompiler is not None:
            precompiler.close()
        if own_runner:
            runner.close()
    return SessionResult(device_info, results, time.monotonic() - t0,
                         getattr(runner, "restarts", 0))


def _replace(opts: TuneOptions, **changes) -> TuneOptions:
    import dataclasses

    return dataclasses.replace(opts, **changes)


def _summary(r: ProblemResult) -> str:
    if r.winner is None:
        return f"{r.label}: no winner ({first_line(r.error)})"
    fails = len(r.failed)
    return (f"{r.label}: {r.winner_ms.median_ms:.4f} ms with {r.winner} "
            f"({len(r.measured)} trials, {fails} failed, stopped by {r.stopped_by}, "
            f"{r.wall_s:.1f} s)")


def first_line(error: str | None) -> str:
    """What a user reads of an error: its first line (a worker's traceback stays in the trial
    rows and FLASHTUNE_LOG)."""
    lines = (error or "").strip().splitlines()
    return lines[0] if lines else "failed"
