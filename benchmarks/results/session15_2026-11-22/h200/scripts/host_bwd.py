"""Host cost per call and do_bench time of flashtune's eager backward on 65536x128, under the
FLASHTUNE_DB this process was given (missing file vs tuned database)."""
import os, sys, time, torch, triton
from triton.testing import do_bench
from flashtune.dispatch.runtime import RUNTIME
print(sys.argv[1], os.environ.get("FLASHTUNE_DB"), flush=True)
for log in (False, True):
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        x = torch.randn(65536, 128, device="cuda", dtype=dt)
        y = (torch.log_softmax if log else torch.softmax)(x, -1); dy = torch.randn_like(y)
        RUNTIME.backward(y, dy, -1, log); torch.cuda.synchronize()
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            RUNTIME.backward(y, dy, -1, log)
        host = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        ms = [do_bench(lambda: RUNTIME.backward(y, dy, -1, log), warmup=25, rep=100, return_mode="median") for _ in range(3)]
        print(f"{sys.argv[1]} log={int(log)} {str(dt)[6:]:>8} host {host:6.1f} us/call  do_bench {' '.join(f'{m*1e3:6.1f}' for m in ms)} us", flush=True)
