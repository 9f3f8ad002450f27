"""Search one problem: Optuna TPE (or grid, or random) over the candidates, then pick a winner.

Flow per problem: candidates = gen's ``fitting_configs`` minus resource misfits (the op's
family in ``families`` knows both); TPE (seeded sampler) starts from the heuristic defaults and
the bucket's stored winner (``enqueue_trial``); each proposed config is measured once (compile,
correctness gate, timing) - a repeated proposal is answered from the memo; failures are recorded
with their reason and told PRUNED so TPE avoids their region. Stops at the trial count, the
time budget or when ``patience`` trials bring no gain. Then the top few (and the seeded
defaults and stored winner) pass the gate again and are re-timed round-robin and, within the
noise band of the fastest, the winner is the heuristic default if it is there, else the stored
winner, else picked by a fixed rule (fewest warps, then fewest stages, then smallest block,
then canonical JSON), so re-tunes agree even when timings jitter.

``grid`` mode measures every candidate (or a deterministic subsample of ``grid_limit``): the
yardstick for measuring the tuner itself. ``random`` mode is the baseline TPE must beat.
"""

from __future__ import annotations

import math
import random
import statistics
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

from .families import family
from .space import SearchSpace, canonical
from .worker import Measurement, Task, WorkerError

MODES = ("tpe", "grid", "random")
MIN_GAIN = 0.005  # a trial must beat the best by 0.5% to reset the patience counter


@dataclass(frozen=True)
class TuneOptions:
    mode: str = "tpe"
    n_trials: int = 48               # measured configs per problem (failed ones count)
    time_budget_s: float | None = 300.0  # per problem
    patience: int | None = 24        # stop after this many trials without a gain
    seed: int = 0
    startup_trials: int = 8          # random TPE proposals before it models (after the defaults)
    top_k: int = 4                   # finalists re-timed round-robin
    retime_rounds: int = 5
    noise_band: float = 0.015        # finalists within 1.5% of the fastest count as tied
    batch: int = 1                   # proposals per round (compiled in parallel on a GPU)
    grid_limit: int | None = None    # grid mode: deterministic subsample of this size
    max_wasted: int = 40             # invalid/duplicate proposals in a row before a random pick
    storage: str | None = None       # Optuna storage: None (memory), journal path or RDB URL
    seed_defaults: bool = True       # enqueue the heuristic defaults first (off: to measure search)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        for name in ("n_trials", "top_k", "retime_rounds", "batch", "max_wasted"):
            if type(getattr(self, name)) is not int or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience must be >= 1 or None, got {self.patience!r}")
        if self.time_budget_s is not None and self.time_budget_s <= 0:
            raise ValueError(f"time_budget_s must be > 0 or None, got {self.time_budget_s!r}")
        if not 0 <= self.noise_band < 1:
            raise ValueError(f"noise_band must be in [0, 1), got {self.noise_band!r}")


@dataclass
class ProblemResult:
    label: str
    candidates: int
    pruned: int
    winner: dict | None = None
    winner_ms: Measurement | None = None
    measured: list[tuple[dict, Measurement]] = field(default_factory=list)  # in order
    best_curve: list[float | None] = field(default_factory=list)  # best ms after each trial
    invalid_proposals: int = 0
    repeated_proposals: int = 0
    finalists: list[tuple[dict, Measurement]] = field(default_factory=list)  # re-timed
    stopped_by: str = ""
    wall_s: float = 0.0
    search_s: float = 0.0  # the part of wall_s that the time budget governs (the search)
    error: str | None = None

    @property
    def failed(self) -> list[tuple[dict, Measurement]]:
        return [(c, m) for c, m in self.measured if not m.ok]


def tie_key(config: dict) -> tuple:
    """The fixed rule inside the noise band: fewer warps, fewer stages, smaller block, JSON."""
    return (config.get("num_warps", 0), config.get("num_stages", 0), config.get("block", 0),
            canonical(config))


