"""Session 36: few rows of a vocabulary (LLM decoding: 1-64 rows x 32000-152064 columns), where
the defaults take the split regime (fewer than 32 rows, or any row count below the SMs for
widths of 16). Per case, fp16:
  host   us per call of flashtune.softmax / torch.softmax, 300 calls back to back
  graph  us per call on the GPU, 20 calls captured in a CUDA graph and replayed (no host
         cost, as a decode loop under CUDA graphs runs them; L2 warm)
for the default (through flashtune.softmax) and for the online regime (one program per row,
the aligned walk where rows need it, per-vector statistics) through its variant's launch().
Env: OUT.
"""

import os
import time

import torch

import flashtune
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import FORWARD_SPACE, SoftmaxProblem, default_config

SHAPES = [(1, 32000), (1, 50257), (1, 152064), (4, 50257), (8, 50257), (16, 50257),
          (16, 50272), (32, 50257), (16, 128256), (64, 128256), (16, 151936)]
sm = torch.cuda.get_device_properties(0).multi_processor_count


def host_us(fn, n=300):
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def graph_us(fn, n=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) * 1e3 / n)
    return best


lines = [torch.cuda.get_device_name()]
print(lines[0], flush=True)
for rows, cols in SHAPES:
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    problem = SoftmaxProblem(rows, cols, "float16")
    cfg = default_config("softmax", problem, sm_count=sm)
    online = dict(FORWARD_SPACE.validate(dict(
        cfg, regime="online", splits=1, fused=False, programs_per_sm=0, paired_loads=False,
        block=16384 if cols >= 65536 else 8192, num_warps=32 if cols >= 65536 else 16,
        num_stages=1, vector_stats=True, lane_stats=False, l2_hint=True,
        align=cols % 16 != 0)))
    mod = load_variant("softmax", online)
    mod.launch(x, y)
    torch.cuda.synchronize()
    ok = torch.allclose(y.float(), torch.softmax(x.float(), -1), atol=1e-4)
    ref_ok = torch.allclose(flashtune.softmax(x).float(), torch.softmax(x.float(), -1), atol=1e-4)
    h_ft = host_us(lambda: flashtune.softmax(x))
    h_t = host_us(lambda: torch.softmax(x, -1))
    g_ft = graph_us(lambda: flashtune.softmax(x))
    g_t = graph_us(lambda: torch.softmax(x, -1))
    g_on = graph_us(lambda: mod.launch(x, y))
    line = (f"{rows:3d}x{cols:<7d} default {cfg['regime']:6s} s={cfg['splits']:<3d} "
            f"fused={cfg['fused']!s:5s} | host us/call flashtune {h_ft:6.1f} torch {h_t:5.1f} | "
            f"graph us/call default {g_ft:6.1f} online {g_on:6.1f} torch {g_t:6.1f} | ok {ok} {ref_ok}")
    print(line, flush=True)
    lines.append(line)
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "decode_rows_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
