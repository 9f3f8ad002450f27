"""Scratch: is the ragged causal case (4x32x1000x128) slow through flashtune.attention?"""
import time, torch, triton, triton.testing
import flashtune
from torch.nn.attention import sdpa_kernel, SDPBackend
import torch.nn.functional as F

def tf(ms, b=4, h=32, n=1000, d=128):
    return 4 * b * h * n * n * d * 0.5 / (ms * 1e-3) / 1e12

for dtype in (torch.float16, torch.bfloat16):
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 32, 1000, 128, device="cuda", dtype=dtype, generator=g) for _ in range(3))
    f = lambda: flashtune.attention(q, k, v, causal=True)
    f(); torch.cuda.synchronize()
    def flash():
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    flash()
    for rep in range(3):
        a = triton.testing.do_bench(f, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        b = triton.testing.do_bench(flash, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        print(dtype, rep, "flashtune", [round(x, 4) for x in a], f"{tf(a[0]):.0f} TF/s", "| sdpa_flash", [round(x, 4) for x in b], f"{tf(b[0]):.0f}", flush=True)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(200):
        f()
    t_host = (time.perf_counter() - t) / 200 * 1e6
    torch.cuda.synchronize(); t2 = (time.perf_counter() - t) / 200 * 1e6
    print(dtype, f"host {t_host:.1f} us/call, wall incl. sync {t2:.1f} us/call", flush=True)
    from flashtune.dispatch.runtime import RUNTIME
    print([ (k, v) for k, v in vars(RUNTIME).items() if 'last' in k or 'choice' in k][:3])
