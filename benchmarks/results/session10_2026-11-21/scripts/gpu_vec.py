"""H200: statistics per 16-byte vector (in-thread reductions, no barriers in the loop), prototype."""
import os, sys, itertools, time
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import vec_proto
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "vec_stats_proto.log"), "w")


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
for (rows, cols), dtype in [((1024, 65536), "float16"), ((4096, 50176), "float16"), ((128, 262144), "float16"),
                            ((1024, 65536), "bfloat16"), ((1024, 65536), "float32"), ((4096, 50176), "float32"),
                            ((4096, 16384), "float16")]:
    x = torch.randn(rows, cols, device="cuda", dtype=DT[dtype]) * 3; y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    torch_err = float((torch.softmax(x, -1).double() - ref).abs().max())
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    tc = bench(lambda: y.copy_(x))
    base = default_config("softmax", SoftmaxProblem(rows, cols, dtype))
    cands = {"default": base}
    if base["regime"] == "online":
        cands["b16384 w16 lane0"] = OPS["softmax"].space.validate(dict(base, block=16384, num_warps=16, lane_stats=False))
        cands["b8192 w8 lane0"] = OPS["softmax"].space.validate(dict(base, block=8192, num_warps=8, lane_stats=False))
    res = {}
    for name, cfg in cands.items():
        m = load_variant("softmax", cfg)
        m.launch(x, y); torch.cuda.synchronize()
        res[name] = (bench(lambda: m.launch(x, y)), float((y.double() - ref).abs().max()))
    for block, warps in itertools.product((4096, 8192, 16384), (4, 8, 16, 32)):
        if block // (warps * 32) < 4:
            continue
        try:
            vec_proto.launch(x, y, block, warps); torch.cuda.synchronize()
            err = float((y.double() - ref).abs().max())
            res[f"vec b{block} w{warps}"] = (bench(lambda: vec_proto.launch(x, y, block, warps)), err)
        except Exception as e:
            say(f"  vec b{block} w{warps}: FAILED {type(e).__name__} {str(e)[:100]}")
    say(f"== {rows}x{cols} {dtype}: copy same-size {tc:.1f} ({frac(tc):.0%}), torch err {torch_err:.1e}")
    for name, (t, err) in sorted(res.items(), key=lambda kv: kv[1][0]):
        say(f"  {name:20s} {t:7.1f} us ({frac(t):.0%}) err {err:.1e}")
    best_vec = min((v, k) for k, v in res.items() if k.startswith("vec"))
    best_old = min((v, k) for k, v in res.items() if not k.startswith("vec"))
    summary.append(f"| {rows}x{cols} {dtype} | {best_old[1]}: {best_old[0][0]:.1f} ({frac(best_old[0][0]):.0%}) | "
                   f"{best_vec[1]}: {best_vec[0][0]:.1f} ({frac(best_vec[0][0]):.0%}) |")
    del x, y, ref; torch.cuda.empty_cache()
say("\n| shape | best current (us, %) | best vector stats (us, %) |\n|---|---|---|")
for line in summary:
    say(line)
