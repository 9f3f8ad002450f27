"""Session 33: do the evict_last lines our l2_hint kernels leave behind shrink the L2 that a
user's next kernels see? An L2-resident workload (a sum over a 24 MB buffer, timed without any
flush, so it reads from L2) before and after our default kernels ran on several other inputs,
and after the context's reset of persisting lines."""
import statistics

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import _persisting_l2_reset

SMS = torch.cuda.get_device_properties(0).multi_processor_count
reset = _persisting_l2_reset()
print("device", torch.cuda.get_device_name(), "reset found", reset is not None)
buf = torch.randn(6 << 20, device="cuda")  # 24 MB fp32: fits in L2 (50 MB)


def resident_sum_us(reps=200):
    for _ in range(20):
        buf.sum()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        s.record(); buf.sum(); e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def ours_on_many(rows, cols, hint, n):
    prob = SoftmaxProblem(rows, cols, "float16")
    cfg = default_config("softmax", prob, sm_count=SMS).as_dict()
    cfg["l2_hint"] = hint
    mod = load_variant("softmax", OPS["softmax"].space.validate(cfg))
    for _ in range(n):
        x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
        mod.launch(x, torch.empty_like(x))
    torch.cuda.synchronize()


for rows, cols, n in ((16, 1048576, 8), (4096, 16384, 4), (128, 262144, 8)):
    for hint in (True, False):
        torch.cuda.synchronize(); reset()
        clean = resident_sum_us()
        ours_on_many(rows, cols, hint, n)
        after = resident_sum_us()
        torch.cuda.synchronize(); reset()
        again = resident_sum_us()
        print(f"{rows}x{cols} fp16 default, l2_hint={hint}, {n} inputs: resident 24 MB sum "
              f"{clean:6.2f} us clean, {after:6.2f} us after ours, {again:6.2f} us after the reset",
              flush=True)
