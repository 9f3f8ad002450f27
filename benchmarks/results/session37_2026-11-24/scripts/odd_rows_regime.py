"""Session 37, call 2. (a) Forward rows of odd width, 32 rows or more: the online regime's
aligned walk (the default there, _online_beats_split_on_odd_rows) against the split default
those rows would get otherwise, now that the split walks aligned too. (b) Few rows of a
vocabulary: GPU time under a CUDA graph (no host cost) of the split with and without align,
forward and backward. Every output checked against float64. Env: OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen import softmax_space
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)


def emit(line):
    print(line, flush=True)
    lines.append(line)


def split_config(op, problem):
    real = softmax_space._online_beats_split_on_odd_rows
    softmax_space._online_beats_split_on_odd_rows = lambda *a: False
    try:
        return default_config(op, problem, sm_count=sm)
    finally:
        softmax_space._online_beats_split_on_odd_rows = real


emit("(a) online (default) against split, aligned, forward softmax, us (% of copy)")
for dtype_name in ("float16", "float32"):
    dtype = getattr(torch, dtype_name)
    for rows, cols in ((32, 65537), (100, 65537), (33, 131073), (64, 131071), (120, 131071),
                       (32, 262143), (64, 262143), (120, 262145), (64, 100003), (48, 333333),
                       (96, 393215)):
        problem = SoftmaxProblem(rows, cols, dtype_name)
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        out = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        parts = []
        for label, cfg in (("default", default_config("softmax", problem, sm_count=sm)),
                           ("split", split_config("softmax", problem))):
            mod = load_variant("softmax", cfg)
            out.fill_(float("nan"))
            mod.launch(x, out)
            torch.cuda.synchronize()
            err = (out.double() - ref).abs().max().item()
            ms = min(bench_gpu(lambda: mod.launch(x, out), 25, 100)[0] for _ in range(3))
            parts.append(f"{label} {cfg['regime'][:6]}{'+al' if cfg['align'] else ''} "
                         f"{ms * 1e3:7.1f} ({2 * x.numel() * x.element_size() / ms / 1e6 / copy:5.1%}) err {err:.0e}")
        emit(f"{dtype_name:8s} {rows:4d}x{cols:<7d} " + " | ".join(parts))
        del x, out, ref
        torch.cuda.empty_cache()


def graph_us(fn, n=20):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(5):
        start.record()
        for _ in range(10):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) * 1e3 / (10 * n))
    return best


emit("(b) few rows: GPU us per call under a CUDA graph, split with align (default) / without")
for dtype_name in ("float16", "float32"):
    dtype = getattr(torch, dtype_name)
    for rows, cols in ((1, 50257), (16, 50257), (8, 151937), (64, 32001), (4, 128257)):
        problem = SoftmaxProblem(rows, cols, dtype_name)
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.softmax(x, -1)
        dy = torch.randn_like(x)
        out = torch.empty_like(x)
        yd, dyd = y.double(), dy.double()
        parts = []
        for op, args, ref, peer in (
                ("softmax", (x, out), torch.softmax(x.double(), -1), lambda: torch.softmax(x, -1)),
                ("softmax_backward", (y, dy, out), yd * (dyd - (dyd * yd).sum(-1, keepdim=True)),
                 lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, y.dtype))):
            cfg = dict(default_config(op, problem, sm_count=sm))
            times = []
            for c in (cfg, dict(cfg, align=False)):
                mod = load_variant(op, c)
                out.fill_(float("nan"))
                mod.launch(*args)
                torch.cuda.synchronize()
                err = (out.double() - ref).abs().max().item()
                times.append(f"{graph_us(lambda: mod.launch(*args)):5.1f}{'' if err < 1e-3 else ' BAD'}")
            parts.append(f"{op[:8]} {cfg['regime'][:5]}{'+al' if cfg['align'] else ''} "
                         f"{' / '.join(times)} torch {graph_us(peer):5.1f}")
        emit(f"{dtype_name:8s} {rows:4d}x{cols:<7d} " + " | ".join(parts))
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "odd_rows_regime.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
