"""Does do_bench's L2 flush (a 256 MB zero_, which leaves L2 full of dirty lines) cost our
kernels the write-back of those lines, and do eviction hints avoid it? Times copy, read-only
and row-softmax kernels with load/store eviction policies under two flushes: zero_ (do_bench's)
and a read of the same 256 MB (L2 left clean)."""
import os, statistics, itertools
import torch, triton, triton.testing
import triton.language as tl
import flashtune
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config
OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "dirty.log"), "w")
def say(*a):
    s = " ".join(str(v) for v in a); print(s, flush=True); log.write(s + "\n"); log.flush()
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
cache = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device="cuda")
sink = torch.empty((), dtype=torch.int64, device="cuda")
FLUSH = {"zero": lambda: cache.zero_(), "read": lambda: torch.sum(cache, dim=(0,), out=sink)}
def timeit(fn, flush, reps=60):
    fn(); torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for a, b in ev:
        flush(); a.record(); fn(); b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev) * 1e3
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
COPY = 2 * big.numel() / (triton.testing.do_bench(lambda: big2.copy_(big), return_mode="median") * 1e-3) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s (do_bench)"); del big, big2

@triton.jit
def copy_k(x, y, n, BLOCK: tl.constexpr, LEV: tl.constexpr, SEV: tl.constexpr, SCM: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m, eviction_policy=LEV)
    tl.store(y + offs, v, mask=m, eviction_policy=SEV, cache_modifier=SCM)

@triton.jit
def read_k(x, out, n, BLOCK: tl.constexpr, LEV: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs, mask=offs < n, other=0.0, eviction_policy=LEV).to(tl.float32)
    tl.store(out + tl.program_id(0), tl.sum(v, 0))

@triton.jit
def row_k(x, y, n_rows, N: tl.constexpr, R: tl.constexpr, LEV: tl.constexpr, SEV: tl.constexpr):
    rows = tl.program_id(0) * R + tl.arange(0, R)
    offs = rows[:, None].to(tl.int64) * N + tl.arange(0, N)[None, :]
    mask = rows[:, None] < n_rows
    v = tl.load(x + offs, mask=mask, other=0.0, eviction_policy=LEV).to(tl.float32)
    mx = tl.max(v, 1)
    e = tl.exp2((v - mx[:, None]) * 1.4426950408889634)
    tl.store(y + offs, (e / tl.sum(e, 1)[:, None]).to(y.dtype.element_ty), mask=mask, eviction_policy=SEV)

POL = ("", "evict_first", "evict_last")
rows_tab = []
for rows, cols, dt in [(16, 1048576, "float16"), (65536, 128, "float32"), (128, 262144, "float16"), (16, 1048576, "float32")]:
    x = torch.randn(rows, cols, device="cuda", dtype=getattr(torch, dt)); y = torch.empty_like(x)
    n = x.numel(); nbytes = n * x.element_size()
    pct = lambda us: f"{2 * nbytes / (us * 1e-6) / 1e9 / COPY:5.0%}"
    say(f"== {rows}x{cols} {dt} ({nbytes >> 20} MiB)")
    fns = {"torch copy_": lambda: y.copy_(x), "torch.softmax": lambda: torch.softmax(x, -1),
           "flashtune.softmax": lambda: flashtune.softmax(x)}
    B = 8192 if x.element_size() == 2 else 4096
    for lev, sev, scm in [("", "", ""), ("evict_first", "", ""), ("evict_first", "evict_first", ""),
                          ("", "evict_first", ""), ("", "", ".cs"), ("evict_first", "", ".cs"), ("evict_last", "", "")]:
        fns[f"copy L[{lev}] S[{sev}{scm}]"] = lambda lev=lev, sev=sev, scm=scm: copy_k[(triton.cdiv(n, B),)](
            x, y, n, BLOCK=B, LEV=lev, SEV=sev, SCM=scm, num_warps=8)
    out = torch.empty(triton.cdiv(n, B), device="cuda")
    for lev in POL:
        fns[f"read-only L[{lev}] (1 pass)"] = lambda lev=lev: read_k[(triton.cdiv(n, B),)](x, out, n, BLOCK=B, LEV=lev, num_warps=8)
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dt)))
    say("  default config", base)
    if base["regime"] != "row":
        for hint in (True, False):
            m = load_variant("softmax", OPS["softmax"].space.validate(dict(base, l2_hint=hint)))
            fns[f"ft default l2_hint={hint}"] = lambda m=m: m.launch(x, y)
    if cols <= 1024:
        for R, W in ((8, 1), (8, 2), (16, 4), (32, 4), (32, 8)):
            for lev, sev in itertools.product(POL[:2], POL[:2]):
                fns[f"row_k R{R} w{W} L[{lev}] S[{sev}]"] = lambda R=R, W=W, lev=lev, sev=sev: row_k[(triton.cdiv(rows, R),)](
                    x, y, rows, N=cols, R=R, LEV=lev, SEV=sev, num_warps=W)
    res = {k: {f: [] for f in FLUSH} for k in fns}
    for rnd in range(3):
        for k, fn in fns.items():
            for f, fl in FLUSH.items():
                res[k][f].append(timeit(fn, fl))
        res_db = None
    for k in fns:
        z = statistics.median(res[k]["zero"]); r = statistics.median(res[k]["read"])
        mult = 0.5 if "1 pass" in k else 1.0
        say(f"  {k:34s} zero-flush {z:7.2f} us ({pct(z / mult)})  read-flush {r:7.2f} us ({pct(r / mult)})  ratio {z / r:.2f}")
    tsz = statistics.median(res["torch.softmax"]["zero"])
    say(f"  do_bench torch.softmax {triton.testing.do_bench(lambda: torch.softmax(x, -1), return_mode='median') * 1e3:.2f} us;"
        f" flashtune.softmax {triton.testing.do_bench(lambda: flashtune.softmax(x), return_mode='median') * 1e3:.2f} us")
