"""Sweep of the polled persistent split (scratch twin of the template) over programs per SM."""
import os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import poll
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
DT = {"float16": torch.float16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3
print(torch.cuda.get_device_name())
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
print(f"copy 1 GiB {copy_gbs:.0f} GB/s"); del big, big2
for shape, dt, cfgs in [((16, 1048576), "float16", [(64, 8192, 8), (64, 16384, 16), (32, 16384, 16)]),
                        ((128, 262144), "float16", [(32, 8192, 8), (16, 16384, 16), (64, 4096, 8)]),
                        ((16, 1048576), "float32", [(64, 8192, 8), (64, 16384, 16)]),
                        ((128, 262144), "float32", [(32, 8192, 8), (16, 16384, 16)])]:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt]); y = torch.empty_like(x)
    f = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / copy_gbs
    cfg = default_config("softmax", SoftmaxProblem(*shape, dt)); mod = load_variant("softmax", cfg)
    tc, td = bench(lambda: y.copy_(x)), bench(lambda: mod.launch(x, y))
    print(f"{shape} {dt} copy {tc:.1f} ({f(tc):.0%}) default {td:.1f} ({f(td):.0%})", flush=True)
    for s, b, w in cfgs:
        res = []
        for pps in (2, 4, 6, 8):
            tp = bench(lambda: poll.launch(x, y, s, b, w, SMS * pps))
            res.append(f"p{pps} {tp:.1f} ({f(tp):.0%})")
        print(f"   s{s} b{b} w{w}: " + "  ".join(res), flush=True)
