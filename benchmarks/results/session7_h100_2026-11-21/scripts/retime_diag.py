"""Reproduce the tuner's round-robin re-time of the bf16 16 x 1048576 finalists."""
import json, sys, torch, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS
from flashtune.gen import row_sync
SPACE = OPS["softmax"].space
base = dict(align=False, exp2=True, l2_hint=True, lane_stats=False, max_pass=False, resident=0, rows_per_program=1)
cfgs = [dict(base, block=8192, fused=True, num_stages=1, num_warps=8, programs_per_sm=4, regime="split", splits=64),
        dict(base, block=2048, exp2=False, fused=False, lane_stats=True, num_stages=2, num_warps=16, programs_per_sm=0, regime="split", splits=64),
        dict(base, block=8192, exp2=False, l2_hint=False, fused=False, num_stages=1, num_warps=8, programs_per_sm=0, regime="coop", splits=128),
        dict(base, block=4096, l2_hint=False, fused=False, num_stages=1, num_warps=32, programs_per_sm=0, regime="coop", splits=256)]
mods = [load_variant("softmax", SPACE.validate(c)) for c in cfgs]
for dt in (torch.bfloat16, torch.float16):
    x = torch.randn(16, 1048576, device="cuda", dtype=dt)
    ref = torch.softmax(x.float(), -1)
    ys = [torch.empty_like(x) for _ in mods]
    for m, y in zip(mods, ys):
        m.launch(x, y)
    torch.cuda.synchronize()
    for r in range(5):
        row = []
        for j in range(len(mods)):
            i = (j + r) % len(mods)
            t = triton.testing.do_bench(lambda: mods[i].launch(x, ys[i]), warmup=10, rep=40, quantiles=[0.5, 0.2, 0.8])
            cnt = row_sync.sync_counters(x.device, 16)
            row.append(f"c{i}={t[0]*1e3:.1f}us(cnt {int(cnt.abs().sum())})")
        print(dt, "round", r, " ".join(row), flush=True)
    for i, y in enumerate(ys):
        mods[i].launch(x, y); torch.cuda.synchronize()
        print(dt, "c", i, "err", float((y.float() - ref).abs().max()))
