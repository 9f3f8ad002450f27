"""Time flashtune.attention (the dispatcher's default configs; empty winner database) on the
benchmark's attention shapes, do_bench median with its L2 flush. Prints one line per case:
TAG case ms TFLOP/s. Run once per package copy (PYTHONPATH) to compare two template versions
in one device call.  usage: ab_attention.py TAG"""
import sys

import torch
import triton

import flashtune

TAG = sys.argv[1]
CASES = [(32, 32, 1024, 64), (8, 32, 4096, 64), (2, 32, 16384, 64),
         (32, 16, 1024, 128), (8, 16, 4096, 128), (2, 16, 16384, 128), (2, 16, 4096, 256)]
for dtype in (torch.float16, torch.bfloat16):
    for causal in (False, True):
        for b, h, n, d in CASES:
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            out = flashtune.attention(q, k, v, causal=causal)
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            err = (out.float() - ref.float()).abs().max().item()
            ms = triton.testing.do_bench(lambda: flashtune.attention(q, k, v, causal=causal),
                                         warmup=25, rep=100, return_mode="median")
            flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            name = f"{str(dtype)[6:]} {'causal' if causal else 'full'} {b}x{h}x{n}x{d}"
            print(f"{TAG} {name:36s} {ms:8.4f} ms {flops / ms / 1e9:7.1f} TFLOP/s err {err:.1e}",
                  flush=True)
            del q, k, v, out, ref
