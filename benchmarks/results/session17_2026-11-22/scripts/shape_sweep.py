"""Shapes no issue names: flashtune's default configs (empty cache) against torch, forward
through the public op and backward through the eager backward that autograd calls.

    python shape_sweep.py fwd|bwd [max_seconds]

do_bench medians (L2 flushed by do_bench's zero_), 10 ms warm-up and 40 ms of repetitions:
short, so the sweep covers many shapes in one device call; a ratio below 1.0 is re-timed
with 25/200 ms before it is reported. Every output is checked against torch in float64 terms
(max abs error vs the float64 reference, next to torch's)."""
import itertools
import math
import sys
import time

import os

import torch

import flashtune
from flashtune.bench.peers import backward_impls
from flashtune.dispatch import choice
from flashtune.tuner.timing import bench_gpu

ROWS = (1, 2, 3, 7, 16, 33, 100, 257, 1000, 3000, 10000, 50000, 200000)
COLS = (1, 5, 17, 100, 127, 500, 777, 1000, 2048, 3000, 5000, 12345, 30000, 65537, 100000,
        250000, 1000000, 2000001)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


SMOKE = os.environ.get("SWEEP_SMOKE") == "1"  # CPU interpreter, tiny shapes: checks the script
DEVICE = "cpu" if SMOKE else "cuda"
if SMOKE:
    ROWS, COLS, DTYPES = (3, 7), (5, 100), (torch.float16, torch.float32)

    def bench_gpu(fn, warmup, rep):  # noqa: F811
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3, 0, 0


def shapes():
    if os.environ.get("SWEEP_SHAPES"):  # e.g. 3000x5,7x100000: re-time a few shapes
        yield from (tuple(int(v) for v in s.split("x")) for s in os.environ["SWEEP_SHAPES"].split(","))
        return
    for r, c in itertools.product(ROWS, COLS):
        if SMOKE or 2**10 <= r * c <= 2**27:
            yield r, c


def timed(fn, quick=True):
    return bench_gpu(fn, 10, 40)[0] if quick else bench_gpu(fn, 25, 200)[0]


def main():
    mode = sys.argv[1]
    budget = float(sys.argv[2]) if len(sys.argv) > 2 else 540.0
    t_start = time.monotonic()
    print("cpu" if SMOKE else torch.cuda.get_device_name(), torch.__version__, flush=True)
    results = []
    for (r, c), dt in itertools.product(shapes(), DTYPES):
        if time.monotonic() - t_start > budget:
            print("stopped by the time budget", flush=True)
            break
        x = torch.randn(r, c, device=DEVICE, dtype=torch.float32).to(dt)
        ref = torch.softmax(x.double(), -1)
        if mode == "fwd":
            ours = lambda: flashtune.softmax(x)  # noqa: E731
            theirs = lambda: torch.softmax(x, -1)  # noqa: E731
            out, peer = ours(), theirs()
            op = "softmax"
        else:
            y = torch.softmax(x, -1)
            dy = torch.randn_like(y)
            yd, dyd = y.double(), dy.double()
            ref = yd * (dyd - (yd * dyd).sum(-1, keepdim=True))
            impl_ours, impl_torch = backward_impls(log=False)
            (ours, _), (theirs, _) = impl_ours.prepare((y, dy)), impl_torch.prepare((y, dy))
            out, peer = ours(), theirs()
            op = "softmax_backward"
        err_ours = (out.double() - ref).abs().max().item()
        err_torch = (peer.double() - ref).abs().max().item()
        t_ours, t_torch = timed(ours), timed(theirs)
        if t_torch / t_ours < 1.0:
            t_ours, t_torch = timed(ours, False), timed(theirs, False)
        how = choice(op, (r, c), str(dt)[6:], DEVICE)
        cfg = how.config
        results.append((t_torch / t_ours, r, c, dt, t_ours, t_torch))
        ok = err_ours <= 1.1 * err_torch + 2 ** -12 or math.isnan(err_torch)
        print(f"{mode} {r:>7}x{c:<8} {str(dt)[6:]:8s} ours {t_ours*1e3:9.1f} us  torch "
              f"{t_torch*1e3:9.1f} us  x{t_torch/t_ours:5.2f}  err {err_ours:.1e}/{err_torch:.1e}"
              f"{'' if ok else ' ACCURACY'}  {cfg['regime']} b{cfg['block']} r{cfg['rows_per_program']}"
              f" s{cfg['splits']} w{cfg['num_warps']}", flush=True)
    results.sort(key=lambda item: item[0])
    print("\nslowest against torch (x = torch time / ours):")
    for ratio, r, c, dt, t_o, t_t in results[:25]:
        print(f"  {r}x{c} {str(dt)[6:]:8s} x{ratio:.2f}  ours {t_o*1e3:.1f} us torch {t_t*1e3:.1f} us")
    below = [x for x in results if x[0] < 1.0]
    print(f"{len(results)} cases, {len(below)} below torch", flush=True)


if __name__ == "__main__":
    main()