def choose_winner(finalists: list[tuple[dict, Measurement]], noise_band: float, preferred=(),
                  trial_ms=None):
    """The fastest finalist, or inside the noise band of the fastest: the first of `preferred`
    (the heuristic defaults) that is there, else the fixed rule (tie_key). A default comes from
    measurements over many runs; a challenger must beat it by more than the noise of one
    re-timing to replace it. (H200, thirteenth session: on 1024 x 65536 fp32 the default,
    re-timed within 1% of the fastest, lost to the fixed rule's pick, which the bench then
    timed at 165 us against 158 us for the default in another run of the same day.)

    ``trial_ms`` ({canonical config: its trial's median}): a challenger (not in `preferred`) is
    judged by the slower of its trial and its re-timing, so it must be fast in both to win.
    A preferred config is judged by its re-timing alone: its trial, the search's first, may
    be inflated by clocks still ramping up. (H200, thirty-second session: on 65536 x 128 bf16
    a challenger timed 14.7 us in its trial, as in a later probe, against 12.8 for the
    default; its re-timing alone said 12.1, it won, and it ran 9% slower than the default.)"""
    ok = [(c, m) for c, m in finalists if m.ok]
    if not ok:
        return None, None
    trial_ms = trial_ms or {}
    preferred_keys = {canonical(c) for c in preferred}

    def judged_ms(config, m: Measurement) -> float:
        key = canonical(config)
        if key in preferred_keys or key not in trial_ms:
            return m.median_ms
        return max(m.median_ms, trial_ms[key])

    fastest = min(judged_ms(c, m) for c, m in ok)
    tied = [(c, m) for c, m in ok if judged_ms(c, m) <= fastest * (1 + noise_band)]
    for default in preferred:
        for c, m in tied:
            if canonical(c) == canonical(default):
                return c, m
    return min(tied, key=lambda cm: tie_key(cm[0]))


def candidate_list(op: str, problem, max_shared_bytes: int | None = None, device: str = "cpu"):
    """(kept, pruned) candidates of one problem: the family's fitting configs on ``device``
    minus resource misfits (``max_shared_bytes``: the device's shared memory per block)."""
    return family(op).candidates(op, problem, device, max_shared_bytes)


def grid_order(candidates: list, limit: int | None, must_have=()) -> list:
    """All candidates, or a deterministic subsample (seeded by the sorted JSON, so stable);
    the ``must_have`` ones among them first, so that a run cut to fewer trials than the grid
    still measures the seeds (heuristic defaults, a stored winner)."""
    keep = {canonical(c) for c in must_have}
    ordered = sorted(candidates, key=canonical)
    if limit is not None and limit < len(ordered):
        chosen = {canonical(c) for c in random.Random(1234).sample(ordered, limit)} | keep
        ordered = [c for c in ordered if canonical(c) in chosen]
    return ([c for c in ordered if canonical(c) in keep]
            + [c for c in ordered if canonical(c) not in keep])


