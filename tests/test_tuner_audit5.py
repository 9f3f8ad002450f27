"""Audit 5 (tuner): re-runs after an interrupt, small time budgets, set-up failures in this
process, grid mode with a journal."""

from __future__ import annotations

import pytest
import torch

from flashtune.cache import TuneDB
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, fitting_configs
from flashtune.tuner.adapter import SoftmaxAdapter
from flashtune.tuner.problems import TuneProblem
from flashtune.tuner.session import SessionOptions, run_session
from flashtune.tuner.space import canonical
from flashtune.tuner.study import TuneOptions, tune_problem
from flashtune.tuner.timing import TimingOptions
from flashtune.tuner.worker import LocalRunner

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU interpreter tests")

PROBLEM = TuneProblem("softmax", SoftmaxProblem(8, 100, "float32"))
FAST = TimingOptions(cpu_reps=1)


def candidates():
    """The problem's row-regime configs (its default among them)."""
    return [c for c in fitting_configs("softmax", PROBLEM.problem) if c["regime"] == "row"]


class Counting(LocalRunner):
    def __init__(self, *args, interrupt: bool = False):
        super().__init__(*args)
        self.interrupt, self.measured = interrupt, []

    def measure(self, config):
        if self.interrupt:
            raise KeyboardInterrupt  # Ctrl-C while the trial runs
        self.measured.append(dict(config))
        return super().measure(config)


def test_rerun_after_an_interrupt_during_the_default_measures_the_default(tmp_path):
    # The interrupted run leaves the default's trial RUNNING in the journal; enqueue_trial's
    # skip_if_exists counted it as present, so the re-run never measured the default.
    journal = str(tmp_path / "j.journal")
    opts = TuneOptions(n_trials=3, top_k=2, retime_rounds=1, storage=journal, patience=None)
    with pytest.raises(KeyboardInterrupt):
        tune_problem(PROBLEM, Counting(None, FAST, interrupt=True), device="cpu", options=opts,
                     candidates=candidates(), study_name="s")
    runner = Counting(None, FAST)
    result = tune_problem(PROBLEM, runner, device="cpu", options=opts, candidates=candidates(),
                          study_name="s")
    default = canonical(default_config("softmax", PROBLEM.problem))
    assert canonical(runner.measured[0]) == default
    assert len(runner.measured) == 3 and len({canonical(c) for c in runner.measured}) == 3


def test_a_rerun_does_not_queue_a_seed_twice(tmp_path):
    journal = str(tmp_path / "j.journal")
    opts = TuneOptions(n_trials=2, top_k=1, retime_rounds=1, storage=journal, patience=None)
    tune_problem(PROBLEM, Counting(None, FAST), device="cpu", options=opts,
                 candidates=candidates(), study_name="s")
    more = TuneOptions(n_trials=4, top_k=1, retime_rounds=1, storage=journal, patience=None)
    runner = Counting(None, FAST)
    result = tune_problem(PROBLEM, runner, device="cpu", options=more, candidates=candidates(),
                          study_name="s")
    assert len(result.measured) == 4 and len(runner.measured) == 2
    assert len({canonical(c) for c, _ in result.measured}) == 4


def test_a_time_budget_spent_before_the_first_trial_still_measures_one_config():
    # Was: stopped before measuring anything, then "no candidate passed (every measured config
    # failed)" though nothing was measured, and no winner.
    opts = TuneOptions(n_trials=5, top_k=1, retime_rounds=1, time_budget_s=1e-9, patience=None)
    result = tune_problem(PROBLEM, LocalRunner(None, FAST), device="cpu", options=opts,
                          candidates=candidates(), study_name="s")
    assert len(result.measured) == 1 and result.stopped_by == "time budget"
    assert result.winner is not None and result.error is None


class NoHalfInputs(SoftmaxAdapter):
    def make_case(self, op, problem, device, seed):
        if problem.dtype == "float16":
            raise RuntimeError("planted: cannot allocate the inputs")
        return super().make_case(op, problem, device, seed)


