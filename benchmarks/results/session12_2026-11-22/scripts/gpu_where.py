"""Where does the time go: do_bench of the Python launch, of a CUDA-graph replay, and the
kernel's own duration from the profiler (L2 flushed before each), next to a same-size copy."""
import os, sys, statistics
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "where.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn, rep=60: triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (bench(lambda: big2.copy_(big), 100) * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")

def kernel_us(fn, n=30):
    """Median GPU duration of the kernels fn launches (profiler), L2 flushed before each call."""
    from torch.profiler import profile, ProfilerActivity
    for _ in range(3): fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            flush.zero_(); fn()
        torch.cuda.synchronize()
    evs = [e for e in prof.events() if e.device_type.name == "CUDA" and "zero" not in e.name.lower() and "fill" not in e.name.lower()]
    names = sorted({e.name for e in evs})
    per = {}
    for e in evs:
        per.setdefault(e.name, []).append(e.device_time if hasattr(e, "device_time") else e.cuda_time)
    return {nm[:40]: statistics.median(v) for nm, v in per.items()}

def graph_of(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g

for rows, cols, dtype in [(16, 1048576, "float16"), (16, 1048576, "float32"), (128, 262144, "float16"), (1024, 65536, "float16"), (4096, 50257, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dtype)); y = torch.empty_like(x)
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    cfg = default_config("softmax", SoftmaxProblem(rows, cols, dtype))
    m = load_variant("softmax", cfg)
    fns = {"softmax": lambda: m.launch(x, y), "copy": lambda: y.copy_(x)}
    say(f"== {rows}x{cols} {dtype} regime {cfg['regime']} block {cfg['block']} splits {cfg['splits']} pps {cfg.get('programs_per_sm')} warps {cfg['num_warps']}")
    for name, fn in fns.items():
        g = graph_of(fn)
        db = [bench(fn) for _ in range(3)]
        dg = [bench(g.replay) for _ in range(3)]
        ku = kernel_us(fn)
        say(f"  {name:8s} do_bench {statistics.median(db):6.1f} ({frac(statistics.median(db)):.0%})  graph {statistics.median(dg):6.1f} ({frac(statistics.median(dg)):.0%})  kernels " +
            ", ".join(f"{k} {v:.1f}" for k, v in ku.items()))
    del x, y; torch.cuda.empty_cache()
