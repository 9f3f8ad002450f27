"""Session 33 (the copy scrub of commit 53e4e75, replaced by the reset): which scrub_l2 size clears the lines a leaky l2_hint config leaves (the default
of 4096x1000 fp16 timed by bench_gpu right after one launch of the leaky split config), and
the new GPU test with scrub_l2 off (it must fail then)."""
import statistics
import sys

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner import timing

space = OPS["softmax"].space
problem = SoftmaxProblem(4096, 1000, "float16")
sms = torch.cuda.get_device_properties(0).multi_processor_count
print("L2", torch.cuda.get_device_properties(0).L2_cache_size >> 20, "MiB")
plain = default_config("softmax", problem, sm_count=sms).as_dict()
leaky = dict(plain, regime="split", block=1024, splits=2, num_warps=4, num_stages=3,
             max_pass=True, l2_hint=True, rows_per_program=1)
x = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
mp, ml = (load_variant("softmax", space.validate(c)) for c in (plain, leaky))
run_plain, run_leaky = (lambda: mp.launch(x, y)), (lambda: ml.launch(x, y))
run_plain(); run_leaky(); torch.cuda.synchronize()
real_scrub = timing.scrub_l2
for times in (0, 1, 2, 4, 8):
    timing.scrub_l2 = (lambda t=times: real_scrub(t) if t else None)
    clean, after = [], []
    for _ in range(3):
        real_scrub(8)
        clean.append(timing.bench_gpu(run_plain, 10, 30)[0] * 1e3)
        run_leaky()
        after.append(timing.bench_gpu(run_plain, 10, 30)[0] * 1e3)
    print(f"scrub {times} x L2: clean {statistics.median(clean):6.2f} us, after the leaky config "
          f"{statistics.median(after):6.2f} us", flush=True)
timing.scrub_l2 = lambda: None
sys.path.insert(0, "tests")
import test_tuner_gpu  # noqa: E402

try:
    test_tuner_gpu.test_a_config_timed_after_an_l2_hint_config_is_not_sped_up()
    print("GPU test with scrub_l2 off: PASSED (cannot tell)")
except AssertionError as err:
    print("GPU test with scrub_l2 off: FAILED as it should:", str(err)[:200])
