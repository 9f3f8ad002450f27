"""Session 34: the default of 4096 x 1000 fp16 timed clean and right after one launch of an
l2_hint split config, with scrub_l2 going through no reset, the CUDA runtime's, or the driver's
(cuCtxResetPersistingL2Cache, the new fallback). Medians of 3 bench_gpu timings each (us); argv[1]: the modes' order, comma-separated."""
import statistics
import sys

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner import timing

space = OPS["softmax"].space
problem = SoftmaxProblem(4096, 1000, "float16")
sms = torch.cuda.get_device_properties(0).multi_processor_count
plain = default_config("softmax", problem, sm_count=sms).as_dict()
leaky = dict(plain, regime="split", block=1024, splits=2, num_warps=4, num_stages=3,
             max_pass=True, l2_hint=True, rows_per_program=1)
plain_mod, leaky_mod = (load_variant("softmax", space.validate(c)) for c in (plain, leaky))
x = torch.randn(4096, 1000, device="cuda", dtype=torch.float16)
y = torch.empty_like(x)
other = torch.randn_like(x)
leaky_mod.launch(other, torch.empty_like(other))
plain_mod.launch(x, y)
torch.cuda.synchronize()

resets = {"none": lambda: None, "runtime": timing._runtime_l2_reset(), "driver": timing._driver_l2_reset()}
print("found:", {k: v is not None for k, v in resets.items()})
print(f"{'reset':>8} {'clean us':>9} {'after us':>9} {'ratio':>6}")
order = sys.argv[1].split(",") if len(sys.argv) > 1 else list(resets)
for name in order:
    reset = resets[name]
    timing._persisting_l2_reset = lambda reset=reset: reset
    # Start each mode clean: the runtime's reset clears what the previous mode left.
    timing._runtime_l2_reset()()
    clean = [timing.bench_gpu(lambda: plain_mod.launch(x, y), 10, 30)[0] * 1e3 for _ in range(3)]
    after = []
    for _ in range(3):
        leaky_mod.launch(x, y)
        after.append(timing.bench_gpu(lambda: plain_mod.launch(x, y), 10, 30)[0] * 1e3)
    c, a = statistics.median(clean), statistics.median(after)
    print(f"{name:>8} {c:9.2f} {a:9.2f} {a / c:6.3f}")
