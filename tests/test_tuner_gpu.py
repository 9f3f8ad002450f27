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


@pytest.mark.parametrize("through", ["runtime", "driver"])
def test_a_config_timed_after_an_l2_hint_config_is_not_sped_up(through, monkeypatch):
    """A split config with l2_hint and max_pass left x's lines in L2 through do_bench's zero_
    flushes: the default of 4096 x 1000 fp16 timed right after one launch of it read 7.7-8.7
    us against 9.7-10.6 (H100, thirty-third session). bench_gpu's scrub_l2 removes them,
    through the CUDA runtime's reset or, where no shared runtime is found, the driver's."""
    import statistics

    import torch

    from flashtune.gen import load_variant
    from flashtune.gen.softmax_space import OPS, default_config
    from flashtune.tuner import timing
    from flashtune.tuner.timing import bench_gpu

    reset = {"runtime": timing._runtime_l2_reset, "driver": timing._driver_l2_reset}[through]()
    assert reset is not None, f"no {through} reset found"
    monkeypatch.setattr(timing, "_persisting_l2_reset", lambda: reset)

    space = OPS["softmax"].space
    problem = SoftmaxProblem(4096, 1000, "float16")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    plain = default_config("softmax", problem, sm_count=sms).as_dict()
    leaky = dict(plain, regime="split", block=1024, splits=2, num_warps=4, num_stages=3,
                 max_pass=True, l2_hint=True, rows_per_program=1)
    plain_mod, leaky_mod = (load_variant("softmax", space.validate(c)) for c in (plain, leaky))
    x = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    # Compile the leaky config on other tensors: nothing has loaded x with evict_last before
    # the clean timings.
    other = torch.randn_like(x)
    leaky_mod.launch(other, torch.empty_like(other))
    plain_mod.launch(x, y)
    torch.cuda.synchronize()
    clean = [bench_gpu(lambda: plain_mod.launch(x, y), 10, 30)[0] for _ in range(3)]
    after = []
    for _ in range(3):
        leaky_mod.launch(x, y)
        after.append(bench_gpu(lambda: plain_mod.launch(x, y), 10, 30)[0])
    assert statistics.median(after) > 0.93 * statistics.median(clean), (clean, after)
