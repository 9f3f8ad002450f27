"""Host cost per call of the autograd path (fwd + bwd) vs torch, on a small problem, and a
cProfile of ours to see where the time goes."""
import cProfile, pstats, time, io, torch
import flashtune
import flashtune.dispatch.library  # noqa: F401
print(torch.cuda.get_device_name(), torch.__version__)
x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
dy = torch.randn_like(x)
xg = x.detach().requires_grad_(True)

def per_call(fn, n=300):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6

def fb(f):
    def run():
        xg.grad = None
        f(xg, -1).backward(dy)
    return run
y = torch.softmax(x, -1)
cases = {
    "torch.softmax inference": lambda: torch.softmax(x, -1),
    "flashtune.softmax inference": lambda: flashtune.softmax(x, -1),
    "torch.ops.flashtune.softmax": lambda: torch.ops.flashtune.softmax(x, -1),
    "torch.ops.flashtune.softmax_backward": lambda: torch.ops.flashtune.softmax_backward(y, dy, -1),
    "aten._softmax_backward_data": lambda: torch.ops.aten._softmax_backward_data(dy, y, -1, x.dtype),
    "torch fwd+bwd": fb(torch.softmax),
    "flashtune fwd+bwd": fb(flashtune.softmax),
    "flashtune.softmax requires_grad fwd only": lambda: flashtune.softmax(xg, -1),
}
for k, f in cases.items():
    print(f"{k:45s} {per_call(f):8.1f} us/call", flush=True)
pr = cProfile.Profile()
f = fb(flashtune.softmax)
pr.enable()
for _ in range(200):
    f()
torch.cuda.synchronize()
pr.disable()
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(35)
print(s.getvalue())
s = io.StringIO()
pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25)
print(s.getvalue())
