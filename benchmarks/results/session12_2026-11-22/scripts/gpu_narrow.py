"""Narrow rows (65536x128, 16384x1024) against torch.softmax: row-regime configs, interleaved
rounds, public API path for the default and the tuned winner is not used (no database)."""
import os, sys, statistics, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "narrow.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name())
S = OPS["softmax"].space
for rows, cols, dt in [(65536, 128, "float32"), (65536, 128, "float16"), (16384, 1024, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1); terr = float((torch.softmax(x, -1).double() - ref).abs().max())
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    cands = {"default": base}
    for r, w, e in itertools.product((1, 2, 4, 8, 16, 32, 64), (1, 2, 4, 8, 16), (True, False)):
        if cols * r > 65536 or cols * r < 32 * w:
            continue
        cands[f"row r{r} w{w} exp2={e}"] = dict(base, regime="row", block=cols, rows_per_program=r, num_warps=w, exp2=e)
    mods = {}
    for n, raw in cands.items():
        try:
            m = load_variant("softmax", S.validate(raw)); m.launch(x, y); torch.cuda.synchronize()
        except Exception as ex:
            say(f"  {n}: {type(ex).__name__} {str(ex)[:80]}"); continue
        if float((y.double() - ref).abs().max()) > 1.1 * terr + 1e-6:
            say(f"  {n}: accuracy"); continue
        mods[n] = m
    screen = sorted((bench(lambda m=m: m.launch(x, y)), n) for n, m in mods.items())
    top = [n for _, n in screen[:5]] + (["default"] if "default" not in [n for _, n in screen[:5]] else [])
    fns = {n: (lambda m=mods[n]: m.launch(x, y)) for n in top}
    fns["torch.softmax"] = lambda: torch.softmax(x, -1)
    times = {n: [] for n in fns}
    for _ in range(6):
        for n, fn in fns.items():
            times[n].append(bench(fn))
    tt = statistics.median(times["torch.softmax"])
    say(f"== {rows}x{cols} {dt}: torch.softmax {tt:.2f} us; screen best {screen[0][1]} {screen[0][0]:.2f}")
    for n, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        say(f"  {n:28s} med {statistics.median(ts):6.2f} us  x torch {tt / statistics.median(ts):.3f}  rounds {' '.join(f'{t:.2f}' for t in ts)}")
