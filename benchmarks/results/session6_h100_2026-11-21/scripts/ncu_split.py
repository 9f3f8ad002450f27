"""Scratch: launch the fused split on the wide shapes (for ncu)."""
import torch
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

S = OPS["softmax"].space
DT = {"float16": torch.float16, "float32": torch.float32}


def cfg(**kw):
    return S.validate(S.complete(kw))


def split(b, s, w):
    return cfg(regime="split", block=b, splits=s, num_warps=w, num_stages=1, l2_hint=True, fused=True, exp2=True)


CASES = [((128, 262144), "float16", split(8192, 8, 8)), ((128, 262144), "float16", split(8192, 32, 8)),
         ((128, 262144), "float32", split(8192, 32, 8)), ((128, 262144), "float32", split(8192, 8, 8)),
         ((16, 1048576), "float16", split(8192, 32, 8)), ((16, 1048576), "float32", split(16384, 32, 16))]
for shape, dt, c in CASES:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt])
    y = torch.empty_like(x)
    mod = load_variant("softmax", c)
    for _ in range(3):
        mod.launch(x, y)
    torch.cuda.synchronize()
    print(shape, dt, c["block"], c["splits"], c["num_warps"], flush=True)
    y.copy_(x)  # a same-size copy for reference
    torch.cuda.synchronize()
