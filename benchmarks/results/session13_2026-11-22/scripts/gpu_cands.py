"""Candidate persistent-split configs against the default on the long rows, interleaved rounds
(do_bench medians, L2 flushed). one_launch forced so splits above SMs / 2 stay one launch."""
import os, statistics
import torch, triton, triton.testing
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "cands.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
row_sync.one_launch = lambda x, splits, persistent=False: x.is_cuda
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
S = OPS["softmax"].space
CANDS = {"pps2 s32 b16384 w8": dict(programs_per_sm=2, splits=32, block=16384, num_warps=8),
         "pps2 s64 b16384 w8": dict(programs_per_sm=2, splits=64, block=16384, num_warps=8),
         "pps4 s64 b8192 w8": dict(programs_per_sm=4, splits=64, block=8192, num_warps=8),
         "pps4 s128 b8192 w8": dict(programs_per_sm=4, splits=128, block=8192, num_warps=8),
         "pps4 s128 b4096 w4": dict(programs_per_sm=4, splits=128, block=4096, num_warps=4),
         "pps4 s256 b4096 w8": dict(programs_per_sm=4, splits=256, block=4096, num_warps=8),
         "pps4 s256 b4096 w4": dict(programs_per_sm=4, splits=256, block=4096, num_warps=4),
         "pps4 s32 b8192 w8": dict(programs_per_sm=4, splits=32, block=8192, num_warps=8),
         "pps2 s32 b8192 w8": dict(programs_per_sm=2, splits=32, block=8192, num_warps=8),
         "pps4 s64 b4096 w8": dict(programs_per_sm=4, splits=64, block=4096, num_warps=8)}
for rows, cols, dt in [(16, 1048576, "float16"), (16, 1048576, "bfloat16"), (16, 1048576, "float32"),
                       (128, 262144, "float16"), (128, 262144, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x.double(), -1); terr = float((torch.softmax(x, -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    fns = {"default": None}
    for n, over in [("default", {})] + list(CANDS.items()):
        cfg = dict(base, **over)
        if n != "default" and cfg == base or cols // cfg["splits"] < cfg["block"] or cols // cfg["splits"] > 2 * cfg["block"]:
            fns.pop(n, None); continue
        try:
            m = load_variant("softmax", S.validate(cfg)); y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:100]}"); fns.pop(n, None); continue
        err = float((y.double() - ref).abs().max())
        if not err <= 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy {err:.3g} vs torch {terr:.3g}"); fns.pop(n, None); continue
        fns[n] = lambda m=m: m.launch(x, y)
    fns["copy_"] = lambda: y.copy_(x)
    times = {n: [] for n in fns}
    for _ in range(5):
        for n, fn in fns.items():
            times[n].append(bench(fn))
    say(f"== {rows}x{cols} {dt}; default {base['programs_per_sm']=} {base['splits']=} {base['block']=} {base['num_warps']=}")
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(ts)
        say(f"  {n:22s} med {t:6.2f} us {pct(t)}  rounds {' '.join(f'{v:.2f}' for v in ts)}")
