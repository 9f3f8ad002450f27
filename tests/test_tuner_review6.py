"""Review 6 of audit 5 (tuner): what a journal keeps of a batch cut short, seeds queued once
across re-runs, and grid trials that a later TPE search models (branched and attention spaces).

No kernels run: a runner answers from a cost function."""

from __future__ import annotations

import hashlib

import optuna
import pytest

from flashtune.gen.attention_space import AttentionProblem
from flashtune.gen.softmax_space import SoftmaxProblem
from flashtune.tuner.families import family
from flashtune.tuner.problems import TuneProblem
from flashtune.tuner.space import canonical
from flashtune.tuner.study import TuneOptions, candidate_list, tune_problem
from flashtune.tuner.worker import Measurement

SMALL = TuneProblem("softmax", SoftmaxProblem(8, 100, "float32"))
SEEDED = TuneProblem("softmax", SoftmaxProblem(2, 20000, "float32"))  # a default and 5 twins


def _cost(config) -> float:
    return 1 + int(hashlib.md5(canonical(config).encode()).hexdigest(), 16) % 1000 / 1000


class Table:
    """Answers from a hash of the config; every 5th (by hash) fails; Ctrl-C at measure ``stop``."""

    def __init__(self, stop: int | None = None, fail: bool = True):
        self.stop, self.fail, self.measured = stop, fail, []

    def setup(self, task):
        pass

    def measure(self, config):
        if self.stop is not None and len(self.measured) == self.stop:
            raise KeyboardInterrupt
        self.measured.append(canonical(config))
        t = _cost(config)
        if self.fail and round(t * 1000) % 5 == 0:
            return Measurement.failed("planted failure")
        return Measurement("ok", t, t, t)

    def retime(self, configs, rounds):
        return [Measurement("ok", _cost(c), _cost(c), _cost(c)) for c in configs]


def _some(tp, n: int, device: str = "cpu"):
    """n candidates spread over the problem's whole space (every regime), its seeds among them."""
    kept, _ = candidate_list(tp.op, tp.problem, device=device)
    fam = family(tp.op)
    seeds = [fam.default_config(tp.op, tp.problem)] + fam.seed_twins(tp.op, tp.problem)
    step = max(1, len(kept) // n)
    chosen = {canonical(c): c for c in kept[::step][:n] + [c for c in seeds if c in kept]}
    return list(chosen.values()), seeds


@pytest.mark.parametrize("mode", ["grid", "tpe"])
def test_an_interrupt_in_a_batch_keeps_the_batchs_earlier_measurements(tmp_path, mode):
    # Was: a batch's trials went to the journal after the whole batch, so Ctrl-C during its
    # second config lost the first, and the re-run measured it again (the interrupt summary
    # says measured configs are not measured again).
    journal = str(tmp_path / "j.journal")
    candidates, _ = _some(SMALL, 40)
    opts = TuneOptions(mode=mode, n_trials=6, batch=2, top_k=1, retime_rounds=1, storage=journal,
                       patience=None, time_budget_s=None)
    first = Table(stop=1)
    with pytest.raises(KeyboardInterrupt):
        tune_problem(SMALL, first, device="cpu", options=opts, candidates=candidates,
                     study_name="s")
    assert len(first.measured) == 1
    again = Table()
    result = tune_problem(SMALL, again, device="cpu", options=opts, candidates=candidates,
                          study_name="s")
    assert first.measured[0] not in again.measured
    assert len(result.measured) == 6 and len(again.measured) == 5


def test_seeds_left_queued_by_interrupted_runs_are_queued_once(tmp_path):
    journal = str(tmp_path / "j.journal")
    candidates, seeds = _some(SEEDED, 30)
    assert len(seeds) == 6
    opts = TuneOptions(n_trials=20, top_k=1, retime_rounds=1, storage=journal, patience=None,
                       time_budget_s=None)
    for _ in range(2):  # each run: Ctrl-C while the first seed it asks is measured
        with pytest.raises(KeyboardInterrupt):
            tune_problem(SEEDED, Table(stop=0), device="cpu", options=opts,
                         candidates=candidates, study_name="s")
    # run 1: six seeds queued, the first asked (left RUNNING); run 2: that one queued again
    # (it has no result), the five still WAITING not (was, before audit 5's check of the
    # queue: all six again, a duplicate queue that grew with every interrupted run)
    study = optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(journal)))
    assert len(study.trials) == 7
    runner = Table(fail=False)
    tune_problem(SEEDED, runner, device="cpu", options=opts, candidates=candidates,
                 study_name="s")
    assert set(runner.measured[:6]) == {canonical(c) for c in seeds}
    assert len(set(runner.measured)) == len(runner.measured)


@pytest.mark.parametrize("tp,device", [(SEEDED, "cpu"),
                                       (TuneProblem("attention_fwd", AttentionProblem(
                                           1, 2, 2, 256, 256, 64, True, "float16")), "cuda")])
def test_a_tpe_search_models_the_trials_of_a_grid_run_on_the_same_journal(tmp_path, tp, device):
    # Audit 5's test stopped the TPE run before it asked anything. Here TPE models the grid's
    # trials (completed and pruned, several regimes) and goes on: each parameter name must have
    # one distribution across the grid's trials and TPE's (Optuna < 5 raises otherwise;
    # Optuna 5 silently drops such a parameter from the model).
    journal = str(tmp_path / "g.journal")
    candidates, _ = _some(tp, 60, device)
    grid = Table()
    tune_problem(tp, grid, device=device, candidates=candidates, study_name="g",
                 options=TuneOptions(mode="grid", n_trials=25, top_k=1, retime_rounds=1,
                                     storage=journal, time_budget_s=None))
    tpe = Table()
    result = tune_problem(tp, tpe, device=device, candidates=candidates, study_name="g",
                          options=TuneOptions(n_trials=40, startup_trials=2, top_k=1,
                                              retime_rounds=1, storage=journal, patience=None,
                                              time_budget_s=None))
    assert len(grid.measured) == 25 and len(tpe.measured) == 15
    assert not set(grid.measured) & set(tpe.measured) and result.winner is not None
    study = optuna.load_study(study_name="g", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(journal)))
    states = {t.state for t in study.trials}
    assert {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED} <= states
    seen: dict[str, set] = {}
    for t in study.trials:
        for name, dist in t.distributions.items():
            seen.setdefault(name, set()).add(repr(dist))
    assert seen and all(len(d) == 1 for d in seen.values()), seen
