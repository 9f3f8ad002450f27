"""The tuner on a GPU: a kernel that faults the CUDA context does not end the sweep."""

from __future__ import annotations

import pytest

from flashtune.gen.softmax_space import SoftmaxProblem, fitting_configs
from flashtune.tuner.problems import TuneProblem
from flashtune.tuner.study import TuneOptions, tune_problem
from flashtune.tuner.timing import TimingOptions
from flashtune.tuner.worker import ProcessRunner

from tuner_planted import FaultingAdapter

pytestmark = pytest.mark.gpu


def test_faulting_kernel_does_not_stop_the_sweep():
    problem = TuneProblem("softmax", SoftmaxProblem(4096, 1024, "float16"))
    configs = [c for c in fitting_configs("softmax", problem.problem)
               if c["regime"] == "row" and c["rows_per_program"] == 1 and c["exp2"]]
    warps = [c["num_warps"] for c in configs]
    assert 4 in warps and len(warps) >= 3
    runner = ProcessRunner(FaultingAdapter(fault_warps=(4,)), TimingOptions(rep_ms=20),
                           trial_timeout_s=300)
    try:
        opts = TuneOptions(mode="grid", n_trials=len(configs), top_k=2, retime_rounds=2)
        result = tune_problem(problem, runner, device="cuda:0", options=opts, candidates=configs)
    finally:
        runner.close()
    by_warps = {c["num_warps"]: m for c, m in result.measured}
    assert sorted(by_warps) == sorted(warps)  # every config was measured, after the fault too
    assert by_warps[4].status == "failed" and by_warps[4].fatal
    assert runner.restarts >= 1
    assert sum(m.ok for m in by_warps.values()) == len(warps) - 1
    assert result.winner is not None and result.winner["num_warps"] != 4
