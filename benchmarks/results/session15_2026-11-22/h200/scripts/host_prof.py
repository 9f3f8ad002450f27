"""Host cost per call (tiny tensors, so the GPU never limits) of flashtune's forward, its eager
backward, the backward plan and the bare launch; then a cProfile of the backward loop."""
import cProfile, pstats, time, torch
import flashtune
from flashtune.dispatch.runtime import RUNTIME

def per_call(fn, n=5000):
    fn(); torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return t

aten = torch.ops.aten
for dt in (torch.float16, torch.float32):
    x = torch.randn(64, 128, device="cuda", dtype=dt)
    y = torch.softmax(x, -1); dy = torch.randn_like(y)
    RUNTIME.backward(y, dy, -1, False)
    key = (y.shape, y.stride(), dy.stride(), y.dtype, y.device, 1)
    plan = RUNTIME.backward_plans["softmax"][key]
    dx = torch.empty_like(y)
    rows = [("flashtune.softmax", lambda: flashtune.softmax(x, -1)),
            ("RUNTIME.backward", lambda: RUNTIME.backward(y, dy, -1, False)),
            ("backward plan", lambda: plan(y, dy)),
            ("plan.launch", lambda: plan.launch(y, dy, dx)),
            ("aten backward", lambda: aten._softmax_backward_data(dy, y, -1, dt)),
            ("torch.softmax", lambda: torch.softmax(x, -1))]
    for name, fn in rows:
        print(f"{str(dt)[6:]:>8} {name:>18}: {min(per_call(fn) for _ in range(3)):6.1f} us/call", flush=True)
prof = cProfile.Profile()
prof.enable()
for _ in range(2000):
    RUNTIME.backward(y, dy, -1, False)
prof.disable()
torch.cuda.synchronize()
pstats.Stats(prof).sort_stats("tottime").print_stats(14)
