"""Launch the long-row softmax kernels a couple of times each (for ncu): DRAM bytes vs input."""
import torch
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

S = OPS["softmax"].space


def variant(shape, **kw):
    raw = dict(default_config("softmax", SoftmaxProblem(*shape, "float16")))
    raw.update(kw)
    return S.validate(raw)


CASES = [((4096, 50257), {}), ((4096, 50257), dict(num_warps=8, lane_stats=False)),
         ((1024, 65536), {}), ((1024, 65536), dict(block=16384, lane_stats=False)),
         ((128, 262144), {}), ((16, 1048576), {})]
for shape, kw in CASES:
    x = torch.randn(*shape, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    cfg = variant(shape, **kw)
    mod = load_variant("softmax", cfg)
    for _ in range(2):
        mod.launch(x, y)
    torch.cuda.synchronize()
    print("CASE", shape, {k: cfg[k] for k in ("regime", "block", "num_warps", "lane_stats", "splits", "programs_per_sm")}, flush=True)
    y.copy_(x)  # a same-size copy for reference
    torch.cuda.synchronize()
    del x, y
