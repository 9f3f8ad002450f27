"""Candidate default changes, interleaved rounds against torch.softmax (do_bench medians, L2
flushed): fp32 narrow rows with 1024-element tiles (r8 w1 / r8 w2 on 128 columns, r1 w1 / r1 w2
on 1024), and fp32 odd-width long rows with per-vector statistics under the aligned walk."""
import os, statistics
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "defaults.log"), "a")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
S = OPS["softmax"].space
CASES = [
    (65536, 128, "float32", {"r8 w1": dict(rows_per_program=8, num_warps=1), "r8 w2": dict(rows_per_program=8, num_warps=2),
                             "r4 w2": dict(rows_per_program=4, num_warps=2)}),
    (16384, 1024, "float32", {"r1 w1": dict(rows_per_program=1, num_warps=1), "r1 w2": dict(rows_per_program=1, num_warps=2)}),
    (32768, 256, "float32", {"r4 w1": dict(rows_per_program=4, num_warps=1), "r4 w2": dict(rows_per_program=4, num_warps=2)}),
    (8192, 2048, "float32", {"r1 w2": dict(rows_per_program=1, num_warps=2, block=2048), "r1 w4": dict(rows_per_program=1, num_warps=4, block=2048)}),
    (4096, 50257, "float32", {"lane st2 (old default)": dict(lane_stats=True, vector_stats=False, num_stages=2),
                              "vector b16384 w32 st2": dict(lane_stats=False, vector_stats=True, num_stages=2)}),
    (1000, 33333, "float32", {"lane st2 (old default)": dict(lane_stats=True, vector_stats=False, num_stages=2)}),
    (1024, 65536, "float32", {"vector st1": dict(lane_stats=False, vector_stats=True, num_stages=1)}),
]
for rows, cols, dt, cands in CASES:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x[:256].double(), -1); terr = float((torch.softmax(x[:256], -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    fns = {}
    for n, over in [("default", {})] + list(cands.items()):
        m = load_variant("softmax", S.validate(dict(base, **over))); y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        err = float((y[:256].double() - ref).abs().max())
        if not err <= 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy {err:.3g} vs {terr:.3g}"); continue
        fns[n] = lambda m=m: m.launch(x, y)
    fns["torch.softmax"] = lambda: torch.softmax(x, -1)
    times = {n: [] for n in fns}
    for _ in range(5):
        for n, fn in fns.items():
            times[n].append(bench(fn))
    tt = statistics.median(times["torch.softmax"])
    say(f"== {rows}x{cols} {dt}: default r{base['rows_per_program']} w{base['num_warps']} b{base['block']} {base['regime']}"
        f" lane={base['lane_stats']} vector={base['vector_stats']} align={base['align']}")
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(ts)
        say(f"  {n:24s} med {t:7.2f} us {pct(t)} x torch {tt / t:.3f}  rounds {' '.join(f'{v:.2f}' for v in ts)}")