class _Search:
    """The measuring loop shared by all modes."""

    def __init__(self, tp, runner, task: Task, options: TuneOptions, on_trial, progress, precompiler,
                 deadline: float | None = None):
        self.tp, self.runner, self.task, self.options = tp, runner, task, options
        self.on_trial, self.progress, self.precompiler = on_trial, progress, precompiler
        self.deadline = deadline
        self.memo: dict[str, Measurement] = {}
        self.best: float | None = None
        self.since_gain = 0
        self.t0 = time.monotonic()
        self.trial_s: list[float] = []  # wall seconds of each measurement (compile included)

    def stop_reason(self, n_done: int) -> str:
        o = self.options
        if n_done >= o.n_trials:
            return "trials"
        # The budget never ends a search before its first measurement (opening the study
        # may take longer than a small budget): a search always measures one config.
        if n_done > 0 and self.out_of_time():
            return "time budget"
        if o.patience is not None and self.since_gain >= o.patience:
            return "patience"
        return ""

    def out_of_time(self) -> bool:
        """The search's own time budget, or the run's (--total-time), has ended."""
        o, now = self.options, time.monotonic()
        return ((o.time_budget_s is not None and now - self.t0 >= o.time_budget_s)
                or (self.deadline is not None and now >= self.deadline))

    def measure_many(self, configs: list, result: ProblemResult, after=None) -> None:
        """Measure ``configs`` in turn; ``after(config, m)`` runs as each one is measured (what
        a study keeps of it: an interruption later in the batch does not lose it). Stops
        before the next config once the time is over (the first is always measured, as in
        stop_reason): a batch of slow trials ran past --total-time by up to a batch."""
        if self.precompiler is not None and len(configs) > 1:
            self.precompiler.submit(self.task, configs)
        for i, config in enumerate(configs):
            if i and self.out_of_time():
                break
            if self.precompiler is not None and len(configs) > 1:
                self.precompiler.wait(self.task, config)
            started = time.monotonic()
            m = self.runner.measure(config.as_dict())
            self.trial_s.append(time.monotonic() - started)
            self.memo[canonical(config)] = m
            result.measured.append((config.as_dict(), m))
            if m.ok and (self.best is None or m.median_ms < self.best * (1 - MIN_GAIN)):
                self.since_gain = 0
            else:
                self.since_gain += 1
            if m.ok and (self.best is None or m.median_ms < self.best):
                self.best = m.median_ms
            result.best_curve.append(self.best)
            if self.on_trial is not None:
                self.on_trial(config.as_dict(), m)
            if self.progress is not None:
                note = "" if m.ok else "(failed: " + (m.error or "")[:40] + ")"
                self.progress.update(len(result.measured), self.best, note)
            if after is not None:
                after(config, m)


def tune_problem(tp, runner, *, device: str, options: TuneOptions, study_name: str = "",
                 candidates: list | None = None, on_trial: Callable | None = None,
                 progress=None, precompiler=None, max_shared_bytes: int | None = None,
                 sm_count: int = 132, stored: dict | None = None,
                 deadline: float | None = None) -> ProblemResult:
    """Tune one TuneProblem with ``runner``; returns what was measured and the winner.

    ``stored``: the config the database holds for this problem's bucket (an earlier run's
    winner, maybe tuned on another shape of the bucket). If it is a candidate here it is
    seeded and re-timed with the finalists, so the winner has beaten it on this shape.

    ``deadline``: a time.monotonic() after which the search measures no more (a session's
    total time), whatever is left of ``options.time_budget_s``, which counts from the
    search's start: a slow setup may have used the time that budget was reckoned from."""
    t_start = time.monotonic()
    fam = family(tp.op)
    if candidates is None:
        kept, pruned = fam.candidates(tp.op, tp.problem, device, max_shared_bytes)
    else:
        kept, pruned = list(candidates), []
    result = ProblemResult(tp.label(), len(kept), len(pruned))
    if not kept:
        result.error = "no candidate config fits this problem"
        return result
    space = SearchSpace(kept)
    defaults = [c for c in dict.fromkeys([fam.default_config(tp.op, tp.problem, sm_count),
                                          fam.default_config(tp.op, tp.problem)])
                if c in space] if options.seed_defaults else []
    # The stored winner as this space's own candidate; one that is none (another shape's
    # misfit, a config of templates since changed) is left out: this run's winner replaces it.
    incumbent = [space.by_key[canonical(stored)]] if stored is not None and stored in space else []
    # Seeded trials: the defaults and the stored winner (re-timed with the finalists whatever
    # their first time), then the default's twins of one knob that the family names (tried
    # early, re-timed only if they make the top few).
    twins = fam.seed_twins(tp.op, tp.problem, sm_count) if options.seed_defaults else []
    seeds = [c for c in dict.fromkeys(defaults + incumbent + twins) if c in space]
    task = Task(tp.op, tp.problem, device, options.seed)
    try:
        runner.setup(task)
    except WorkerError:
        raise
    except Exception as err:  # noqa: BLE001 - in this process (LocalRunner): e.g. out of memory
        # The ProcessRunner says this as a WorkerError; the session reports it and goes on.
        raise WorkerError(f"could not set up {tp.label()}: {type(err).__name__}: {err}") from err
    search = _Search(tp, runner, task, options, on_trial, progress, precompiler, deadline)
    total = min(options.n_trials, len(kept))
    if progress is not None:
        progress.start(tp.label(), total)
    try:
        if options.mode == "grid":
            _run_grid(search, space, seeds, result, study_name or tp.label())
        else:
            _run_optuna(search, space, seeds, result, study_name or tp.label())
    except WorkerError as err:
        # The worker could not set the problem up again after a restart (a faulting or hung
        # trial killed it): the configs measured so far still choose a winner, as when the
        # trial count ends a search. With nothing measured the session reports the error.
        if not result.measured:
            raise
        lines = str(err).strip().splitlines()
        result.stopped_by = f"worker lost ({lines[0] if lines else type(err).__name__})"
    result.search_s = time.monotonic() - search.t0
    _finish(search, result, defaults, incumbent)
    if progress is not None:
        progress.close()
    result.wall_s = time.monotonic() - t_start
    return result


