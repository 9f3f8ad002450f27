"""H200: online-regime sweep for the long-row shapes; persistent split with more programs per SM."""
import os, itertools
import torch, triton, triton.testing
from flashtune.gen import load_variant, row_sync
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "sweep.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3


def persistent(x, y, s, b, w, p):
    raw = dict(default_config("softmax", SoftmaxProblem(*x.shape, "float16")))
    raw.update(regime="split", fused=True, programs_per_sm=4, splits=s, block=b, num_warps=w,
               num_stages=1, l2_hint=True, lane_stats=False, align=False, resident=0,
               max_pass=False, rows_per_program=1)
    mod = load_variant("softmax", OPS["softmax"].space.validate(raw))
    kern = [getattr(mod, k) for k in dir(mod) if k.endswith("_persistent")][0]
    n_rows, n_cols = x.shape
    seg_len = triton.cdiv(triton.cdiv(n_cols, s), b) * b
    n_items = n_rows * s
    n_p = min(n_items, p * SMS)

    def go():
        with row_sync.polled_partials(x.device, n_items) as ws:
            kern[(n_p,)](x, y, ws.slots, ws.stale, ws.tickets, n_cols, x.stride(0), y.stride(0),
                         seg_len, n_items, ws.n_stale, n_p, BLOCK=b, SPLITS=s,
                         MAX_POLLS=row_sync.MAX_POLLS, num_warps=w, num_stages=1)
    return go


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB {copy_gbs:.0f} GB/s"); del big, big2

for shape in ((4096, 50257), (1024, 65536)):
    x = torch.randn(*shape, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
    ref = torch.softmax(x.float(), -1)
    f = lambda us: f"{us:6.1f} ({2 * x.numel() * 2 / (us * 1e-6) / 1e9 / copy_gbs:.0%})"
    base = dict(default_config("softmax", SoftmaxProblem(*shape, "float16")))
    mod = load_variant("softmax", OPS["softmax"].space.validate(base))
    say(f"{shape}: copy {f(bench(lambda: y.copy_(x)))} default {f(bench(lambda: mod.launch(x, y)))} {base}")
    rows = []
    for block, warps, stages, lane in itertools.product((4096, 8192, 16384), (4, 8, 16, 32), (1, 2, 3), (True, False)):
        if block // (warps * 32) < 4 or (not lane and stages != 2):
            continue
        raw = dict(base, block=block, num_warps=warps, num_stages=stages, lane_stats=lane)
        try:
            cfg = OPS["softmax"].space.validate(raw)
            m = load_variant("softmax", cfg)
            y.zero_(); m.launch(x, y); torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max())
            t = bench(lambda: m.launch(x, y))
            rows.append((t, f"b{block} w{warps} st{stages} lane{int(lane)}: {f(t)} err {err:.0e}"))
        except Exception as e:
            say(f"  b{block} w{warps} st{stages} lane{int(lane)}: FAILED {type(e).__name__} {str(e)[:100]}")
    for t, line in sorted(rows)[:12]:
        say("  " + line)
    say(f"  ({len(rows)} configs; slowest {max(rows)[0]:.1f})")
    del x, y, ref; torch.cuda.empty_cache()

x = torch.randn(128, 262144, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
ref = torch.softmax(x.float(), -1)
f = lambda us: f"{us:6.1f} ({2 * x.numel() * 2 / (us * 1e-6) / 1e9 / copy_gbs:.0%})"
say(f"(128, 262144): copy {f(bench(lambda: y.copy_(x)))}")
for s, b, w, p in [(32, 8192, 8, 4), (32, 8192, 8, 6), (32, 8192, 4, 8), (32, 4096, 4, 8), (64, 4096, 4, 8),
                   (32, 8192, 4, 6), (16, 8192, 8, 4), (32, 2048, 2, 16), (64, 4096, 4, 12)]:
    try:
        go = persistent(x, y, s, b, w, p)
        y.zero_(); go(); torch.cuda.synchronize()
        err = float((y.float() - ref).abs().max())
        say(f"  s{s} b{b} w{w} p{p}: {f(bench(go))} err {err:.0e}")
    except Exception as e:
        say(f"  s{s} b{b} w{w} p{p}: FAILED {type(e).__name__} {str(e)[:100]}")
