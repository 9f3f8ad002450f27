"""Repeat: log_softmax backward 128x262144 through flashtune's eager backward (default config),
fp16 and bf16 alternated, do_bench median / p20 / p80 each round; host cost per call."""
import time, torch
from triton.testing import do_bench
from flashtune.dispatch.runtime import RUNTIME
aten = torch.ops.aten
pairs = {}
for dt in (torch.float16, torch.bfloat16):
    x = torch.randn(128, 262144, device="cuda", dtype=dt)
    y = torch.log_softmax(x, -1); dy = torch.randn_like(y)
    RUNTIME.backward(y, dy, -1, True)
    pairs[dt] = (y, dy)
for rnd in range(4):
    for dt, (y, dy) in pairs.items():
        q = do_bench(lambda: RUNTIME.backward(y, dy, -1, True), warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        t = do_bench(lambda: aten._log_softmax_backward_data(dy, y, -1, dt), warmup=25, rep=100, return_mode="median")
        print(f"round {rnd} {str(dt)[6:]:>8} flashtune {q[0]*1e3:6.1f} (p20 {q[1]*1e3:6.1f} p80 {q[2]*1e3:6.1f}) torch {t*1e3:6.1f} us", flush=True)
y, dy = pairs[torch.float16]
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(200):
    RUNTIME.backward(y, dy, -1, True)
t1 = time.perf_counter(); torch.cuda.synchronize()
print(f"enqueue {((t1 - t0) / 200) * 1e6:.1f} us/call (host, queue not full: 200 calls)")
