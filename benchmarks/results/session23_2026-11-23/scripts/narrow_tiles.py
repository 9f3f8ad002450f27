"""Prototype, second step: the row regime's [ROWS, BLOCK] tile with BLOCK below 16 and more rows.

narrow_cols.py (first step, H100) found a column walk (one row per lane) level with or a little
above torch.softmax for 1 to 5 columns in 16-bit, and below it from 6 columns on and in fp32:
its loads touch C lines for C useful elements per lane group. The row regime's tile is the
other way round (lanes along the columns), and its space starts at BLOCK 16, so a row of 5
columns keeps 5 of 16 lanes busy. Here the same kernel as the row template (GRAIN included)
runs with BLOCK = next power of two >= C, down to 1, and up to 4096 rows per program.

GPU: python narrow_tiles.py (env OUT). CPU: INTERPRET=1 checks only.
"""
import itertools
import json
import os
import sys
import time

if os.environ.get("INTERPRET") == "1":
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import triton
import triton.language as tl


@triton.jit
def rowtile(x_ptr, y_ptr, n_rows, n_cols_in_grains, xs_g, ys_g, BLOCK: tl.constexpr,
            ROWS: tl.constexpr, GRAIN: tl.constexpr, LOG: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    n_cols = n_cols_in_grains * GRAIN
    x_rows = rows[:, None] * xs_g * GRAIN
    y_rows = rows[:, None] * ys_g * GRAIN
    mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
    x = tl.load(x_ptr + x_rows + cols[None, :], mask=mask, other=float("-inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    p = tl.exp2((x - m[:, None]) * 1.4426950408889634)
    d = tl.sum(p, axis=1)
    if LOG:
        y = (x - m[:, None]) - (tl.log2(d) * 0.6931471805599453)[:, None]
    else:
        y = p * (1.0 / d)[:, None]
    tl.store(y_ptr + y_rows + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def _row_grain(vector, *lengths):
    bits = 0
    for length in lengths:
        bits |= length
    lowest = bits & -bits
    return vector if lowest == 0 or lowest > vector else lowest


def run(x, block, rows, warps, log=False):
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    grain = _row_grain(16 // x.dtype.itemsize, n_cols, x.stride(0), y.stride(0))
    grain = min(grain, block)
    rowtile[(triton.cdiv(n_rows, rows),)](
        x, y, n_rows, n_cols // grain, x.stride(0) // grain, y.stride(0) // grain, BLOCK=block,
        ROWS=rows, GRAIN=grain, LOG=log, num_warps=warps)
    return y


def check(y, x, log):
    ref = (torch.log_softmax if log else torch.softmax)(x.double(), -1)
    eager = (torch.log_softmax if log else torch.softmax)(x, -1).double()
    fin = torch.isfinite(ref)
    err = (y.double() - ref)[fin].abs().max().item() if fin.any() else 0.0
    err_t = (eager - ref)[fin].abs().max().item() if fin.any() else 0.0
    same = torch.equal(torch.isnan(y), torch.isnan(ref.to(y.dtype)))
    return err <= 1.1 * err_t + 1e-6 and same, err, err_t


def npow2(n):
    return 1 << max(0, (n - 1).bit_length())


def cpu_checks():
    torch.manual_seed(0)
    bad = 0
    for dtype, cols, log in itertools.product((torch.float16, torch.float32), (1, 2, 3, 4, 5, 8),
                                              (False, True)):
        x = torch.randn(70, cols).to(dtype) * 4
        x[3, 0] = float("nan")
        x[5, :] = float("-inf")
        ok, err, err_t = check(run(x, npow2(cols), 32, 1, log), x, log)
        bad += not ok
        print(f"{dtype} 70x{cols} log={log}: {'ok' if ok else 'FAIL'} {err:.2e} {err_t:.2e}")
    print("CPU checks:", "all ok" if bad == 0 else f"{bad} FAILED")
    return bad


def gpu_main():
    from triton.testing import do_bench

    import flashtune

    out = os.environ.get("OUT", ".")
    dev = torch.cuda.get_device_name()
    print(f"device {dev} torch {torch.__version__} triton {triton.__version__} "
          f"{time.strftime('%Y-%m-%d')}", flush=True)

    def t(fn):
        fn()
        torch.cuda.synchronize()
        return do_bench(fn, warmup=25, rep=60, return_mode="median") * 1e3

    shapes = [(200000, c) for c in (1, 2, 3, 4, 5, 6, 7, 8)] + [
        (1000000, 5), (1000000, 2), (65536, 8), (3000, 5)]
    out_rows = []
    bad = 0
    for (n, c), dtype in itertools.product(shapes, (torch.float16, torch.bfloat16, torch.float32)):
        x = torch.randn(n, c, device="cuda", dtype=dtype)
        t_torch = t(lambda: torch.softmax(x, -1))
        t_ft = t(lambda: flashtune.softmax(x, -1))
        times = {}
        for block in (npow2(c),):
            for rows, warps in itertools.product((128, 512, 2048), (1, 2, 4)):
                if block * rows > 65536 or warps * 32 > block * rows:
                    continue
                times[(block, rows, warps)] = t(lambda: run(x, block, rows, warps))
        ranked = sorted(times, key=times.get)
        for cfg in ranked[:2]:
            for log in (False, True):
                ok, err, err_t = check(run(x, *cfg, log=log), x, log)
                if not ok:
                    bad += 1
                    print(f"FAIL {n}x{c} {dtype} {cfg} log={log} err {err:.2e} torch {err_t:.2e}")
        best = ranked[0]
        out_rows.append(dict(shape=f"{n}x{c}", dtype=str(dtype).split(".")[-1], torch=t_torch,
                             flashtune=t_ft, best=times[best], cfg=best, all={str(k): v for k, v in times.items()}))
        print(f"{n:>8}x{c:<3} {str(dtype)[6:]:>9} torch {t_torch:6.2f} ft {t_ft:6.2f} "
              f"best {times[best]:6.2f} {best} ({t_torch / times[best]:.2f}x torch, "
              f"ft {t_torch / t_ft:.2f}x)", flush=True)
    with open(os.path.join(out, "narrow_tiles.json"), "w") as f:
        json.dump(dict(device=dev, rows=out_rows), f, indent=1)
    print("failures:", bad)


if __name__ == "__main__":
    if os.environ.get("INTERPRET") == "1":
        sys.exit(1 if cpu_checks() else 0)
    gpu_main()
