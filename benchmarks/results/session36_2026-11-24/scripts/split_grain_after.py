"""Session 36, after 006ca5e (the split kernels take row lengths and strides in grains): the
default config of few long rows, forward and backward, each output checked against float64.
Widths of 16 (unchanged by the commit: grain 8 or 4 there, as 16 before) next to widths of
8 mod 16, 4 mod 8 and odd ones. Compare with call 7 (`h200/call7_after/after.log`, before).
Env: DTYPES, OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
SHAPES = [(16, 1048576), (16, 1048568), (16, 1048572), (16, 1048575), (128, 262144),
          (128, 262136), (16, 50272), (16, 50264), (16, 50257)]
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)
for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for rows, cols in SHAPES:
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.softmax(x, -1)
        dy = torch.randn_like(x)
        out = torch.empty_like(x)
        nbytes = x.numel() * x.element_size()
        yd, dyd = y.double(), dy.double()
        parts = []
        for op, args, ref, moved in (
                ("softmax", (x, out), torch.softmax(x.double(), -1), 2 * nbytes),
                ("softmax_backward", (y, dy, out), yd * (dyd - (dyd * yd).sum(-1, keepdim=True)),
                 3 * nbytes)):
            cfg = default_config(op, SoftmaxProblem(rows, cols, dtype_name), sm_count=sm)
            mod = load_variant(op, cfg)
            mod.launch(*args)
            torch.cuda.synchronize()
            err = (out.double() - ref).abs().max().item()
            ms = min(bench_gpu(lambda: mod.launch(*args), 25, 100)[0] for _ in range(3))
            parts.append(f"{op[:8]} {cfg['regime']:6s} {ms * 1e3:7.1f} us "
                         f"{moved / ms / 1e6 / copy:5.1%} err {err:.0e}")
        line = f"{dtype_name:9s} {rows:4d}x{cols:<8d} " + " | ".join(parts)
        print(line, flush=True)
        lines.append(line)
        del x, y, dy, out
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "split_grain_after.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
