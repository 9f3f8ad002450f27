"""Session 36, after the change (88bfbff): fp16/bf16 rows of 8 mod 16 columns take the aligned
walk. Times the new default next to the old one (the same config without `align`; the
backward's old default also had chunks of 16384 where the new one takes 8192), forward and
backward, each output checked against float64, and the default of the next multiple of 16.
Also few long rows (the split regime, unchanged) at 8 mod 16 against 0 mod 16.
Env: DTYPES, OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16").split(",")
WIDTHS = [50264, 50272, 32776, 32784, 40008, 40016, 65544, 65552, 100008, 100016]
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)


def timed(op, cfg, args, ref):
    mod = load_variant(op, cfg)
    mod.launch(*args)
    torch.cuda.synchronize()
    err = (args[-1].double() - ref).abs().max().item()
    ms = min(bench_gpu(lambda: mod.launch(*args), 25, 100)[0] for _ in range(2))
    return ms, err


for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for rows_wanted, cols in [(None, w) for w in WIDTHS] + [(16, 50264), (16, 50272),
                                                            (16, 1048568), (16, 1048576)]:
        rows = rows_wanted or max(1, (256 << 20) // (cols * 2))
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.softmax(x, -1)
        dy = torch.randn_like(x)
        out = torch.empty_like(x)
        nbytes = x.numel() * 2
        problem = SoftmaxProblem(rows, cols, dtype_name)
        for op in ("softmax", "softmax_backward"):
            yd = y.double()
            if op == "softmax":
                args, ref, moved = (x, out), torch.softmax(x.double(), -1), 2 * nbytes
            else:
                dyd = dy.double()
                args, ref, moved = (y, dy, out), yd * (dyd - (dyd * yd).sum(-1, keepdim=True)), 3 * nbytes
            new = dict(default_config(op, problem, sm_count=sm))
            cases = [("new", new)]
            if new.get("align"):
                old = dict(new, align=False)
                if op == "softmax_backward":
                    old["block"] = 16384  # the aligned rows' backward chunks
                cases.append(("old", dict(OPS[op].space.validate(old))))
            parts = []
            for name, cfg in cases:
                ms, err = timed(op, cfg, args, ref)
                parts.append(f"{name} {ms * 1e3:7.1f} us {moved / ms / 1e6 / copy:5.1%} err {err:.0e}")
            desc = f"{new['regime']} b={new['block']} w={new['num_warps']} align={new.get('align')}"
            line = f"{dtype_name:9s} {op:16s} {rows:6d}x{cols:<8d} {desc:36s} " + " | ".join(parts)
            print(line, flush=True)
            lines.append(line)
        del x, y, dy, out
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "odd_width_after.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
