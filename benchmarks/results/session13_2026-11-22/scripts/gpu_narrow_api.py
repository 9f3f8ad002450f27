"""flashtune.softmax (tuned winners, public API) against torch.softmax on narrow fp32 rows,
interleaved rounds of do_bench medians (L2 flushed)."""
import os, statistics, json, sqlite3
import torch, triton, triton.testing
import flashtune
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "narrow_api.log"), "a")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3
db = os.environ["FLASHTUNE_DB"].replace("sqlite:///", "")
for cfg, ms, dt, bucket in sqlite3.connect(db).execute("select config, median_ms, dtype, bucket from ft_v1_winners"):
    say("winner", dt, bucket, f"{ms * 1e3:.2f} us", {k: v for k, v in json.loads(cfg).items() if v not in (False, 0)})
for rows, cols in [(65536, 128), (16384, 1024)]:
    x = torch.randn(rows, cols, device="cuda")
    times = {"flashtune.softmax": [], "torch.softmax": []}
    for _ in range(6):
        times["flashtune.softmax"].append(bench(lambda: flashtune.softmax(x, -1)))
        times["torch.softmax"].append(bench(lambda: torch.softmax(x, -1)))
    f, t = statistics.median(times["flashtune.softmax"]), statistics.median(times["torch.softmax"])
    say(f"== {rows}x{cols} float32: flashtune {f:.2f} us, torch {t:.2f} us, x torch {t / f:.3f}")
    for n, ts in times.items():
        say(f"  {n:18s} {' '.join(f'{v:.2f}' for v in ts)}")
