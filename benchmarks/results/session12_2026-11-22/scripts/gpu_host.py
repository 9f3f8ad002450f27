"""Host cost per call of the persistent split: the generated launch(), and flashtune.softmax."""
import os, sys, time, cProfile, pstats, io, statistics
import torch, triton, triton.testing
import flashtune
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "host.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn, rep=40: triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "cpu", open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0])
def host_us(fn, n=300):
    for _ in range(5): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): fn()
    t = (time.perf_counter() - t0) / n * 1e6; torch.cuda.synchronize(); return t
for rows, cols, dt in [(16, 1048576, "float16"), (128, 262144, "float16"), (1024, 65536, "float16"), (2, 4096, "float16")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    m = load_variant("softmax", default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    fl = lambda: flashtune.softmax(x)
    cp = lambda: y.copy_(x)
    tor = lambda: torch.softmax(x, -1)
    say(f"== {rows}x{cols}: host us/call launch() {host_us(lambda: m.launch(x, y)):.1f}, flashtune.softmax {host_us(fl):.1f}, copy_ {host_us(cp):.1f}, torch.softmax {host_us(tor):.1f}")
    say(f"   do_bench launch() {bench(lambda: m.launch(x, y)):.1f}, flashtune.softmax {bench(fl):.1f}, copy {bench(cp):.1f}")
    if rows == 16:
        pr = cProfile.Profile(); pr.enable()
        for _ in range(300): m.launch(x, y)
        pr.disable(); torch.cuda.synchronize()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25); say(s.getvalue()[:6000])
        pr = cProfile.Profile(); pr.enable()
        for _ in range(300): fl()
        pr.disable(); torch.cuda.synchronize()
        s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20); say(s.getvalue()[:5000])
