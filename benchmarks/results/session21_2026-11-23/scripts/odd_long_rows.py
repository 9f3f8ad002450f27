"""Odd long rows on a GPU, through the public API with default configs (empty cache): the
persistent and fused split kernels (GPU only: the interpreter cannot show warp behaviour) on
widths that are not chunk multiples, few rows, strided rows, forward (softmax, log_softmax)
and backward, each against float64; then the same forwards with every wait forced to give up
(row_sync.MAX_POLLS = 0), which must match the normal launch bit for bit.

Accuracy: max |err| against float64 at most 1.1 x torch eager's in the same dtype plus a slack
(softmax 1e-5, log_softmax 1e-3). Prints one line per case and a summary; exit 1 on a failure.
"""
import itertools
import os
import sys

import torch

import flashtune
from flashtune.gen import row_sync

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "odd_long_rows.log"), "w")
SHAPES = [(1, 1048577), (3, 1000003), (16, 1048575), (17, 524289), (5, 262143), (128, 262145),
          (2, 3000001), (64, 300007), (100, 150000), (1, 4194311), (8, 2097152), (33, 131073)]
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
failures = []


def say(text):
    print(text, flush=True)
    log.write(text + "\n")


def check(name, ours, ref, torch_out, slack):
    err = (ours.double() - ref).abs().nan_to_num(0).max().item()
    terr = (torch_out.double() - ref).abs().nan_to_num(0).max().item()
    nan_ok = torch.equal(ours.isnan(), torch_out.isnan())
    ok = err <= 1.1 * terr + slack and nan_ok
    if not ok:
        failures.append(name)
    return f"{'ok ' if ok else 'BAD'} err {err:.2e} (torch {terr:.2e})"


say(f"device {torch.cuda.get_device_name()} torch {torch.__version__}")
for (rows, cols), dtype, strided in itertools.product(SHAPES, DTYPES, (False, True)):
    if strided and rows * cols > 2**24:
        continue
    torch.manual_seed(rows * 7 + cols)
    base = torch.randn(rows, cols + (37 if strided else 0), device="cuda") * 3
    x = base[:, :cols].to(dtype)
    if rows > 2:
        x[1, ::997] = float("-inf")  # -inf entries in one row
    name = f"{rows}x{cols} {str(dtype)[6:]}{' strided' if strided else ''}"
    parts = []
    for fn, tfn, slack in ((flashtune.softmax, torch.softmax, 1e-5),
                           (flashtune.log_softmax, torch.log_softmax, 1e-3)):
        ref = tfn(x.double(), -1)
        y = fn(x, -1)
        parts.append(f"{fn.__name__} " + check(f"{name} {fn.__name__}", y, ref, tfn(x, -1), slack))
        row_sync.MAX_POLLS = 0
        try:
            forced = fn(x, -1)
        finally:
            row_sync.MAX_POLLS = 1 << 16
        same = torch.equal(forced.nan_to_num(7.0), y.nan_to_num(7.0))
        if not same:
            failures.append(f"{name} {fn.__name__} forced give-up")
        parts.append("forced " + ("same" if same else "DIFFERS"))
    if rows * cols <= 2**22:
        xg = x.detach().clone().requires_grad_(True)
        xr = x.detach().double().requires_grad_(True)
        dy = torch.randn_like(x)
        flashtune.softmax(xg, -1).backward(dy)
        torch.softmax(xr, -1).backward(dy.double())
        xt = x.detach().clone().requires_grad_(True)
        torch.softmax(xt, -1).backward(dy)
        parts.append("backward " + check(f"{name} backward", xg.grad, xr.grad, xt.grad, 1e-5))
    say(f"{name}: " + "; ".join(parts))
say(f"\n{len(failures)} failure(s)" + (": " + ", ".join(failures) if failures else ""))
sys.exit(1 if failures else 0)
