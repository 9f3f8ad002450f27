"""Host cost and do_bench of the persistent split, with the old or the new row_sync (argv[1])."""
import os, sys, time, statistics, importlib.util
which = sys.argv[1]
if which == "old":
    spec = importlib.util.spec_from_file_location("flashtune.gen.row_sync", os.path.join(os.path.dirname(__file__), "row_sync_old.py"))
    mod = importlib.util.module_from_spec(spec); sys.modules["flashtune.gen.row_sync"] = mod; spec.loader.exec_module(mod)
import torch, triton, triton.testing
import flashtune
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
assert (row_sync.__file__.endswith("row_sync_old.py")) == (which == "old")
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, f"after_{which}.log"), "a")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
bench = lambda fn: triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median") * 1e3
def per_call(fn, n=300):
    for _ in range(10): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(n): fn()
    t = (time.perf_counter() - t0) / n * 1e6; torch.cuda.synchronize(); return t
line = []
for rows, cols, dt in [(16, 1048576, "float16"), (16, 1048576, "bfloat16"), (128, 262144, "float16"), (128, 262144, "bfloat16")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    m = load_variant("softmax", default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    fl = lambda: flashtune.softmax(x)
    ref = torch.softmax(x.double(), -1); out = fl(); torch.cuda.synchronize()
    assert float((out.double() - ref).abs().max()) < 1e-2
    h_l, h_f = per_call(lambda: m.launch(x, y)), per_call(fl)
    tl_ = [bench(lambda: m.launch(x, y)) for _ in range(3)]; tf = [bench(fl) for _ in range(3)]
    line.append(f"{rows}x{cols} {dt[:4]}: host launch {h_l:.0f} softmax {h_f:.0f} us | do_bench launch {' '.join(f'{t:.1f}' for t in tl_)} | softmax {' '.join(f'{t:.1f}' for t in tf)}")
say(f"--- {which} ({torch.cuda.get_device_name()})")
for l in line: say("  " + l)