def _run_grid(search: _Search, space: SearchSpace, seeds, result: ProblemResult, name: str) -> None:
    study = None
    if search.options.storage is not None:
        # A journal: configs an earlier run measured are not measured again, and each new
        # measurement is kept in the study (grid mode asks Optuna for nothing).
        study = _make_study(search, name)
        _resume(study, search, space, result)
    order = grid_order(space.candidates, search.options.grid_limit, must_have=seeds)
    order = [c for c in order[: search.options.n_trials] if canonical(c) not in search.memo]
    if search.precompiler is not None:
        search.precompiler.submit(search.task, order)  # the pool works through all of it
    window = max(search.options.batch, 2 if search.precompiler is not None else 1)
    i = 0
    while i < len(order):
        reason = search.stop_reason(len(result.measured))
        if reason and reason != "patience":  # grid mode ignores patience: it must see all
            result.stopped_by = reason
            return
        chunk = order[i:i + window]
        chunk = chunk[: search.options.n_trials - len(result.measured)]
        search.measure_many(chunk, result, after=(
            None if study is None else lambda config, m: _keep(study, space, config, m)))
        i += window
    result.stopped_by = "exhausted"


def _keep(study, space: SearchSpace, config, m: Measurement) -> None:
    """A measurement as a finished trial of the study, as _tell leaves one (for _resume)."""
    import optuna
    from optuna.trial import TrialState

    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE if m.ok else TrialState.PRUNED,
        value=m.median_ms if m.ok else None, params=space.trial_params(config),
        distributions=space.distributions(config), user_attrs=_trial_attrs(m, canonical(config))))


