"""Bench the on-chip-held softmax prototype (smem_hold.py) for 16 x 1048576 16-bit.

Timing as session 28's cluster_bench.py: do_bench median (L2 flushed), against a 1 GiB copy,
a same-size copy_, the product (flashtune.softmax) and torch.softmax.
Env: OUT, CONFIGS "dtype:kernel(1|2):NSMEM:RREG:BR:warps:sync[:mode],..." (mode: kernel 2 only).
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from smem_hold import hold_softmax, hold_softmax_v2  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402


def main():
    out = os.environ.get("OUT", ".")
    log = open(os.path.join(out, "smem_hold.log"), "a")

    def say(s):
        print(s, flush=True)
        log.write(s + "\n")

    def bench(fn):
        return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3

    import flashtune
    say(f"{torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__}")
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    big2 = torch.empty_like(big)
    copy_rate = (2 << 30) / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
    say(f"1 GiB copy: {copy_rate:.0f} GB/s")
    del big, big2
    rows, cols, ctas_per_row, BC = 16, 1048576, 8, 256
    done = set()
    for cfg in os.environ["CONFIGS"].split(","):
        dname, K, NSMEM, RREG, BR, W, S, *mode = cfg.split(":")
        K, NSMEM, RREG, BR, W, S = map(int, (K, NSMEM, RREG, BR, W, S))
        extra = {"MODE": int(mode[0])} if mode else {}
        kern = hold_softmax_v2 if K == 2 else hold_softmax
        dtype = getattr(torch, dname)
        torch.manual_seed(0)
        x = torch.randn(rows, cols, device="cuda").to(dtype)
        ref = torch.softmax(x.double(), -1)
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda us: 100 * nbytes / (us * 1e-6) / 1e9 / copy_rate  # noqa: E731
        if dname not in done:
            done.add(dname)
            y = torch.empty_like(x)
            t_copy = bench(lambda: y.copy_(x))
            flashtune.softmax(x)
            t_prod = bench(lambda: flashtune.softmax(x))
            t_torch = bench(lambda: torch.softmax(x, -1))
            e_prod = (flashtune.softmax(x).double() - ref).abs().max().item()
            say(f"{dname}: copy_ {t_copy:.1f} us ({pct(t_copy):.0f}%), product {t_prod:.1f} us "
                f"({pct(t_prod):.0f}%) err {e_prod:.1e}, torch {t_torch:.1f} us; "
                f"80% line {nbytes / (0.8 * copy_rate * 1e3):.1f} us")
        sub = NSMEM * BR + RREG
        assert sub * ctas_per_row * BC == cols
        x2 = x.view(-1, BC)
        y = torch.empty_like(x)
        y2 = y.view(-1, BC)
        gdt = gl.float16 if dtype == torch.float16 else gl.bfloat16
        lay = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
        xd = TensorDescriptor(x2, list(x2.shape), list(x2.stride()), [BR, BC], lay)
        yd = TensorDescriptor(y2, list(y2.shape), list(y2.stride()), [BR, BC], lay)
        stats = torch.zeros(rows * ctas_per_row * 2, device="cuda", dtype=torch.float32)
        count = torch.zeros(rows, device="cuda", dtype=torch.int32)
        epoch = [0]

        def run():
            epoch[0] += 1
            kern[(rows * ctas_per_row,)](xd, yd, x2, y2, stats, count, epoch[0] * ctas_per_row,
                                                  1 << 24, CTAS_PER_ROW=ctas_per_row, NSMEM=NSMEM,
                                                  RREG=RREG, BR=BR, BC=BC, SYNC=S, num_warps=W, **extra)
        tag = f"{dname} K{K} NSMEM{NSMEM} RREG{RREG} BR{BR} w{W} sync{S} mode{extra.get('MODE', 0)}"
        try:
            run()
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            t = bench(run)
            ok = int(count[0].item()) == epoch[0] * ctas_per_row
            err = max(err, (y.double() - ref).abs().max().item())
            say(f"{tag}: {t:.1f} us ({pct(t):.0f}%) err {err:.1e} counter_ok {ok}")
        except Exception as e:  # prototype: report and go on
            say(f"{tag}: FAILED {type(e).__name__}: {str(e)[:300]}")
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
