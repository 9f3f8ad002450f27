"""Does the last partial wave of rows cost time? flashtune.softmax (default configs, no tuned DB)
on row counts around whole waves of 132 SMs, us per row. Interleaved rounds, do_bench medians."""
import os, torch, triton
import flashtune
os.environ.pop("FLASHTUNE_DB", None)
from triton.testing import do_bench
print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
cases = [("float32", 50257, (3960, 4096, 4224)), ("bfloat16", 50257, (3960, 4096, 4224)),
         ("float32", 65536, (924, 1024, 1056, 1188))]
res = {}
for rnd in range(3):
    for dt, cols, rows_list in cases:
        for rows in rows_list:
            x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt))
            flashtune.softmax(x)
            ms = do_bench(lambda: flashtune.softmax(x), warmup=25, rep=200, return_mode="median")
            y = torch.empty_like(x)
            cp = do_bench(lambda: y.copy_(x), warmup=25, rep=200, return_mode="median")
            res.setdefault((dt, cols, rows), []).append((ms, cp))
print(f"{'dtype':>9} {'cols':>6} {'rows':>5} {'waves':>6} {'us':>8} {'us/row':>7} {'copy us':>8} {'% copy':>6}")
for (dt, cols, rows), v in res.items():
    ms = sorted(a for a, _ in v)[1]; cp = sorted(b for _, b in v)[1]
    print(f"{dt:>9} {cols:>6} {rows:>5} {rows/132:6.2f} {ms*1e3:8.1f} {ms*1e3/rows:7.4f} {cp*1e3:8.1f} {cp/ms*100:6.1f}")
