"""Online-regime defaults (lane statistics) on the long-row shapes: time + accuracy."""
import os, sys
import torch, triton, triton.testing
import flashtune
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

TAG = sys.argv[1]
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
del big, big2
print(TAG, flashtune.__file__, f"copy {copy_gbs:.0f} GB/s", flush=True)
for shape in ((4096, 50257), (1024, 65536), (128, 262144)):
    for dt in DT:
        torch.manual_seed(0)
        x = torch.randn(*shape, device="cuda", dtype=DT[dt]) * 4; y = torch.empty_like(x)
        cfg = default_config("softmax", SoftmaxProblem(*shape, dt))
        if shape == (128, 262144):  # the persistent default has no lane statistics: force them
            cfg = type(cfg)  # placeholder, replaced below
            raw = dict(default_config("softmax", SoftmaxProblem(*shape, dt)), lane_stats=True)
            from flashtune.gen.softmax_space import OPS
            cfg = OPS["softmax"].space.validate(raw)
        mod = load_variant("softmax", cfg)
        mod.launch(x, y); torch.cuda.synchronize()
        ref = torch.softmax(x.double(), -1)
        err = float((y.double() - ref).abs().max())
        tt = bench(lambda: mod.launch(x, y))
        frac = 2 * x.numel() * x.element_size() / (tt * 1e-6) / 1e9 / copy_gbs
        print(f"{TAG} {shape} {dt:9s} {tt:7.1f} us ({frac:.0%}) err {err:.1e} "
              f"[{cfg['regime']} b{cfg['block']} w{cfg['num_warps']} lane{int(cfg['lane_stats'])}]", flush=True)
        del x, y, ref
        torch.cuda.empty_cache()
