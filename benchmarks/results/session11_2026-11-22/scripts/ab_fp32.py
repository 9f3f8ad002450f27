"""Interleaved A/B on the long-row shapes: each round times every candidate once (do_bench
median, L2 flushed); 6 rounds; reports median and min over rounds."""
import os, sys, time, statistics
sys.path.insert(0, os.path.dirname(__file__))
from sweep_hold import patch_space
import torch, triton, triton.testing
patch_space()
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "ab_fp32.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2

def cands(rows, cols, dtype):
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
    p = dict(base, regime="split", fused=True, num_stages=1, l2_hint=True, lane_stats=False,
             vector_stats=False, max_pass=False)
    c = {"default": base}
    if dtype == "float32":
        for pps in (2, 4):
            for splits in ((16, 32) if rows == 128 else (64,)):
                c[f"pers p{pps} w8 b16384 s{splits}"] = dict(p, programs_per_sm=pps, num_warps=8, block=16384, splits=splits)
    return c

summary = []
for rows, cols, dtype in [(128, 262144, "float32"), (16, 1048576, "float32"), (16, 1048576, "float16"),
                          (16, 1048576, "bfloat16"), (128, 262144, "float16")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype)) * 3; y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    torch_err = float((torch.softmax(x, -1).double() - ref).abs().max())
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    mods = {}
    for name, raw in cands(rows, cols, dtype).items():
        m = load_variant("softmax", OPS["softmax"].space.validate(raw))
        y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        err = float((y.double() - ref).abs().max())
        if err > 1.1 * torch_err + 1e-6:
            say(f"  {name}: ERR {err:.1e} vs torch {torch_err:.1e}")
        mods[name] = m
    times = {n: [] for n in mods}; copies = []
    for r in range(6):
        copies.append(bench(lambda: y.copy_(x)))
        for n, m in mods.items():
            times[n].append(bench(lambda: m.launch(x, y)))
    say(f"== {rows}x{cols} {dtype}: same-size copy med {statistics.median(copies):.1f} ({frac(statistics.median(copies)):.0%}) rounds {' '.join(f'{t:.1f}' for t in copies)}")
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        med = statistics.median(ts)
        say(f"  {n:26s} med {med:6.1f} ({frac(med):.0%}) min {min(ts):6.1f} rounds {' '.join(f'{t:.1f}' for t in ts)}")
    del x, y, ref; torch.cuda.empty_cache()
