"""Polled-partials persistent split vs the counter barrier (pipe MODE 3), deferred floor (MODE 1), default."""
import os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import pipe, poll
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "poll.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=150, return_mode="median") * 1e3


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
# Correctness: back-to-back launches of different sizes on one stream (parity + reset path).
torch.manual_seed(0)
bad = 0
for it in range(30):
    for (r, c, s, b) in [(64, 131072, 16, 8192), (3, 50000, 8, 2048), (128, 262144, 32, 8192), (7, 65536, 64, 1024)]:
        x = torch.randn(r, c, device="cuda", dtype=torch.float16) * 3
        if it % 3 == 0:
            x[0, :100] = float("-inf")
            x[r - 1] = float("-inf")
        y = torch.empty_like(x)
        poll.launch(x, y, s, b, 8, SMS * 4)
        ref = torch.softmax(x.float(), -1)
        err = (y.float() - ref).nan_to_num(0).abs().max().item()
        if err > 1e-3 or not torch.equal(y.isnan(), ref.isnan()):
            bad += 1
            say("BAD", it, r, c, s, b, err)
ws = poll._WS[(x.device, torch.cuda.current_stream().cuda_stream)]
say("stress: bad", bad, "next-parity nonzero", int((ws.words[ws.parity] != 0).sum()), "counters", ws.counters.tolist())

big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big))
copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB: {t:.1f} us {copy_gbs:.0f} GB/s")
del big, big2
CASES = [((16, 1048576), "float16", [(64, 8192, 8), (128, 8192, 8), (64, 16384, 16)]),
         ((16, 1048576), "bfloat16", [(64, 8192, 8), (128, 8192, 8)]),
         ((128, 262144), "float16", [(32, 8192, 8), (16, 16384, 16), (64, 4096, 4)]),
         ((128, 262144), "bfloat16", [(32, 8192, 8), (16, 16384, 16)]),
         ((16, 1048576), "float32", [(64, 8192, 8), (128, 8192, 8), (128, 4096, 8)]),
         ((128, 262144), "float32", [(32, 8192, 8), (64, 4096, 8)]),
         ((1024, 65536), "float16", [(8, 8192, 8), (4, 16384, 16)])]
for shape, dt, cfgs in CASES:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt])
    y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    nbytes = 2 * x.numel() * x.element_size()
    frac = lambda us: nbytes / (us * 1e-6) / 1e9 / copy_gbs
    tc = bench(lambda: y.copy_(x))
    cfg = default_config("softmax", SoftmaxProblem(*shape, dt))
    mod = load_variant("softmax", cfg)
    td = bench(lambda: mod.launch(x, y))
    say(f"{shape} {dt}: torch copy {tc:.1f} ({frac(tc):.0%}) default {td:.1f} ({frac(td):.0%})")
    for splits, block, warps in cfgs:
        for pps in (2, 4, 8):
            try:
                tf = bench(lambda: pipe.launch(x, y, splits, block, warps, SMS * pps, mode=3))
                t1 = bench(lambda: pipe.launch(x, y, splits, block, warps, SMS * pps, mode=1))
                y.zero_()
                poll.launch(x, y, splits, block, warps, SMS * pps)
                err = float((y.double() - ref).abs().max())
                tp = bench(lambda: poll.launch(x, y, splits, block, warps, SMS * pps))
                say(f"  s{splits} b{block} w{warps} p{pps}: counters {tf:.1f}  deferred-floor {t1:.1f}  POLL {tp:.1f} ({frac(tp):.0%}) err {err:.1e}")
            except Exception as e:
                say("FAILED", splits, block, warps, pps, type(e).__name__, str(e)[:300])
    del x, y, ref
    torch.cuda.empty_cache()
