"""Why log_softmax trails softmax on narrow odd rows with the new tiles (narrow_api.py: 1000000 x 5
fp16 softmax 21.0 us, log_softmax 29.4): the product's own kernels (the rendered variant's
launch() into a preallocated output) over row tiles of 8 and 16 columns, rows per program and
warps, for both ops. (The first run called softmax_forward with an explicit config: its host
path validates and looks the variant up every call, and those timings were host-bound,
25-140 us. This one launches as the dispatcher's fast path does.)

GPU: python narrow_log.py (env OUT). Writes narrow_log.json.
"""
import itertools
import json
import os
import time

import torch
import triton
from triton.testing import do_bench

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS


def t(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=50, return_mode="median") * 1e3


def main():
    out = os.environ.get("OUT", ".")
    print(f"device {torch.cuda.get_device_name()} triton {triton.__version__} "
          f"{time.strftime('%Y-%m-%d')}", flush=True)
    space = OPS["softmax"].space
    configs = [(8, r, w) for r in (32, 64, 128, 256) for w in (1, 2, 4)] + [(16, 64, 2), (16, 128, 2)]
    res = []
    for (n, c), dtype in itertools.product(((200000, 5), (200000, 7), (1000000, 5), (200000, 3),
                                            (200000, 6)),
                                           (torch.float16, torch.bfloat16, torch.float32)):
        x = torch.randn(n, c, device="cuda", dtype=dtype)
        for log in (False, True):
            ref = (torch.log_softmax if log else torch.softmax)
            t_torch = t(lambda: ref(x, -1))
            times = {}
            for block, rows, warps in configs:
                if c > block:
                    continue
                cfg = space.complete(dict(regime="row", block=block, rows_per_program=rows,
                                          num_warps=warps, num_stages=1, lane_stats=False,
                                          l2_hint=False))
                launch = load_variant("log_softmax" if log else "softmax", cfg).launch
                y = torch.empty_like(x)
                launch(x, y)
                torch.testing.assert_close(y.float(), ref(x.float(), -1), rtol=2e-2, atol=2e-2)
                times[(block, rows, warps)] = t(lambda: launch(x, y))
            best = min(times, key=times.get)
            res.append(dict(shape=f"{n}x{c}", dtype=str(dtype)[6:], log=log, torch=t_torch,
                            times={str(k): v for k, v in times.items()}))
            print(f"{n}x{c} {str(dtype)[6:]:>8} {'log' if log else 'sm '} torch {t_torch:6.2f} "
                  f"best {times[best]:6.2f} {best} | (8,128,2) {times[(8, 128, 2)]:6.2f} | "
                  + " ".join(f"{k}:{v:.1f}" for k, v in times.items()), flush=True)
    with open(os.path.join(out, "narrow_log.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
