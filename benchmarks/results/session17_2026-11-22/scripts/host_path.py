"""Where flashtune.softmax's host time goes on a cache hit (4x128 fp16): each piece of the
public path timed alone, best of 5 rounds of 20000 calls, torch.cuda.synchronize() after."""
import time

import torch

import flashtune
import flashtune.ops as ops
from flashtune.dispatch.runtime import RUNTIME


def per_call(fn, n=20000):
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
    return best


x = torch.randn(4, 128, device="cuda", dtype=torch.float16)
flashtune.softmax(x)
plan = ops._hot_plan(ops._SOFTMAX_PLANS, x, -1, None)
y = torch.empty_like(x)
rows = [
    ("torch.softmax", lambda: torch.softmax(x, -1)),
    ("flashtune.softmax", lambda: flashtune.softmax(x)),
    ("ops._hot_plan (lookup only)", lambda: ops._hot_plan(ops._SOFTMAX_PLANS, x, -1, None)),
    ("plan(x)", lambda: plan(x)),
    ("torch.empty_like", lambda: torch.empty_like(x)),
    ("RUNTIME.forward", lambda: RUNTIME.forward(x, 1, False)),
]
for name, fn in rows:
    print(f"{name:32s} {per_call(fn):7.2f} us", flush=True)
import cProfile, pstats  # noqa: E401,E402
prof = cProfile.Profile()
prof.enable()
for _ in range(20000):
    flashtune.softmax(x)
torch.cuda.synchronize()
prof.disable()
pstats.Stats(prof).sort_stats("tottime").print_stats(12)
