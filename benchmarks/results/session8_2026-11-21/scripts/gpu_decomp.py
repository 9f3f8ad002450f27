"""Where the persistent split's time goes: stream (MODE 0), deferred re-read (1), + row sync (2), full (3)."""
import os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import pipe
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
DT = {"float16": torch.float16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "decomp.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big))
copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB: {t:.1f} us {copy_gbs:.0f} GB/s")
del big, big2
CASES = [((16, 1048576), "float16", [(64, 8192, 8), (64, 16384, 16), (128, 8192, 8)]),
         ((128, 262144), "float16", [(32, 8192, 8), (16, 16384, 16), (64, 4096, 4)]),
         ((16, 1048576), "float32", [(64, 8192, 8), (128, 8192, 8)])]
summary = []
for shape, dt, cfgs in CASES:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt])
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    frac = lambda us: nbytes / (us * 1e-6) / 1e9 / copy_gbs
    tc = bench(lambda: y.copy_(x))
    fx, fy = x.view(-1), y.view(-1)
    tt = bench(lambda: pipe.triton_copy(fx, fy))
    cfg = default_config("softmax", SoftmaxProblem(*shape, dt))
    mod = load_variant("softmax", cfg)
    td = bench(lambda: mod.launch(x, y))
    say(f"{shape} {dt}: torch copy {tc:.1f} ({frac(tc):.0%}) triton copy {tt:.1f} ({frac(tt):.0%}) default {td:.1f} ({frac(td):.0%})")
    for splits, block, warps in cfgs:
        for pps in (2, 4, 8):
            res = []
            for mode in (0, 1, 2, 3):
                try:
                    pipe.launch(x, y, splits, block, warps, SMS * pps, mode=mode)
                    torch.cuda.synchronize()
                    res.append(bench(lambda: pipe.launch(x, y, splits, block, warps, SMS * pps, mode=mode)))
                except Exception as e:
                    res.append(float("nan"))
                    say("FAILED", mode, type(e).__name__, str(e)[:150])
            line = f"  s{splits} b{block} w{warps} p{pps}: stream {res[0]:.1f}  deferred {res[1]:.1f}  +sync {res[2]:.1f}  full {res[3]:.1f}  (full {frac(res[3]):.0%})"
            say(line)
    del x, y
    torch.cuda.empty_cache()
