"""Screen the phased persistent split against the default (and a same-size copy), then
interleaved A/B rounds of the best candidates."""
import os, sys, statistics, itertools, time
sys.path.insert(0, os.path.dirname(__file__))
import torch, triton, triton.testing
import phased
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "phased.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn, rep=40: triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big), 100) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
SHAPES = [(16, 1048576, "float16"), (16, 1048576, "float32"), (128, 262144, "float16"),
          (16, 1048576, "bfloat16"), (128, 262144, "float32"), (1024, 65536, "float16")]
GRID = [dict(block=b, per_sm=p, warps=w, stages=s) for b, p, w, s in itertools.product(
    (2048, 4096, 8192), (1, 2, 3, 4), (4, 8), (1, 3))]
t0 = time.time()
summary = []
for rows, cols, dtype in SHAPES:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype)) * 3; y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    torch_err = float((torch.softmax(x, -1).double() - ref).abs().max())
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    dflt = load_variant("softmax", default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
    fns = {"default": lambda: dflt.launch(x, y)}
    screen = {}
    for g in GRID:
        name = "b{block} p{per_sm} w{warps} s{stages}".format(**g)
        fn = lambda g=g: phased.launch(x, y, **g)
        try:
            y.zero_(); k = fn(); torch.cuda.synchronize()
            if g["per_sm"] * g["warps"] * 32 * k.n_regs > 65536 or g["per_sm"] * k.metadata.shared > 227 * 1024:
                say(f"  {name}: skipped, {k.n_regs} registers, {k.metadata.shared} B shared"); continue
        except Exception as e:
            say(f"  {name}: {type(e).__name__} {str(e)[:80]}"); continue
        err = float((y.double() - ref).abs().max())
        if not err <= 1.1 * torch_err + 1e-6:
            say(f"  {name}: ERR {err:.1e} vs torch {torch_err:.1e}"); continue
        screen[name] = (bench(fn), fn)
    dt = bench(fns["default"])
    best = sorted(screen.items(), key=lambda kv: kv[1][0])[:6]
    say(f"== {rows}x{cols} {dtype} screen (default {dt:.1f} us {frac(dt):.0%}, {time.time()-t0:.0f} s):")
    for n, (t, _) in sorted(screen.items(), key=lambda kv: kv[1][0])[:12]:
        say(f"    {n:22s} {t:6.1f} us ({frac(t):.0%})")
    for n, (t, fn) in best:
        fns[n] = fn
    times = {n: [] for n in fns}; copies = []
    for r in range(6):
        copies.append(bench(lambda: y.copy_(x)))
        for n, fn in fns.items():
            times[n].append(bench(fn))
    cm = statistics.median(copies)
    say(f"  interleaved, 6 rounds: same-size copy {cm:.1f} us ({frac(cm):.0%})")
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        med = statistics.median(ts)
        say(f"  {n:22s} med {med:6.1f} ({frac(med):.0%}) min {min(ts):6.1f} rounds {' '.join(f'{t:.1f}' for t in ts)}")
    bn = min((n for n in times if n != "default"), key=lambda n: statistics.median(times[n]))
    d = statistics.median(times["default"]); b = statistics.median(times[bn])
    summary.append(f"| {rows}x{cols} {dtype} | {cm:.1f} ({frac(cm):.0%}) | {d:.1f} ({frac(d):.0%}) | {b:.1f} ({frac(b):.0%}) | {bn} |")
    del x, y, ref; torch.cuda.empty_cache()
say("\n| shape | copy | default | best phased | |")
for line in summary:
    say(line)
