"""Is the persistent split's slow mode tied to its workspace allocation? Re-make the
row_sync workspace several times in one process (shifting addresses) and time each."""
import os, sys, statistics, time
import torch, triton, triton.testing
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "slow.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn, rep=40: triton.testing.do_bench(fn, warmup=10, rep=rep, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name())
cases = []
for rows, cols in [(128, 262144), (16, 1048576)]:
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
    m = load_variant("softmax", default_config("softmax", SoftmaxProblem(rows, cols, "float16")))
    cases.append((f"{rows}x{cols}", x, y, m))
keep = []
for trial in range(12):
    row_sync._PARTIALS.clear()
    keep.append(torch.empty((trial * 37 + 1) * 512, dtype=torch.uint8, device="cuda"))  # shift the allocator
    if trial % 3 == 2:
        keep.append(torch.empty(3 << 20, dtype=torch.uint8, device="cuda"))
    for name, x, y, m in cases[:1]:
        m.launch(x, y)
    st = next(iter(row_sync._PARTIALS.values()))
    w, t = st.words.data_ptr(), st.tickets.data_ptr()
    res = []
    for name, x, y, m in cases:
        res.append(f"{name} {bench(lambda: m.launch(x, y)):6.1f}")
    # host cost per launch (no sync in between)
    name, x, y, m = cases[0]
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(200): m.launch(x, y)
    host = (time.perf_counter() - t0) / 200 * 1e6; torch.cuda.synchronize()
    say(f"trial {trial:2d} words {w:#x} (mod 2M {w % (2<<20):#x}) tickets {t:#x} (mod 2M {t % (2<<20):#x}) | " + " | ".join(res) + f" | host {host:.0f} us/launch")
