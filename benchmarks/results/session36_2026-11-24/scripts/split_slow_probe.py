"""Session 36: call 8 timed 16 x 50272 fp16 and 16 x 50257-50272 bf16 (the fused split, one
launch with a row wait) at 39-49 us, where call 7 (before 006ca5e) had 9-10 us. Is it the
commit, or a slow mode of the one-launch wait? Each case: five separate do_bench medians (L2
flushed), the host time per call (200 back-to-back calls), and the GPU time of one call by
CUDA events after a synchronize. Run once with the tree's templates and once with the ones
before the commit (scripts/old_templates, copied over by the caller). Env: TAG.
"""

import os
import time

import torch

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

sm = torch.cuda.get_device_properties(0).multi_processor_count
for dtype_name in ("float16", "bfloat16"):
    dtype = getattr(torch, dtype_name)
    for cols in (50272, 50264, 50257, 1048568):
        x = torch.randn(16, cols, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        cfg = default_config("softmax", SoftmaxProblem(16, cols, dtype_name), sm_count=sm)
        mod = load_variant("softmax", cfg)
        mod.launch(x, y)
        torch.cuda.synchronize()
        ok = torch.allclose(y.float(), torch.softmax(x.float(), -1), atol=1e-3)
        meds = [bench_gpu(lambda: mod.launch(x, y), 25, 100)[0] * 1e3 for _ in range(5)]
        t0 = time.perf_counter()
        for _ in range(200):
            mod.launch(x, y)
        torch.cuda.synchronize()
        host = (time.perf_counter() - t0) / 200 * 1e6
        events = []
        for _ in range(5):
            torch.cuda.synchronize()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            mod.launch(x, y)
            b.record()
            b.synchronize()
            events.append(a.elapsed_time(b) * 1e3)
        print(f"{os.environ.get('TAG', '')} {dtype_name:9s} 16x{cols:<8d} fused={cfg['fused']} "
              f"splits={cfg['splits']} pps={cfg['programs_per_sm']} ok={ok} do_bench "
              + " ".join(f"{m:5.1f}" for m in meds) + f" | back-to-back {host:5.1f} us/call | "
              "single " + " ".join(f"{e:5.1f}" for e in events), flush=True)
