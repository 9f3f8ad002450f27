"""Persistent split: more items per program (fewer programs per SM, or more splits = smaller
items) should overlap reads and writes better: with n items per program and a lag of one item,
a program reads n + 1 times the item... efficiency about n / (n + 1). Sweep programs_per_sm x
splits x block x warps on the long-row shapes; do_bench-style timing (zero_ flush), screen,
then interleaved rounds of the best against the default. one_launch is forced (splits > SMs/2
would otherwise fall back to two launches)."""
import os, statistics, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "items.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
row_sync.one_launch = lambda x, splits, persistent=False: x.is_cuda
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
S = OPS["softmax"].space
SHAPES = [(16, 1048576, "float16"), (16, 1048576, "float32"), (128, 262144, "float16"), (128, 262144, "float32")]
for rows, cols, dt in SHAPES:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x.double(), -1); terr = float((torch.softmax(x, -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    cands = {"default": base}
    for pps, splits, block, warps in itertools.product((1, 2, 4), (32, 64, 128, 256), (4096, 8192, 16384), (4, 8, 16)):
        seg = cols // splits
        if block > seg or seg // block > 2 or rows * splits < 132 * pps:
            continue
        if block * (2 if dt == "float16" else 4) // (warps * 32) < 16 or block // (warps * 32) > 64:
            continue
        cands[f"pps{pps} s{splits} b{block} w{warps}"] = dict(base, programs_per_sm=pps, splits=splits, block=block, num_warps=warps)
    mods = {}
    for n, raw in cands.items():
        try:
            m = load_variant("softmax", S.validate(raw)); y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:100]}"); continue
        err = float((y.double() - ref).abs().max())
        if not err <= 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy {err:.3g} vs torch {terr:.3g}"); continue
        mods[n] = m
    screen = sorted((bench(lambda m=m: m.launch(x, y)), n) for n, m in mods.items())
    say(f"== {rows}x{cols} {dt}: {len(mods)} configs; screen (us):")
    for t, n in screen[:12]:
        say(f"  {n:26s} {t:6.2f} {pct(t)}")
    say("  default screen", [f"{t:.2f}" for t, n in screen if n == "default"])
    top = [n for _, n in screen[:4]] + (["default"] if "default" not in [n for _, n in screen[:4]] else [])
    times = {n: [] for n in top + ["copy_"]}
    for _ in range(5):
        for n in top:
            times[n].append(bench(lambda m=mods[n]: m.launch(x, y)))
        times["copy_"].append(bench(lambda: y.copy_(x)))
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(ts)
        say(f"  R {n:26s} med {t:6.2f} us {pct(t)}  rounds {' '.join(f'{v:.2f}' for v in ts)}")
