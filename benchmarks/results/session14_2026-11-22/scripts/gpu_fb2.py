"""Host time of one forward + backward step (4096x16384 fp16): enqueue time per step without
syncing, and a cProfile of ours sorted by self time."""
import cProfile, io, pstats, time, torch
import flashtune
import flashtune.dispatch.library  # noqa: F401
x = torch.randn(4096, 16384, device="cuda", dtype=torch.float16)
dy = torch.randn_like(x)
xg = x.detach().requires_grad_(True)
def step(f):
    xg.grad = None
    f(xg, -1).backward(dy)
for name, f in (("ours", flashtune.softmax), ("torch", torch.softmax)):
    for _ in range(5):
        step(f)
    torch.cuda.synchronize()
    t = time.perf_counter()
    ts = []
    for _ in range(20):
        t0 = time.perf_counter(); step(f); ts.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    total = time.perf_counter() - t
    ts.sort()
    print(f"{name}: per step wall {total/20*1e6:.0f} us; host time per step min/median/max {ts[0]*1e6:.0f}/{ts[10]*1e6:.0f}/{ts[-1]*1e6:.0f} us", flush=True)
pr = cProfile.Profile()
pr.enable()
for _ in range(20):
    step(flashtune.softmax)
torch.cuda.synchronize()
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(15)
print(s.getvalue())
