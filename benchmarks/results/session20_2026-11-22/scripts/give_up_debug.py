"""The plain persistent split's give-up path on the GPU (MAX_POLLS 0: every finish computes its
row's partials from x itself) against the normal path and float64, per config: which rows and
which segments differ. The GPU test found the forced outputs wrong (NaN) for segments of one
chunk with the last segment empty (50257 columns, chunks of 8192, 8 splits)."""
import os
import sys
import time

import torch
import triton

from flashtune.gen import row_sync
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.gen.softmax_space import OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "give_up_debug.log"), "w")
space = OPS["softmax"].space


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


# (rows, cols, dtype, block, splits, stats, programs_per_sm, warps)
CASES = [
    (300, 50257, torch.float16, 8192, 8, "plain", 2, 16),   # the failing test: empty last segment
    (300, 65536, torch.float16, 8192, 8, "plain", 2, 16),   # one chunk each, no empty segment
    (300, 50257, torch.float16, 4096, 8, "plain", 2, 8),    # two chunks each, empty last segment
    (300, 50257, torch.float16, 8192, 8, "lane", 2, 16),    # lane statistics, empty segment
    (300, 50257, torch.float32, 8192, 8, "plain", 2, 16),
    (300, 50257, torch.float16, 1024, 8, "lane", 2, 2),     # the passing test's geometry
    (128, 262144, torch.float16, 8192, 32, "plain", 4, 8),  # the fp16 default for this shape
    (16, 1048576, torch.float16, 8192, 64, "plain", 4, 8),  # the fp16 default for this shape
    (300, 50257, torch.float16, 8192, 8, "plain", 2, 8),
    (300, 50257, torch.float16, 8192, 8, "plain", 2, 4),
    (300, 50257, torch.float16, 1024, 8, "plain", 2, 2),    # 10: plain, several chunks
    (300, 65536, torch.float16, 8192, 8, "plain", 0, 16),   # 11: fused split (PHASE 0), one chunk
    (300, 65536, torch.float16, 2048, 8, "plain", 0, 4),    # 12: fused split, four chunks
    (300, 65536, torch.float16, 8192, 8, "vec", 2, 8),      # 13: per-vector statistics
]
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
ONLY = os.environ.get("ONLY")
for i, (rows, cols, dt, block, splits, stats, pps, warps) in enumerate(CASES):
    if ONLY and str(i) not in ONLY.split(","):
        continue
    say(f"case {i}, forced MAX_POLLS {os.environ.get('POLLS', '0')}")
    cfg = space.complete(dict(regime="split", block=block, splits=splits, num_warps=warps,
                              num_stages=1, fused=True, programs_per_sm=pps, l2_hint=True,
                              lane_stats=stats == "lane", vector_stats=stats == "vec"))
    torch.manual_seed(0)
    x = (torch.randn(rows, cols, device="cuda") * 4).to(dt)
    ref = torch.softmax(x.double(), -1)
    t0 = time.perf_counter()
    normal = softmax_forward(x, -1, config=cfg)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    normal2 = softmax_forward(x, -1, config=cfg)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    say(f"  normal: first {t1 - t0:.2f} s, second {t2 - t1:.4f} s, fit {dict(row_sync._RESIDENT)}")
    row_sync.MAX_POLLS, saved = int(os.environ.get("POLLS", "0")), row_sync.MAX_POLLS
    forced = softmax_forward(x, -1, config=cfg)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    forced2 = softmax_forward(x, -1, config=cfg)
    torch.cuda.synchronize()
    say(f"  forced: first {t3 - t2:.2f} s, second {time.perf_counter() - t3:.4f} s")
    row_sync.MAX_POLLS = saved
    seg_len = triton.cdiv(triton.cdiv(cols, splits), block) * block
    diff = (forced != normal) & ~(forced.isnan() & normal.isnan())
    bad_rows = diff.any(1).nonzero().flatten().tolist()
    segs = sorted({int(c) // seg_len for c in diff.nonzero()[:, 1].unique().tolist()})
    en = (normal.double() - ref).abs().max().item()
    ef = (forced.double() - ref).nan_to_num(float("inf")).abs().max().item()
    say(f"{rows}x{cols} {str(dt)[6:]} b{block} s{splits} {stats} p{pps} w{warps} (seg {seg_len}): "
        f"err normal {en:.2e} forced {ef:.2e}; {len(bad_rows)} rows differ {bad_rows[:8]}; "
        f"segments {segs}; NaN in forced {forced.isnan().sum().item()}")
