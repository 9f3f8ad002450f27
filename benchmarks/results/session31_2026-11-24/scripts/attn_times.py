"""Attention forward times with this tree's templates, default configs (pv_acc fp32), for a
before/after comparison of the huge-score rescue (rescue_cost.sh runs it four times,
alternating the templates of fold_before/ and this tree's). do_bench medians, L2 flushed.

usage: python attn_times.py LABEL   (writes $OUT/times_LABEL.json)
"""
import json
import os
import sys

import torch
import triton.testing

from flashtune.gen import attention_ops
from flashtune.gen.attention_space import AttentionProblem, default_config

OUT = os.environ.get("OUT", "/tmp")
SHAPES = [(32, 32, 1024, 64), (8, 32, 4096, 64), (2, 32, 16384, 64), (8, 16, 4096, 128),
          (2, 16, 16384, 128), (2, 16, 4096, 256)]
rows = []
DTYPES = os.environ.get("DTYPES", "float16,bfloat16").split(",")
for dtype in (getattr(torch, name) for name in DTYPES):
    for (b, h, n, d) in SHAPES:
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=dtype) for _ in range(3))
            prob = AttentionProblem(b, h, h, n, n, d, causal, str(dtype).split(".")[1])
            cfg = dict(default_config("attention_fwd", prob).as_dict())
            fn = lambda: attention_ops.attention_forward(q, k, v, causal, config=cfg)  # noqa: E731
            out = fn()
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            err = (out.float() - ref.float()).abs().max().item()
            ms = triton.testing.do_bench(fn, warmup=50, rep=200, return_mode="median")
            flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            rows.append(dict(dtype=str(dtype), shape=[b, h, n, d], causal=causal, us=ms * 1e3,
                             tflops=flops / ms / 1e9, err_vs_sdpa=err))
            print(f"{sys.argv[1]} {dtype} {b}x{h}x{n}x{d} causal={causal}: {ms*1e3:.1f} us "
                  f"{flops / ms / 1e9:.0f} TFLOP/s err {err:.2e}", flush=True)
json.dump(rows, open(os.path.join(OUT, f"times_{sys.argv[1]}.json"), "w"), indent=1)