def test_a_problem_that_cannot_be_set_up_in_this_process_is_reported_and_the_rest_go_on(tmp_path):
    # --no-isolate: the set-up error escaped run_session (a traceback, the later problems lost);
    # the worker process turns it into a WorkerError that the session reports.
    db = TuneDB(f"sqlite:///{tmp_path / 'n.sqlite'}")
    problems = [TuneProblem("softmax", SoftmaxProblem(8, 100, "float16")), PROBLEM]
    opts = SessionOptions(tune=TuneOptions(n_trials=2, top_k=1, retime_rounds=1), timing=FAST,
                          isolate=False, progress=False)
    try:
        result = run_session(problems, db, opts, device="cpu",
                             runner=LocalRunner(NoHalfInputs(), FAST))
        assert [p.winner is not None for p in result.problems] == [False, True]
        assert "planted: cannot allocate" in result.problems[0].error
        assert [w.key.dtype for w in db.winners()] == ["float32"]
    finally:
        db.close()


def test_grid_mode_keeps_its_measurements_in_the_journal_and_resumes(tmp_path):
    # Was: grid mode ignored --journal (no file written), and the interrupt summary promised
    # that a re-run would not measure again what it had.
    journal = tmp_path / "g.journal"
    opts = TuneOptions(mode="grid", n_trials=3, top_k=1, retime_rounds=1, storage=str(journal))
    first = Counting(None, FAST)
    tune_problem(PROBLEM, first, device="cpu", options=opts, candidates=candidates(),
                 study_name="g")
    assert journal.exists() and len(first.measured) == 3
    more = TuneOptions(mode="grid", n_trials=6, top_k=1, retime_rounds=1, storage=str(journal))
    second = Counting(None, FAST)
    result = tune_problem(PROBLEM, second, device="cpu", options=more, candidates=candidates(),
                          study_name="g")
    assert len(second.measured) == 3 and len(result.measured) == 6
    assert not {canonical(c) for c in first.measured} & {canonical(c) for c in second.measured}
    assert result.winner is not None and result.stopped_by == "exhausted"
    # a TPE run of the same study reads the grid's trials (same distributions)
    tpe = TuneOptions(n_trials=6, top_k=1, retime_rounds=1, storage=str(journal), patience=None)
    third = Counting(None, FAST)
    again = tune_problem(PROBLEM, third, device="cpu", options=tpe, candidates=candidates(),
                         study_name="g")
    assert third.measured == [] and again.winner is not None


class LostAfter(LocalRunner):
    """A worker that cannot set the problem up again after a restart (out of memory while
    the killed worker's memory is still held): measure and retime raise WorkerError, as
    ProcessRunner's re-setup does, after ``good`` trials."""

    def __init__(self, *args, good: int, retime_lost: bool = True):
        super().__init__(*args)
        self.good, self.retime_lost = good, retime_lost

    def measure(self, config):
        from flashtune.tuner.worker import WorkerError

        if self.good == 0:
            raise WorkerError("worker could not set up softmax: planted out of memory")
        self.good -= 1
        return super().measure(config)

    def retime(self, configs, rounds):
        from flashtune.tuner.worker import WorkerError

        if self.retime_lost:
            raise WorkerError("worker could not set up softmax: planted out of memory")
        return super().retime(configs, rounds)


@pytest.mark.parametrize("mode", ["tpe", "grid"])
@pytest.mark.parametrize("retime_lost", [True, False])
def test_a_worker_lost_mid_search_keeps_the_configs_it_measured(tmp_path, mode, retime_lost):
    # Was: the WorkerError of a failed re-setup after a worker restart ended the problem with
    # "worker could not set up ...", no winner stored, though configs had passed and been timed.
    db = TuneDB(f"sqlite:///{tmp_path / 'w.sqlite'}")
    opts = SessionOptions(tune=TuneOptions(mode=mode, n_trials=5, top_k=2, retime_rounds=1),
                          timing=FAST, isolate=False, progress=False)
    try:
        result = run_session([PROBLEM], db, opts, device="cpu",
                             runner=LostAfter(None, FAST, good=2, retime_lost=retime_lost))
        (p,) = result.problems
        assert len(p.measured) == 2 and p.winner is not None, p.error
        assert "planted out of memory" in p.stopped_by
        assert [w.trials for w in db.winners()] == [2]
    finally:
        db.close()
