"""Session 38: strided views whose rows start off 16-byte boundaries (a slice of a wider
tensor, an odd row stride, the first column dropped). Runs on tree 5299a53 only: there the
defaults saw the view's grain (rows_problem, with_view_grain, since reverted in 53978d5) and
took the aligned walk; before and after that commit they go by width alone.
Per case: the packed tensor's default (the old pick for the view) and the view's default, both
run on the view, next to torch on the view and the new default on a packed tensor of the same
shape. Every output is checked against float64 first. Env: DTYPES, OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_ops import rows_problem
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, with_view_grain
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
# (rows, cols, row stride, offset, direction)
CASES = [(1024, 65536, 65537, 0, "fwd"), (4096, 50304, 50305, 0, "fwd"),
         (2048, 32768, 32769, 0, "fwd"), (2048, 16384, 16385, 0, "fwd"),
         (4096, 8192, 8193, 0, "fwd"), (4096, 4096, 4097, 1, "fwd"), (16, 1048576, 1048577, 0, "fwd"),
         (128, 262144, 262145, 0, "fwd"), (4096, 65536, 65537, 1, "fwd"),
         (200000, 64, 65, 0, "fwd"), (1024, 65536, 65537, 0, "bwd"),
         (16, 1048576, 1048577, 0, "bwd")]
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s, torch {torch.__version__}"]
print(lines[0], flush=True)


def view_of(rows, cols, stride, offset, dtype):
    storage = torch.randn(offset + rows * stride, device="cuda").to(dtype)
    return storage[offset:].as_strided((rows, cols), (stride, 1))


def timed(fn):
    return min(bench_gpu(fn, 25, 100)[0] for _ in range(3))


for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for rows, cols, stride, offset, direction in CASES:
        if rows * stride * 4 > 2**31:
            continue
        x = view_of(rows, cols, stride, offset, dtype)
        packed = x.contiguous()
        out = torch.empty(rows, cols, device="cuda", dtype=dtype)
        nbytes = x.numel() * x.element_size()
        if direction == "fwd":
            op, moved = "softmax", 2 * nbytes
            args, packed_args = (x, out), (packed, out)
            ref = torch.softmax(x.double(), -1)
            peer = lambda: torch.softmax(x, -1)  # noqa: E731
            problem = rows_problem(x, 1)
        else:
            op, moved = "softmax_backward", 3 * nbytes
            y = torch.softmax(packed.float(), -1).to(dtype)
            args, packed_args = (y, x, out), (y, packed, out)  # dy is the view
            yd, dyd = y.double(), x.double()
            ref = yd * (dyd - (dyd * yd).sum(-1, keepdim=True))
            peer = lambda: torch.ops.aten._softmax_backward_data(x, y, -1, dtype)  # noqa: E731
            problem = rows_problem(y, 1, x)
        old = default_config(op, type(problem)(rows, cols, dtype_name), sm_count=sm)
        new = default_config(op, problem, sm_count=sm)
        parts = [f"grain {problem.view_grain}"]
        tried = [("old", old, args), ("new", new, args), ("packed", new, packed_args)]
        if new["regime"] == "row" and cols >= 4096:
            # the row regime has no aligned walk: the online regime's, with chunks of the row
            alt = dict(default_config(op, with_view_grain(SoftmaxProblem(rows, 65536, dtype_name), 1),
                                      sm_count=sm))
            alt["block"] = min(alt["block"], cols)
            tried.append(("online-al", alt, args))
        for label, cfg, a in tried:
            try:
                mod = load_variant(op, cfg)
                out.fill_(float("nan"))
                mod.launch(*a)
                torch.cuda.synchronize()
                err = (out.double() - ref).abs().max().item()
                ms = timed(lambda: mod.launch(*a))
                parts.append(f"{label} {cfg['regime'][:5]}{'/al' if cfg['align'] else ''} "
                             f"{ms * 1e3:7.1f} us {moved / ms / 1e6 / copy:4.0%} err {err:.0e}")
            except Exception as e:  # a failing variant is a finding, not the end of the run
                parts.append(f"{label} FAILED {type(e).__name__}: {str(e)[:120]}")
        parts.append(f"torch {timed(peer) * 1e3:7.1f} us")
        line = (f"{dtype_name:9s} {rows:6d}x{cols:<8d} s{stride} o{offset} {direction} "
                + " | ".join(parts))
        print(line, flush=True)
        lines.append(line)
        x = packed = out = args = packed_args = None
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "view_grain_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
