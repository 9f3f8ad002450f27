"""Attention forward with pv_acc="fp16" (and "fp32" for reference): times of this tree's
template, for a before/after comparison of the P_SHIFT change (run once with the template of
bc5422e copied over, once with this one; see pv_shift.sh). do_bench medians, L2 flushed.

usage: python attn_pv_shift.py LABEL   (writes $OUT/pv_LABEL.json)
"""
import json
import os
import sys

import torch
import triton.testing

from flashtune.gen import attention_ops
from flashtune.gen.attention_space import AttentionProblem, default_config

OUT = os.environ.get("OUT", "/tmp")
SHAPES = [(8, 32, 4096, 64), (2, 32, 16384, 64), (8, 16, 4096, 128), (2, 16, 16384, 128)]
rows = []
for (b, h, n, d) in SHAPES:
    for causal in (False, True):
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        prob = AttentionProblem(b, h, h, n, n, d, causal, "float16")
        base = dict(default_config("attention_fwd", prob).as_dict())
        for pv in ("fp16", "fp32"):
            cfg = dict(base, pv_acc=pv)
            fn = lambda: attention_ops.attention_forward(q, k, v, causal, config=cfg)  # noqa: E731
            out = fn()
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            err = (out.float() - ref.float()).abs().max().item()
            ms = triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median")
            flops = 4 * b * h * n * n * d * (0.5 if causal else 1.0)
            rows.append(dict(shape=[b, h, n, d], causal=causal, pv_acc=pv, us=ms * 1e3,
                             tflops=flops / ms / 1e9, err_vs_sdpa=err))
            print(f"{sys.argv[1]} {b}x{h}x{n}x{d} causal={causal} pv={pv}: {ms*1e3:.1f} us "
                  f"{flops / ms / 1e9:.0f} TFLOP/s err {err:.2e}", flush=True)
json.dump(rows, open(os.path.join(OUT, f"pv_{sys.argv[1]}.json"), "w"), indent=1)
