"""Time ring_groups.py on 16 x 1048576 16-bit, as session 34's ring_bench.py: do_bench medians
(L2 flushed by its zero_), against a 1 GiB copy, a same-size copy_, the product
(flashtune.softmax) and torch.softmax in the same run; every MODE 0 output is checked against
float64 after its first launch and again after timing.
Env: OUT, CONFIGS "kind:dtype:P:G:BR:BC:S:L:CR:MODE:warps,..." (kind one|ws; ws ignores L and
runs 4 + 4 warps)."""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ring_groups import ring_groups, ring_groups_ws  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: E402


def main():
    out = os.environ.get("OUT", ".")
    log = open(os.path.join(out, "groups.log"), "a")

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
    rows, cols = 16, 1048576
    words = torch.zeros(2 * 64 * 512, device="cuda", dtype=torch.int64)
    parity = [0]
    data = {}
    for cfg in os.environ["CONFIGS"].split(","):
        kind, dname, *nums = cfg.split(":")
        P, G, BR, BC, S, L, CR, MODE, W = map(int, nums)
        dtype = getattr(torch, dname)
        if dname not in data:
            torch.manual_seed(0)
            x = torch.randn(rows, cols, device="cuda").to(dtype)
            ref = torch.softmax(x.double(), -1)
            data[dname] = (x, ref)
            nbytes = 2 * x.numel() * x.element_size()
            y = torch.empty_like(x)
            t_copy = bench(lambda: y.copy_(x))
            flashtune.softmax(x)
            t_prod = bench(lambda: flashtune.softmax(x))
            t_torch = bench(lambda: torch.softmax(x, -1))
            e_prod = (flashtune.softmax(x).double() - ref).abs().max().item()
            e_torch = (torch.softmax(x, -1).double() - ref).abs().max().item()
            pct = lambda us: 100 * nbytes / (us * 1e-6) / 1e9 / copy_rate  # noqa: E731
            say(f"{dname}: copy_ {t_copy:.1f} us ({pct(t_copy):.0f}%), product {t_prod:.1f} us "
                f"({pct(t_prod):.0f}%) err {e_prod:.1e}, torch {t_torch:.1f} us err {e_torch:.1e}; "
                f"80% line {nbytes / (0.8 * copy_rate * 1e3):.1f} us")
        x, ref = data[dname]
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda us: 100 * nbytes / (us * 1e-6) / 1e9 / copy_rate  # noqa: E731
        assert P * BR * BC == cols and rows % G == 0
        x2 = x.view(-1, BC)
        y = torch.empty_like(x)
        lay = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=2)
        xd = TensorDescriptor(x2, list(x2.shape), list(x2.stride()), [BR, BC], lay)
        y2 = y.view(-1, BC)
        yd = TensorDescriptor(y2, list(y2.shape), list(y2.stride()), [BR, BC], lay)
        words.zero_()
        parity[0] = 0

        def run():
            if kind == "ws":
                ring_groups_ws[(P * G,)](xd, yd, words, rows, parity[0], 1 << 16, P=P, G=G,
                                         BR=BR, BC=BC, S=S, CR=CR, MODE=MODE, num_warps=4)
            else:
                ring_groups[(P * G,)](xd, yd, words, rows, parity[0], 1 << 16, P=P, G=G, BR=BR,
                                      BC=BC, S=S, L=L, CR=CR, MODE=MODE, num_warps=W)
            parity[0] ^= 1
        tag = f"{kind} {dname} P{P} G{G} {BR}x{BC} S{S} L{L} CR{CR} mode{MODE} w{W}"
        try:
            run()
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            t = bench(run)
            err = max(err, (y.double() - ref).abs().max().item())
            say(f"{tag}: {t:.1f} us ({pct(t):.0f}%) err {err:.1e}")
        except Exception as e:  # prototype: report and go on
            say(f"{tag}: FAILED {type(e).__name__}: {str(e)[:300]}")
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
