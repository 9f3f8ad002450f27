"""Attention at huge scores (fp16 q = k in [5000, 9000]): with the scale folded into one FMA per
score, the row max is rounded on its own, so a max key's exponent can reach half an fp32 ulp of
m (16 at m = 2**29 in exp2 units) and its p overflow fp16. Counts non-finite output rows of
flashtune (default config) and of SDPA's backends, against a float64 reference (one-hot rows:
out = v at the argmax key)."""
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashtune

def _sdpa(q, k, v, be):
    with sdpa_kernel(be):
        return F.scaled_dot_product_attention(q, k, v)


torch.manual_seed(0)
for d in (16, 32, 64, 128):
    b, h, n = 1, 4, 512
    q = (torch.rand(b, h, n, d, device="cuda") * 4000 + 5000).half()
    k = (torch.rand(b, h, n, d, device="cuda") * 4000 + 5000).half()
    v = torch.randn(b, h, n, d, device="cuda").half()
    ref = F.scaled_dot_product_attention(q.double().cpu(), k.double().cpu(), v.double().cpu())
    m = (q.double() @ k.double().transpose(-1, -2)).amax() * d ** -0.5 * 1.4426950408889634
    row = [f"d={d} max score {float(m):.3g} (exp2 units, 2**{torch.log2(m).item():.1f})"]
    outs = {"flashtune": lambda: flashtune.attention(q, k, v)}
    for name, be in (("sdpa_flash", SDPBackend.FLASH_ATTENTION), ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("sdpa_efficient", SDPBackend.EFFICIENT_ATTENTION)):
        outs[name] = (lambda be=be: _sdpa(q, k, v, be))
    for name, fn in outs.items():
        try:
            o = fn().double().cpu()
            bad = (~torch.isfinite(o)).any(-1).sum().item()
            err = (o - ref).abs().nan_to_num(float("inf")).amax().item()
            row.append(f"{name}: {bad} non-finite rows, max err {err:.3g}")
        except Exception as e:  # a backend may refuse
            row.append(f"{name}: {type(e).__name__}")
    print(" | ".join(row), flush=True)

