"""4096x50257 (odd width, rows not 16-byte aligned): online-regime configs for fp32 and bf16,
screened by do_bench, then interleaved rounds of the best against the default."""
import os, statistics, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "wide.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
S = OPS["softmax"].space
for rows, cols, dt in [(4096, 50257, "float32"), (4096, 50257, "bfloat16")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x[:64].double(), -1); terr = float((torch.softmax(x[:64], -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    cfgs = {"default": base}
    for block, warps, stats, align, stages in itertools.product((8192, 16384), (16, 32), ("lane", "vector"), (False, True), (1, 2)):
        cfgs[f"b{block} w{warps} {stats} align={align} st{stages}"] = dict(
            base, regime="online", block=block, num_warps=warps, lane_stats=stats == "lane",
            vector_stats=stats == "vector", max_pass=False, align=align, num_stages=stages, l2_hint=True, resident=0)
    fns = {}
    for n, cfg in cfgs.items():
        try:
            m = load_variant("softmax", S.validate(cfg)); y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:100]}"); continue
        err = float((y[:64].double() - ref).abs().max())
        if not err <= 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy {err:.3g} vs torch {terr:.3g}"); continue
        fns[n] = lambda m=m: m.launch(x, y)
    screen = sorted((bench(fn), n) for n, fn in fns.items())
    say(f"== {rows}x{cols} {dt}: default {base}")
    for t, n in screen[:10]:
        say(f"  S {n:36s} {t:7.1f} us {pct(t)}")
    say("  S default", [f"{t:.1f} {pct(t)}" for t, n in screen if n == "default"])
    top = [n for _, n in screen[:3]] + (["default"] if "default" not in [n for _, n in screen[:3]] else [])
    times = {n: [] for n in top}
    times["torch.softmax"] = []
    fns["torch.softmax"] = lambda: torch.softmax(x, -1)
    for _ in range(3):
        for n in times:
            times[n].append(bench(fns[n]))
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(ts)
        say(f"  R {n:36s} med {t:7.1f} us {pct(t)}  rounds {' '.join(f'{v:.1f}' for v in ts)}")
