"""Narrow rows through the public API after the change (row tiles below 16 columns): forward
softmax and log_softmax, and the eager backward, against torch, each output checked against
float64; then the two outliers of narrow_tiles.py re-timed five times each.

GPU: python narrow_api.py (env OUT). Writes narrow_api.json.
"""
import itertools
import json
import os
import time

import torch
import triton
from triton.testing import do_bench

import flashtune
from flashtune.dispatch.plans import aten_backward
from flashtune.dispatch.runtime import RUNTIME
from flashtune.reference import check_accuracy, softmax_ref


def t(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=60, return_mode="median") * 1e3


def main():
    out = os.environ.get("OUT", ".")
    dev = torch.cuda.get_device_name()
    print(f"device {dev} torch {torch.__version__} triton {triton.__version__} "
          f"{time.strftime('%Y-%m-%d')}", flush=True)
    shapes = [(200000, c) for c in (1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16)] + [
        (1000000, 5), (1000000, 2), (65536, 8), (4096, 3), (3000, 5), (65536, 1)]
    rows = []
    bad = 0
    for (n, c), dtype in itertools.product(shapes, (torch.float16, torch.bfloat16, torch.float32)):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(n, c, device="cuda", dtype=dtype, generator=gen)
        rec = dict(shape=f"{n}x{c}", dtype=str(dtype)[6:])
        for log in (False, True):
            name = "log_softmax" if log else "softmax"
            ours = flashtune.log_softmax if log else flashtune.softmax
            theirs = torch.log_softmax if log else torch.softmax
            acc = check_accuracy(ours(x, -1), softmax_ref(x, -1, log=log), theirs(x, -1))
            if not acc.ok:
                bad += 1
                print(f"FAIL {name} {n}x{c} {dtype}: {acc}", flush=True)
            rec[name] = (t(lambda: theirs(x, -1)), t(lambda: ours(x, -1)))
        y = torch.softmax(x, -1)
        dy = torch.randn(n, c, device="cuda", dtype=dtype, generator=gen)
        tb = aten_backward(False)
        dx = RUNTIME.backward(y, dy, -1, False)
        ref = (y.double() * (dy.double() - (y.double() * dy.double()).sum(-1, keepdim=True)))
        err = (dx.double() - ref).abs().max().item()
        err_t = (tb(dy, y, -1, y.dtype).double() - ref).abs().max().item()
        if not err <= 2 * err_t + 1e-3:
            bad += 1
            print(f"FAIL backward {n}x{c} {dtype}: {err:.2e} torch {err_t:.2e}", flush=True)
        rec["softmax_backward"] = (t(lambda: tb(dy, y, -1, y.dtype)),
                                   t(lambda: RUNTIME.backward(y, dy, -1, False)))
        rows.append(rec)
        print(f"{rec['shape']:>12} {rec['dtype']:>9} " + "  ".join(
            f"{k[:7]} {rec[k][0]:6.2f}/{rec[k][1]:6.2f} ({rec[k][0] / rec[k][1]:.2f}x)"
            for k in ("softmax", "log_softmax", "softmax_backward")), flush=True)

    # The outliers of narrow_tiles.py (one reading each): re-timed through the same kernel.
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from narrow_tiles import run
    outliers = {}
    for (n, c, dtype, cfg) in ((65536, 8, torch.bfloat16, (8, 128, 2)),
                               (65536, 8, torch.float16, (8, 128, 2)),
                               (200000, 2, torch.bfloat16, (2, 128, 4)),
                               (200000, 2, torch.float16, (2, 128, 4))):
        x = torch.randn(n, c, device="cuda", dtype=dtype)
        times = [t(lambda: run(x, *cfg)) for _ in range(5)]
        outliers[f"{n}x{c} {str(dtype)[6:]} {cfg}"] = times
        print("outlier re-time", n, c, dtype, cfg, " ".join(f"{v:.2f}" for v in times), flush=True)
    with open(os.path.join(out, "narrow_api.json"), "w") as f:
        json.dump(dict(device=dev, torch=torch.__version__, triton=triton.__version__,
                       rows=rows, outliers=outliers), f, indent=1)
    below = [(r["shape"], r["dtype"], k, round(r[k][0] / r[k][1], 2)) for r in rows
             for k in ("softmax", "log_softmax", "softmax_backward") if r[k][0] / r[k][1] < 1.0]
    print("below torch:", below)
    print("failures:", bad)


if __name__ == "__main__":
    main()
