"""H200: vector_stats (templates) against the current defaults on the long-row shapes."""
import os, itertools, time
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "vector_stats_sweep.log"), "w")
T0 = time.time()


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
DT = dict(float16=torch.float16, bfloat16=torch.bfloat16, float32=torch.float32)
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); COPY = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB {COPY:.0f} GB/s"); del big, big2
summary = []
SHAPES = [(1024, 65536), (4096, 50257), (4096, 16384), (128, 262144), (16, 1048576), (8192, 4096)]
for (rows, cols), dtype in itertools.product(SHAPES, ("float16", "bfloat16", "float32")):
    if time.time() - T0 > 480:
        say("time limit"); break
    x = torch.randn(rows, cols, device="cuda", dtype=DT[dtype]) * 3; y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    torch_err = float((torch.softmax(x, -1).double() - ref).abs().max())
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    tc = bench(lambda: y.copy_(x))
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
    cands = {"default": base}
    online = dict(base, regime="online", splits=1, fused=False, programs_per_sm=0, rows_per_program=1,
                  num_stages=1, l2_hint=True, lane_stats=False, vector_stats=True,
                  align=cols % (16 // x.element_size()) != 0)
    if rows >= 1024:
        for block, warps in itertools.product((4096, 8192, 16384), (8, 16, 32)):
            if block // (warps * 32) >= 4:
                cands[f"vec online b{block} w{warps}"] = dict(online, block=block, num_warps=warps)
    if base["regime"] == "split":
        for block, warps in itertools.product((4096, 8192), (4, 8, 16)):
            cands[f"vec split b{block} w{warps}"] = dict(base, block=block, num_warps=warps, vector_stats=True)
    res = {}
    for name, raw in cands.items():
        try:
            m = load_variant("softmax", OPS["softmax"].space.validate(raw))
            y.zero_(); m.launch(x, y); torch.cuda.synchronize()
            err = float((y.double() - ref).abs().max())
            res[name] = (bench(lambda: m.launch(x, y)), err)
        except Exception as e:
            say(f"  {name}: FAILED {type(e).__name__} {str(e)[:150]}")
    say(f"== {rows}x{cols} {dtype}: same-size copy {tc:.1f} ({frac(tc):.0%}), torch err {torch_err:.1e}")
    for name, (t, err) in sorted(res.items(), key=lambda kv: kv[1][0])[:8]:
        say(f"  {name:24s} {t:7.1f} us ({frac(t):.0%}) err {err:.1e}{'  ERR>1.1x torch' if err > 1.1 * torch_err + 1e-6 else ''}")
    bad = [k for k, (t, e) in res.items() if e > 1.1 * torch_err + 1e-6]
    if bad:
        say(f"  accuracy over 1.1x torch: {bad}")
    d = res.get("default", (float('nan'), 0))[0]
    bv = min(((v[0], k) for k, v in res.items() if k.startswith("vec")), default=(float('nan'), "-"))
    summary.append(f"| {rows}x{cols} {dtype} | {d:.1f} ({frac(d):.0%}) | {bv[1]}: {bv[0]:.1f} ({frac(bv[0]):.0%}) |")
    del x, y, ref; torch.cuda.empty_cache()
say("\n| shape | default us (% copy) | best vector_stats |\n|---|---|---|")
for line in summary:
    say(line)
