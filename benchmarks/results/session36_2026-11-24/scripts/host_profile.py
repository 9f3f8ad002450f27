"""Session 36: where flashtune.softmax's host time goes on few-row shapes (call 11 measured
42-56 us per call for the one-launch split, 31 us for the online regime, 22 us for the row
regime, back to back on the H200's host). cProfile of 500 calls per shape, top entries by
internal time, and the plain per-call time without the profiler. Env: OUT.
"""

import cProfile
import io
import os
import pstats
import time

import torch

import flashtune

out = []
for rows, cols in ((16, 50257), (32, 50257), (1, 32000)):
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    for _ in range(20):
        flashtune.softmax(x)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(500):
        flashtune.softmax(x)
    torch.cuda.synchronize()
    plain = (time.perf_counter() - t0) / 500 * 1e6
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        flashtune.softmax(x)
    torch.cuda.synchronize()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(22)
    text = f"=== {rows}x{cols}: {plain:.1f} us per call without the profiler\n" + buf.getvalue()
    print(text, flush=True)
    out.append(text)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "host_profile.txt"), "w") as f:
        f.write("\n".join(out))
