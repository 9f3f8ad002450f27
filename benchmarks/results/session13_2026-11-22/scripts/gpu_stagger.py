"""Persistent split, staggered lag: STAGGER 0 = every program reads its next item before
finishing the previous one (reads of all programs, then writes: little overlap); 1 = even
programs finish each item right after reading it (lag 0), odd ones keep lag 1, so one half
writes while the other reads; 2 = every program lag 0. do_bench timing (zero_ flush), screen,
then interleaved rounds. one_launch forced."""
import os, statistics, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "stagger.log"), "w")
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
def runner(m, x, y, st):
    def fn():
        os.environ["FT_STAGGER"] = st
        m.launch(x, y)
    return fn
for rows, cols, dt in SHAPES:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    nbytes = x.numel() * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:4.0%}"
    ref = torch.softmax(x.double(), -1); terr = float((torch.softmax(x, -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    cfgs = {"default": base}
    for pps, splits in itertools.product((2, 4), (32, 64, 128, 256)):
        seg = cols // splits
        if rows * splits < 132 * pps:
            continue
        for block in (4096, 8192, 16384):
            if block > seg or seg // block > 2:
                continue
            cfgs[f"pps{pps} s{splits} b{block} w8"] = dict(base, programs_per_sm=pps, splits=splits, block=block, num_warps=8)
    fns = {}
    for n, raw in cfgs.items():
        try:
            m = load_variant("softmax", S.validate(raw))
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:100]}"); continue
        for st in ("0", "1", "2"):
            fn = runner(m, x, y, st)
            try:
                y.zero_(); fn(); torch.cuda.synchronize()
            except Exception as ex:
                say(f"  {n} st{st}: {type(ex).__name__} {str(ex)[:100]}"); continue
            err = float((y.double() - ref).abs().max())
            if not err <= 1.1 * terr + 1e-6:
                say(f"  {n} st{st}: accuracy {err:.3g} vs torch {terr:.3g}"); continue
            fns[f"{n} st{st}"] = fn
    screen = sorted((bench(fn), n) for n, fn in fns.items())
    say(f"== {rows}x{cols} {dt}: {len(fns)} runs; screen (us):")
    for t, n in screen:
        say(f"  {n:30s} {t:6.2f} {pct(t)}")
    top = [n for _, n in screen[:4]] + [n for n in ("default st0",) if n not in [n for _, n in screen[:4]]]
    times = {n: [] for n in top + ["copy_"]}
    for _ in range(5):
        for n in top:
            times[n].append(bench(fns[n]))
        times["copy_"].append(bench(lambda: y.copy_(x)))
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(ts)
        say(f"  R {n:30s} med {t:6.2f} us {pct(t)}  rounds {' '.join(f'{v:.2f}' for v in ts)}")
