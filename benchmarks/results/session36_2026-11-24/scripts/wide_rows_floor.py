"""Session 36: where the H200 loses on 4096x50257-like rows (the product: 78% of copy for
bf16/fp32, the H100 93%). Bare kernels with the online scan's memory pattern, one program per
row, chunks of BLOCK, pass 1 loads with evict_last, pass 2 re-loads (from L2) with evict_first
and writes:
  copy     one pass: load, store (x * 1.0)                 1 read, 1 write
  nomath   pass 1: sum of x; pass 2: store x * s           2 reads (one from L2), 1 write
  exp1     pass 1: sum of exp2(x); pass 2: store x * s     + one exp per element
  exp2     pass 1: sum of exp2(x); pass 2: exp2(x) * s     + two exps per element
and the product's default config, on the same tensors. Width 50264 (rows 16-byte aligned, so
the bare kernels need no aligned walk) and 50257 (the product only). Not softmax: timing only.
Env: DTYPES (bfloat16,float32), OUT.
"""

import os

import torch
import triton
import triton.language as tl

from flashtune.bench.timing import Timer, copy_bandwidth
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
from flashtune.tuner.timing import bench_gpu


@triton.jit
def bare(x_ptr, y_ptr, n_cols, stride, MODE: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    y_row = y_ptr + row * stride
    cols = tl.arange(0, BLOCK)
    s = tl.zeros([BLOCK], tl.float32)
    if MODE != 0:
        for start in range(0, n_cols, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0,
                        eviction_policy="evict_last").to(tl.float32)
            if MODE == 1:
                s += x
            else:
                s += tl.where(offs < n_cols, tl.math.exp2(x), 0.0)
    total = tl.sum(s, axis=0) * 1e-30 + 1.0
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        if MODE == 3:
            out = tl.math.exp2(x) * total
        else:
            out = x * total
        tl.store(y_row + offs, out.to(y_ptr.dtype.element_ty), mask=offs < n_cols)


DTYPES = os.environ.get("DTYPES", "bfloat16,float32").split(",")
sm = torch.cuda.get_device_properties(0).multi_processor_count
copy = copy_bandwidth(Timer(on_gpu=True), "cuda")["gbs"]
lines = [f"{torch.cuda.get_device_name()} copy {copy:.0f} GB/s"]
print(lines[0], flush=True)
for dtype_name in DTYPES:
    dtype = getattr(torch, dtype_name)
    for cols in (50264, 50257):
        x = torch.randn(4096, cols, device="cuda", dtype=dtype)
        y = torch.empty_like(x)
        nbytes = x.numel() * x.element_size()
        cases = {}
        if cols % 8 == 0:
            for mode, name in enumerate(("copy", "nomath", "exp1", "exp2")):
                for block, warps in ((16384, 32), (8192, 16)):
                    cases[f"{name} b={block} w={warps}"] = (
                        lambda m=mode, b=block, w=warps: bare[(x.shape[0],)](
                            x, y, cols, x.stride(0), MODE=m, BLOCK=b, num_warps=w))
        cfg = default_config("softmax", SoftmaxProblem(4096, cols, dtype_name), sm_count=sm)
        mod = load_variant("softmax", cfg)
        cases["product default"] = lambda: mod.launch(x, y)
        cases["torch.softmax"] = lambda: torch.softmax(x, -1)
        for name, fn in cases.items():
            fn()
            torch.cuda.synchronize()
            ms = min(bench_gpu(fn, 25, 100)[0] for _ in range(2))
            line = (f"{dtype_name:9s} 4096x{cols} {name:22s} {ms * 1e3:8.1f} us "
                    f"{2 * nbytes / ms / 1e6 / copy:6.1%}")
            print(line, flush=True)
            lines.append(line)
        del x, y
        torch.cuda.empty_cache()
if os.environ.get("OUT"):
    with open(os.path.join(os.environ["OUT"], "wide_rows_floor.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
