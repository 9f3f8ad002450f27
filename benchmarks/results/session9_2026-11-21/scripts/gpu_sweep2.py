"""H200: row and coop regimes (the row held on chip) for 4096 x 50257 and 1024 x 65536 fp16."""
import os
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, fitting_configs

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "sweep2.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True); log.write(s + "\n"); log.flush()


bench = lambda fn: triton.testing.do_bench(fn, warmup=20, rep=100, return_mode="median") * 1e3
say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_(); big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big)); copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB {copy_gbs:.0f} GB/s"); del big, big2
for shape in ((4096, 50257), (1024, 65536)):
    x = torch.randn(*shape, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
    ref = torch.softmax(x.float(), -1)
    f = lambda us: f"{us:6.1f} ({2 * x.numel() * 2 / (us * 1e-6) / 1e9 / copy_gbs:.0%})"
    cfgs = [c for c in fitting_configs("softmax", SoftmaxProblem(*shape, "float16")) if c["regime"] in ("row", "coop")]
    rows = []
    for cfg in cfgs:
        name = f"{cfg['regime']} b{cfg['block']} s{cfg['splits']} w{cfg['num_warps']} exp2={int(cfg['exp2'])}"
        try:
            m = load_variant("softmax", cfg)
            y.zero_(); m.launch(x, y); torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max())
            t = bench(lambda: m.launch(x, y))
            rows.append((t, f"{name}: {f(t)} err {err:.0e}"))
        except Exception as e:
            say(f"  {name}: FAILED {type(e).__name__} {str(e)[:100]}")
    say(f"{shape}: {len(rows)} row/coop configs")
    for t, line in sorted(rows)[:10]:
        say("  " + line)
    del x, y, ref; torch.cuda.empty_cache()
