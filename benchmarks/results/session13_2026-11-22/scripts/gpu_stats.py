"""Long rows, many rows: per-lane vs per-vector loop statistics (online regime) for fp32 (and
bf16 for reference), and a position check (the same kernel timed at several points of a
sequence). do_bench medians, L2 flushed, interleaved rounds."""
import os, statistics, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "stats.log"), "a")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
S = OPS["softmax"].space
for rows, cols, dt in [(1024, 65536, "float32"), (4096, 50257, "float32"), (1024, 65536, "bfloat16"), (2048, 50000, "float32"), (512, 131072, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x[:64].double(), -1); terr = float((torch.softmax(x[:64], -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    cfgs = {"default": base}
    for block, warps, stats, stages in itertools.product((8192, 16384), (16, 32), ("lane", "vector"), (1, 2)):
        cfgs[f"b{block} w{warps} {stats} st{stages}"] = dict(base, block=block, num_warps=warps, lane_stats=stats == "lane",
                                                             vector_stats=stats == "vector", num_stages=stages)
    fns = {}
    for n, cfg in cfgs.items():
        if n != "default" and cfg == base:
            continue
        try:
            m = load_variant("softmax", S.validate(cfg)); y.zero_(); m.launch(x, y); torch.cuda.synchronize()
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:100]}"); continue
        err = float((y[:64].double() - ref).abs().max())
        if not err <= 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy {err:.3g} vs torch {terr:.3g}"); continue
        fns[n] = lambda m=m: m.launch(x, y)
    screen = sorted((bench(fn), n) for n, fn in fns.items())
    say(f"== {rows}x{cols} {dt}: default {' '.join(f'{k}={v}' for k, v in base.items() if v not in (0, False, 1) or k == 'regime')}")
    for t, n in screen[:6]:
        say(f"  S {n:28s} {t:7.1f} us {pct(t)}")
    say("  S default", [f"{t:.1f} {pct(t)}" for t, n in screen if n == "default"])
    bl = min((t, n) for t, n in screen if "lane" in n)
    bv = min((t, n) for t, n in screen if "vector" in n)
    say(f"  S best lane {bl[1]} {bl[0]:.1f}  best vector {bv[1]} {bv[0]:.1f}  vector/lane {bv[0] / bl[0]:.3f}")
# position check: the same kernels, several positions
x = torch.randn(65536, 128, device="cuda"); y = torch.empty_like(x)
m8 = load_variant("softmax", S.validate(dict(default_config("softmax", SoftmaxProblem(65536, 128, "float32")), rows_per_program=8, num_warps=1)))
md = load_variant("softmax", S.validate(dict(default_config("softmax", SoftmaxProblem(65536, 128, "float32")))))
seq = [("r8w1", lambda: m8.launch(x, y)), ("default", lambda: md.launch(x, y)), ("torch", lambda: torch.softmax(x, -1)),
       ("copy_", lambda: y.copy_(x))] * 3
res = {}
for n, fn in seq:
    res.setdefault(n, []).append(bench(fn))
say("== position check 65536x128 fp32 (4 kernels, 3 passes):")
for n, ts in res.items():
    say(f"  {n:8s} {' '.join(f'{t:.2f}' for t in ts)}")
