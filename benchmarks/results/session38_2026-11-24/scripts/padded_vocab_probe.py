"""Session 38, call 2: logits of a padded vocabulary, x[..., :vocab] of a (rows, padded)
tensor: rows start on 16-byte boundaries but the width is odd, so the packed output's rows
do not share x's leads. The default (by width: the aligned walk, aligned to x) against the
same config without the walk, on the view, and the default on a packed copy. Every output
is checked against float64 first. Env: DTYPES, OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
# (rows, vocab, padded row stride)
CASES = [(4096, 50257, 50304), (1024, 50257, 50304), (16, 50257, 50304), (64, 151936, 152064),
         (2048, 32001, 32064), (16, 1048575, 1048576)]
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s, torch {torch.__version__}"]
print(lines[0], flush=True)


def timed(fn):
    return min(bench_gpu(fn, 25, 100)[0] for _ in range(3))


for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for rows, cols, stride in CASES:
        x = torch.randn(rows, stride, device="cuda").to(dtype)[:, :cols]
        packed = x.contiguous()
        out = torch.empty(rows, cols, device="cuda", dtype=dtype)
        ref = torch.softmax(x.double(), -1)
        cfg = default_config("softmax", SoftmaxProblem(rows, cols, dtype_name), sm_count=sm)
        tried = [("default", cfg, x), ("flipped", dict(cfg, align=not cfg["align"]), x),
                 ("packed", cfg, packed)]
        parts = []
        for label, c, a in tried:
            if c["regime"] not in ("online", "split") and label == "flipped":
                continue
            try:
                mod = load_variant("softmax", c)
                out.fill_(float("nan"))
                mod.launch(a, out)
                torch.cuda.synchronize()
                err = (out.double() - ref).abs().max().item()
                ms = timed(lambda: mod.launch(a, out))
                parts.append(f"{label} {c['regime'][:5]}{'/al' if c['align'] else ''} "
                             f"{ms * 1e3:7.1f} us {2 * out.numel() * out.element_size() / ms / 1e6 / copy:4.0%} "
                             f"err {err:.0e}")
            except Exception as e:  # a failing variant is a finding, not the end of the run
                parts.append(f"{label} FAILED {type(e).__name__}: {str(e)[:120]}")
        parts.append(f"torch {timed(lambda: torch.softmax(x, -1)) * 1e3:7.1f} us")
        line = f"{dtype_name:9s} {rows:5d}x{cols:<8d} s{stride} " + " | ".join(parts)
        print(line, flush=True)
        lines.append(line)
        x = packed = out = None
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "padded_vocab_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
