"""flashtune.softmax (public API, default configs: empty tuning cache) timed two ways: do_bench
(L2 flushed before each call) and 200 back-to-back calls between two CUDA events (no flush;
what a model sees, host launch cost included), next to torch.softmax."""
import os, statistics
import torch, triton, triton.testing
import flashtune
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "backtoback.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=60, return_mode="median") * 1e3
def b2b(fn, n=200):
    for _ in range(10): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    s.record()
    for _ in range(n): fn()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / n
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
say("| shape | dtype | flashtune do_bench | flashtune back-to-back | torch do_bench | torch back-to-back |")
say("|---|---|---|---|---|---|")
for rows, cols in ((4, 1048576), (16, 1048576), (32, 262144), (128, 262144), (1024, 65536), (4096, 128)):
    for dtype in (torch.float16, torch.float32):
        x = torch.randn(rows, cols, device="cuda", dtype=dtype)
        f = lambda: flashtune.softmax(x, -1)
        t = lambda: torch.softmax(x, -1)
        r = [statistics.median([g() for _ in range(3)]) for g in (lambda: bench(f), lambda: b2b(f), lambda: bench(t), lambda: b2b(t))]
        say(f"| {rows}x{cols} | {str(dtype)[6:]} | " + " | ".join(f"{v:.1f}" for v in r) + " |")
