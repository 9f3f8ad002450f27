"""Defaults of the long-row shapes next to a same-size copy and torch.softmax."""
import os, sys
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
print(f"copy 1 GiB {copy_gbs:.0f} GB/s"); del big, big2
for shape in ((16, 1048576), (128, 262144), (64, 524288), (32, 1048576), (8, 2097152)):
    for dt in DT:
        x = torch.randn(*shape, device="cuda", dtype=DT[dt]); y = torch.empty_like(x)
        cfg = default_config("softmax", SoftmaxProblem(*shape, dt)); mod = load_variant("softmax", cfg)
        mod.launch(x, y); torch.cuda.synchronize()
        err = float((y.double() - torch.softmax(x.double(), -1)).abs().max())
        f = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / copy_gbs
        tc, tt, td = bench(lambda: y.copy_(x)), bench(lambda: torch.softmax(x, -1)), bench(lambda: mod.launch(x, y))
        print(f"{shape} {dt:9s} copy {tc:6.1f} ({f(tc):.0%}) torch {tt:6.1f} default {td:6.1f} ({f(td):.0%}) err {err:.1e} "
              f"[s{cfg['splits']} b{cfg['block']} w{cfg['num_warps']} p{cfg['programs_per_sm']}]", flush=True)
        del x, y
