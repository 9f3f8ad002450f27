"""Session 37: the split regime's aligned walk (align) on rows of odd width, forward and
backward, against the same config without it (the walk before: element by element where the
width is not a multiple of a 16-byte vector) and, for fp32, the paired-loads default those
widths had before. Few-row shapes of 32 rows or more with odd widths (the online regime's
default there) also run the split with align. Every output is checked against float64.
Call 3: paired loads walk aligned too (fp32 default); the plain persistent kernel's aligned
walk (call 1's default for those rows) runs beside it. Env: DTYPES, SHAPES ("RxC,RxC"), OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant, softmax_space
from flashtune.gen.softmax_space import SoftmaxProblem, _paired_split, default_config
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
SHAPES = [(16, 1048576), (16, 1048575), (16, 1048572), (16, 1048568), (16, 1000001),
          (4, 1048573), (16, 50257), (1, 50257), (8, 151937), (32, 524287), (64, 100003),
          (128, 262143)]
if os.environ.get("SHAPES"):
    SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)


def variants(op, problem):
    new = dict(default_config(op, problem, sm_count=sm))
    out = [("default", new)]
    if new["align"] and new["regime"] == "split":
        old = dict(new, align=False)
        if problem.dtype == "float32" and new.get("programs_per_sm"):
            old.update(_paired_split(problem.n_cols, 4, sm))
        out.append(("no-align", old))
        if new.get("paired_loads"):
            # (call 3) the plain persistent kernel's aligned walk: call 1's default
            real = softmax_space._paired_split
            softmax_space._paired_split = lambda *a: {}
            try:
                out.append(("persistent-align", dict(default_config(op, problem, sm_count=sm))))
            finally:
                softmax_space._paired_split = real
    elif new["regime"] == "online" and op.endswith("softmax") and problem.n_cols % (16 // (4 if problem.dtype == "float32" else 2)):
        # the split default these rows would get with few rows, aligned
        few = dict(default_config(op, SoftmaxProblem(16, problem.n_cols, problem.dtype), sm_count=sm))
        out.append(("split-align", few))
    return out


for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for rows, cols in SHAPES:
        problem = SoftmaxProblem(rows, cols, dtype_name)
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.softmax(x, -1)
        dy = torch.randn_like(x)
        out = torch.empty_like(x)
        nbytes = x.numel() * x.element_size()
        yd, dyd = y.double(), dy.double()
        for op, args, ref, moved in (
                ("softmax", (x, out), torch.softmax(x.double(), -1), 2 * nbytes),
                ("softmax_backward", (y, dy, out), yd * (dyd - (dyd * yd).sum(-1, keepdim=True)),
                 3 * nbytes)):
            parts = []
            for label, cfg in variants(op, problem):
                try:
                    mod = load_variant(op, cfg)
                    out.fill_(float("nan"))
                    mod.launch(*args)
                    torch.cuda.synchronize()
                    err = (out.double() - ref).abs().max().item()
                    ms = min(bench_gpu(lambda: mod.launch(*args), 25, 100)[0] for _ in range(3))
                    parts.append(f"{label} {cfg['regime'][:5]}{'/pl' if cfg.get('paired_loads') else ''} "
                                 f"{ms * 1e3:7.1f} us {moved / ms / 1e6 / copy:5.1%} err {err:.0e}")
                except Exception as e:  # a failing variant is a finding, not the end of the run
                    parts.append(f"{label} FAILED {type(e).__name__}: {str(e)[:120]}")
            line = f"{dtype_name:9s} {rows:4d}x{cols:<8d} {op[:8]:8s} " + " | ".join(parts)
            print(line, flush=True)
            lines.append(line)
        del x, y, dy, out
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "split_align_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
