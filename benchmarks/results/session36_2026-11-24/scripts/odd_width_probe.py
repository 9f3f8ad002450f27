"""Session 36: rows whose width is not a multiple of 16 elements, with the default config.

Triton specializes an integer argument on divisibility by 16 only. A width of 1000 or 50264
(a multiple of 8, not 16) tells the compiler nothing about the row stride or the mask, so
loads and stores may be scalar; 50257 takes the aligned walk (`align`) and 50272 is a
multiple of 16. Times the default config, the default with align=True where it is online,
and torch.softmax, next to the nearest multiple-of-16 width. Env: DTYPES, OUT.
"""

import os

import torch

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import FORWARD_SPACE, SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu

DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
WIDTHS = [int(w) for w in os.environ.get(
    "WIDTHS", "1000,1008,1024,3000,3008,3072,12000,12008,12032,50257,50264,50272").split(",")]
TARGET_BYTES = 256 << 20
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)
for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for cols in WIDTHS:
        rows = max(1, TARGET_BYTES // (cols * torch.finfo(dtype).bits // 8))
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        nbytes = x.numel() * x.element_size()
        cfg = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype_name), sm_count=sm))
        cases = {"default": cfg}
        if cfg["regime"] == "online" and not cfg["align"]:
            cases["default+align"] = dict(FORWARD_SPACE.validate({**cfg, "align": True}))
        results = []
        for name, c in cases.items():
            mod = load_variant("softmax", c)
            mod.launch(x, y)
            torch.cuda.synchronize()
            err = (y.double() - ref).abs().max().item()
            ms = min(bench_gpu(lambda: mod.launch(x, y), 25, 100)[0] for _ in range(2))
            results.append(f"{name} {ms * 1e3:7.1f} us {2 * nbytes / ms / 1e6 / copy:5.1%} err {err:.0e}")
        t_ms = min(bench_gpu(lambda: torch.softmax(x, -1), 25, 100)[0] for _ in range(2))
        desc = f"{cfg['regime']} b={cfg['block']} r={cfg['rows_per_program']} w={cfg['num_warps']}"
        line = (f"{dtype_name:9s} {rows:7d}x{cols:<6d} {desc:28s} " + " | ".join(results)
                + f" | torch {t_ms * 1e3:7.1f} us {2 * nbytes / t_ms / 1e6 / copy:5.1%}")
        print(line, flush=True)
        lines.append(line)
        del x, y, ref
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "odd_width_probe.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
