"""A/B of the output pass's folded log2(d) (16-bit outputs): H200 winners of session 14, timed
through run_variant (do_bench medians, L2 flushed), each output checked against float64 first.
Run once per tree (baseline HEAD and the change), alternating; prints one line per case."""
import sys, torch, triton
from triton.testing import do_bench
from flashtune.gen import run_variant
from flashtune.gen.softmax_space import OPS
from flashtune.reference import check_accuracy, softmax_ref

tag = sys.argv[1]
space = OPS["softmax"].space
ON = dict(regime="online", exp2=True, l2_hint=True, num_stages=1)
SP = dict(regime="split", exp2=True, l2_hint=True, fused=True, num_stages=1, num_warps=8)
cases = [
    ((4096, 16384), ("float16", "bfloat16"), dict(ON, block=8192, num_warps=16, vector_stats=True)),
    ((1024, 65536), ("float16", "bfloat16"), dict(ON, block=16384, num_warps=32, vector_stats=True)),
    ((4096, 50257), ("float16", "bfloat16", "float32"), dict(ON, block=16384, num_warps=32, vector_stats=True, align=True)),
    ((128, 262144), ("float16", "bfloat16"), dict(SP, block=8192, splits=32, programs_per_sm=4)),
    ((16, 1048576), ("float16", "bfloat16"), dict(SP, block=8192, splits=64, programs_per_sm=4)),
    ((1024, 65536), ("float32",), dict(ON, block=16384, num_warps=32, num_stages=2, lane_stats=True)),
]
big = torch.empty(1 << 28, device="cuda", dtype=torch.float32); big2 = torch.empty_like(big)
cp = do_bench(lambda: big2.copy_(big), warmup=25, rep=100, return_mode="median")
copy_gbs = 2 * big.numel() * 4 / cp / 1e6
print(f"{tag} copy {copy_gbs:.0f} GB/s", flush=True)
for (r, c), dts, raw in cases:
    cfg = space.complete(raw)
    for dname in dts:
        dt = getattr(torch, dname)
        torch.manual_seed(0)
        x = torch.randn(r, c, device="cuda", dtype=dt)
        y = torch.empty_like(x)
        y.fill_(float("nan"))
        run_variant("softmax", cfg, x, y)
        ref = softmax_ref(x, -1)
        acc = check_accuracy(y, ref, torch.softmax(x, -1))
        ms = do_bench(lambda: run_variant("softmax", cfg, x, y), warmup=25, rep=200, return_mode="median")
        gbs = 2 * x.numel() * x.element_size() / ms / 1e6
        print(f"{tag} {r}x{c} {dname:>8} {ms*1e3:8.2f} us {gbs:6.0f} GB/s {gbs/copy_gbs*100:5.1f}% ok={acc.ok}", flush=True)
        del x, y, ref