def _make_study(search: _Search, name: str):
    import optuna

    from .storage import make_storage, study_seed

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed = study_seed(search.options.seed, name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # multivariate/group are marked experimental
        if search.options.mode == "random":
            sampler = optuna.samplers.RandomSampler(seed=seed)
        else:
            sampler = optuna.samplers.TPESampler(
                seed=seed, n_startup_trials=search.options.startup_trials, multivariate=True,
                group=True, constant_liar=search.options.batch > 1,
                warn_independent_sampling=False)
    return optuna.create_study(study_name=name, storage=make_storage(search.options.storage),
                               sampler=sampler, direction="minimize", load_if_exists=True)


def _resume(study, search: _Search, space: SearchSpace, result: ProblemResult) -> None:
    """Configs measured by an earlier run of this study (journal storage) are not re-measured."""
    from optuna.trial import TrialState

    # Finished trials only, as _tell and _keep leave them: _tell writes the measurement one
    # attribute at a time before it tells the trial, so a RUNNING one may hold a status without
    # its times (a run interrupted there, or another process sharing the journal, telling it
    # now). It has no result yet: its config is measured again.
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        if not isinstance(t.user_attrs, dict):  # Optuna replays a journal's JSON unchecked
            raise _damaged(search.options.storage, t.number, study.study_name,
                           f"user_attrs must be a mapping, got {type(t.user_attrs).__name__}")
        values = t.values  # (t.value raises for two values or none)
        if t.state == TrialState.COMPLETE and not (
                isinstance(values, list) and len(values) == 1 and type(values[0]) in (int, float)):
            # TPE compares every completed trial's value: a string there was its TypeError.
            raise _damaged(search.options.storage, t.number, study.study_name,
                           f"a completed trial must hold one number, got values {values!r}")
        key = t.user_attrs.get("config")
        # A trial of another space (or no measurement of ours: a trial still asked) is not
        # this search's; type(key) first, as a list there is unhashable.
        if (type(key) is str and key in space.by_key and key not in search.memo
                and "status" in t.user_attrs):
            m = _measurement_from_attrs(t.user_attrs, t.number, study.study_name,
                                        search.options.storage)
            if m.fatal:
                # A timeout or a lost worker says as much of the run's settings (its
                # --trial-timeout) as of the config: measured again in this run. Replayed,
                # a run with too short a timeout, resumed without it, measured nothing anew
                # and could not even re-time the defaults.
                continue
            search.memo[key] = m
            result.measured.append((space.by_key[key].as_dict(), m))
            if m.ok and (search.best is None or m.median_ms < search.best):
                search.best = m.median_ms
            result.best_curve.append(search.best)


def _measurement_from_attrs(attrs: dict, number: int, study_name: str, storage) -> Measurement:
    """The measurement _trial_attrs kept in a trial, read back; a value it cannot have written
    (an edited or damaged journal) is a ValueError naming the journal and the trial, not a
    TypeError traceback at the first comparison of times."""
    from ..cache.records import check_ms

    try:
        status = attrs["status"]
        if status == "ok":
            return Measurement("ok", *(check_ms(name, attrs.get(name))
                                       for name in ("median_ms", "p20_ms", "p80_ms")))
        if status == "failed":
            error, fatal = attrs.get("error"), attrs.get("fatal", False)
            if error is not None and type(error) is not str:
                raise TypeError(f"error must be a str, got {type(error).__name__} ({error!r})")
            if type(fatal) is not bool:
                raise TypeError(f"fatal must be a bool, got {type(fatal).__name__} ({fatal!r})")
            return Measurement("failed", error=error, fatal=fatal)
        raise ValueError(f"status must be 'ok' or 'failed', got {status!r}")
    except (TypeError, ValueError) as err:
        raise _damaged(storage, number, study_name, err) from None


def _damaged(storage, number: int, study_name: str, why) -> ValueError:
    from ..cache.engine import hide_url_password

    return ValueError(f"journal {hide_url_password(str(storage))}: trial {number} of study "
                      f"{study_name!r} holds a measurement flashtune did not write ({why}); "
                      "give a new journal, or move this one away")


def _trial_attrs(m: Measurement, key: str) -> dict:
    """What a finished trial keeps of its measurement (read back by _resume)."""
    attrs = {"config": key, "status": m.status}
    if m.ok:
        attrs.update(median_ms=m.median_ms, p20_ms=m.p20_ms, p80_ms=m.p80_ms)
    else:
        attrs["error"] = m.error
        if m.fatal:  # a timeout or a lost worker: measured again by a resumed run
            attrs["fatal"] = True
    return attrs


def _tell(study, trial, m: Measurement, key: str) -> None:
    from optuna.trial import TrialState

    for name, value in _trial_attrs(m, key).items():
        trial.set_user_attr(name, value)
    if m.ok:
        study.tell(trial, m.median_ms)
    else:
        study.tell(trial, state=TrialState.PRUNED)  # ranked below every completed trial


def _run_optuna(search: _Search, space: SearchSpace, seeds, result: ProblemResult, name: str) -> None:
    from optuna.trial import TrialState

    study = _make_study(search, name)
    _resume(study, search, space, result)
    # A seed still queued (WAITING) from an earlier run is asked in turn; one left RUNNING by a
    # run that was interrupted while measuring it has no result, and Optuna's skip_if_exists
    # would count it as present: the re-run never measured the default (nor weighed the
    # finalists against it).
    queued = {canonical(t.system_attrs.get("fixed_params", {}))
              for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
    for config in seeds:
        params = space.trial_params(config)
        if canonical(config) not in search.memo and canonical(params) not in queued:
            study.enqueue_trial(params)
            queued.add(canonical(params))
    rng = random.Random(search.options.seed)
    wasted = 0
    while True:
        reason = search.stop_reason(len(result.measured))
        if reason:
            result.stopped_by = reason
            return
        if len(search.memo) >= len(space):
            result.stopped_by = "exhausted"
            return
        want = min(search.options.batch, search.options.n_trials - len(result.measured))
        batch: dict[str, list] = {}  # key -> trials that proposed it
        while len(batch) < want:
            trial = study.ask()
            raw = space.propose(trial)
            config = space.by_key.get(canonical(raw))
            key = canonical(config) if config is not None else None
            if config is None:
                result.invalid_proposals += 1
                study.tell(trial, state=TrialState.PRUNED)
            elif key in search.memo or key in batch:
                result.repeated_proposals += 1
                if key in batch:
                    batch[key].append(trial)  # measured once, told to both
                else:
                    _tell(study, trial, search.memo[key], key)
            else:
                batch[key] = [trial]
                continue
            # Invalid or repeated: measure the nearest unmeasured candidate instead.
            wasted += 1
            skip = set(search.memo) | set(batch)
            neighbour = space.nearest(raw, skip) if wasted < search.options.max_wasted else None
            if neighbour is None and wasted >= search.options.max_wasted:
                unseen = [c for k, c in space.by_key.items() if k not in skip]
                neighbour = rng.choice(unseen) if unseen else None
            if neighbour is None:
                break  # every candidate is measured or in this batch
            study.enqueue_trial(space.trial_params(neighbour))
        wasted = 0
        if not batch:
            result.stopped_by = "exhausted"
            return
        configs = [space.by_key[k] for k in batch]

        def tell(config, m, batch=batch):  # at once: an interruption later in the batch keeps it
            for trial in batch[canonical(config)]:
                _tell(study, trial, m, canonical(config))

        search.measure_many(configs, result, after=tell)
        for key, trials in batch.items():
            if key not in search.memo:  # cut off by the time: no result, ignored by samplers
                for trial in trials:
                    study.tell(trial, state=TrialState.FAIL)


def _all_failed(measured: list[tuple[dict, Measurement]]) -> str:
    """Why a problem has no winner when every measured config failed: the most frequent reason
    (every trial past --trial-timeout, a Triton that compiles no variant), which the user would
    otherwise find only in the database's trial rows."""
    if not measured:
        return "no candidate passed (no config was measured)"
    n = len(measured)
    why = _reason([m for _, m in measured])
    return f"no candidate passed ({n} of {n} measured configs failed{why})"


def _reason(failed: list[Measurement]) -> str:
    """": REASON" or ", most often (COUNT): REASON": the first line of the failed measurements'
    most frequent error."""
    from collections import Counter

    reasons = Counter(((m.error or "").strip().splitlines() or ["failed"])[0] for m in failed)
    reason, count = reasons.most_common(1)[0]
    return f": {reason}" if count == len(failed) else f", most often ({count}): {reason}"


def _recheck(runner, finalists: list, rounds: int) -> tuple[list[Measurement], list[bool]]:
    """The finalists re-checked and re-timed: their measurements, and for each whether it went
    unjudged (the worker could not be set up, so it never ran)."""
    try:
        retimed = runner.retime(finalists, rounds)
    except WorkerError as err:
        return [Measurement.failed(str(err), fatal=True) for _ in finalists], [True] * len(finalists)
    if len(finalists) == 1 or not any(m.fatal for m in retimed):
        return retimed, [False] * len(finalists)
    # A launch took the worker down (a fault, a crash, a hang) and every finalist was answered
    # as failed, though only one of them did it: each alone again, so that the one that did
    # fails on its own and the others are judged (and can win; trial times cannot vouch for
    # a config that has just crashed its worker).
    retimed, unjudged = [], []
    for config in finalists:
        measured, lost = _recheck(runner, [config], rounds)  # alone: the first branch above
        retimed += measured
        unjudged += lost
    return retimed, unjudged


def _finalists_in_time(search: _Search, required: int) -> int | None:
    """How many finalists the re-timing takes (None: all of them), unless the run's
    --total-time is near its end. Then the fastest trial, the defaults and the stored winner
    (``required``) and as many more as fit in the time left, each reckoned at the median
    trial's wall time (a finalist's re-check on a second shape is another compile, as a trial
    is: an H100 took 18-25 s to re-check and re-time six finalists, thirty-ninth session)."""
    if search.deadline is None or not search.trial_s:
        return None
    each = statistics.median(search.trial_s)
    left = max(0.0, search.deadline - time.monotonic())
    if each <= 0 or not math.isfinite(left):  # --total-time inf: no limit
        return None
    return max(required, int(left // each))


def _finish(search: _Search, result: ProblemResult, defaults=(), incumbent=()) -> None:
    """Re-time the top few round-robin and choose the winner by the fixed rule.

    The bucket's stored winner (``incumbent``) is re-timed too unless it failed here, even if
    the search never reached it (a grid cut by the trial count, the time budget): the tuner
    stores its winner in its place, so the winner must have beaten it on this shape; inside
    the noise band it stays (after the defaults), so re-tunes do not churn the cache.
    The seeded defaults that passed are re-timed too, whatever their first time: a single
    measurement can be inflated (the GPU still busy with other work, clocks ramping at a
    session's start, host time: see adapter.LastVariant), and a winner should have beaten the
    default under the same re-timing, or tuning could leave a user slower than not tuning
    (seen on an H100: a default of 38.9 us lost its one trial to a 78 us config; the cause
    found later was host-bound timing of short kernels, fixed in the adapters). A challenger,
    the other way round, must have been fast in its trial too (choose_winner's trial_ms).
    """
    ok = sorted(((c, m) for c, m in result.measured if m.ok), key=lambda cm: (cm[1].median_ms, canonical(cm[0])))
    challengers, seen = [], set()
    for c, m in ok:
        if canonical(c) not in seen:
            seen.add(canonical(c))
            challengers.append(c)
        if len(challengers) == search.options.top_k:
            break
    passed = {canonical(c) for c, _ in ok}
    # (not when every trial failed: then _all_failed says why, as without a stored winner)
    unmeasured = {canonical(c) for c in incumbent} - set(search.memo) if ok else set()
    kept = {canonical(c) for c in [*defaults, *incumbent]} & (passed | unmeasured)
    seeded = []
    for c in [*defaults, *incumbent]:
        if canonical(c) in kept and canonical(c) not in seen:
            seen.add(canonical(c))
            seeded.append(dict(c))  # a plain dict, as the measured finalists are
    room = _finalists_in_time(search, 1 + len(kept))
    if room is not None:  # near the end of --total-time: the fastest, the seeded, what fits
        extra, trimmed = room - 1 - len(kept), []
        for i, c in enumerate(challengers):
            if i == 0 or canonical(c) in kept:
                trimmed.append(c)
            elif extra > 0:
                trimmed.append(c)
                extra -= 1
        challengers = trimmed
    finalists = challengers + seeded
    if not finalists:
        result.error = result.error or _all_failed(result.measured)
        return
    retimed, unjudged = _recheck(search.runner, finalists, search.options.retime_rounds)
    pairs = list(zip(finalists, retimed))
    if not any(m.ok for _, m in pairs):
        # The worker could not be set up to re-time (no finalist ran): fall back to the trial
        # times of the finalists never judged, never to one whose re-check failed on its own
        # (its output refused, its launch raised or took the worker down).
        pairs = [(c, search.memo[canonical(c)]) for c, lost in zip(finalists, unjudged)
                 if lost and canonical(c) in search.memo]
        if not pairs:
            # With why: a re-timing past --trial-timeout, a crash or a wrong result, as the
            # finalists' errors say (every re-check failing read as a wrong result before).
            n = len(retimed)
            result.error = result.error or (
                "no finalist passed the correctness gate again and its re-timing "
                f"({n} of {n} failed{_reason(retimed)})")
            return
    trial_ms = {key: m.median_ms for key, m in search.memo.items() if m.ok}
    result.winner, result.winner_ms = choose_winner(pairs, search.options.noise_band,
                                                    [*defaults, *incumbent], trial_ms)
    result.finalists = pairs
