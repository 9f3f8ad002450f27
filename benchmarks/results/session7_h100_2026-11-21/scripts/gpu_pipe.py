"""Scratch GPU run: pipelined persistent split vs the current defaults, copies, torch."""
import json, os, sys, time
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import pipe
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
SHAPES = [((16, 1048576), "float16"), ((16, 1048576), "bfloat16"), ((16, 1048576), "float32"),
          ((128, 262144), "float16"), ((128, 262144), "bfloat16"), ((128, 262144), "float32")]
if os.environ.get("PIPE_MORE"):
    SHAPES += [((1024, 65536), "float16"), ((1024, 65536), "float32")]
PPS = (1, 2, 4)


def combos(shape, dt):
    r, c = shape
    if r <= 16:
        base = [(32, 8192, 8), (64, 8192, 8), (128, 8192, 8), (64, 4096, 4), (128, 4096, 4), (32, 16384, 16)]
    elif r <= 128:
        base = [(8, 8192, 8), (16, 8192, 8), (32, 8192, 8), (16, 4096, 4), (32, 4096, 4), (8, 16384, 16)]
    else:
        base = [(2, 8192, 8), (4, 8192, 8), (4, 4096, 4), (8, 4096, 4)]
    return base


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


rows = []
log = open(os.path.join(OUT, "pipe.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__, "SMs", SMS)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
t = bench(lambda: big2.copy_(big))
copy_gbs = 2 * big.numel() / (t * 1e-6) / 1e9
say(f"copy 1 GiB: {t:.1f} us {copy_gbs:.0f} GB/s")
del big, big2
for shape, dt in SHAPES:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt])
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    ref = torch.softmax(x.float(), -1)

    def rec(name, us, err=None):
        gbs = nbytes / (us * 1e-6) / 1e9
        rows.append(dict(shape=shape, dtype=dt, name=name, us=us, gbs=gbs, frac=gbs / copy_gbs, err=err))
        say(f"{shape} {dt} {name:34s} {us:8.1f} us {gbs:6.0f} GB/s {gbs / copy_gbs:5.1%}" + ("" if err is None else f" err {err:.2e}"))

    rec("torch.copy_", bench(lambda: y.copy_(x)))
    flat_x, flat_y = x.view(-1), y.view(-1)
    pipe.triton_copy(flat_x, flat_y)
    rec("triton copy 8192/8", bench(lambda: pipe.triton_copy(flat_x, flat_y)))
    rec("torch.softmax", bench(lambda: torch.softmax(x, -1)))
    cfg = default_config("softmax", SoftmaxProblem(*shape, dt))
    mod = load_variant("softmax", cfg)
    y.zero_(); mod.launch(x, y); torch.cuda.synchronize()
    rec("default " + f"s{cfg['splits']} b{cfg['block']} w{cfg['num_warps']}", bench(lambda: mod.launch(x, y)),
        float((y.float() - ref).abs().max()))
    for splits, block, warps in combos(shape, dt):
        for pps in PPS:
            name = f"pipe s{splits} b{block} w{warps} p{pps}"
            try:
                y.zero_()
                for _ in range(3):
                    pipe.launch(x, y, splits, block, warps, SMS * pps)
                torch.cuda.synchronize()
                err = float((y.float() - ref).abs().max())
                left = int(pipe._COUNTERS[x.device].abs().sum())
                if left:
                    say(name, "COUNTERS LEFT", left)
                rec(name, bench(lambda: pipe.launch(x, y, splits, block, warps, SMS * pps)), err)
            except Exception as e:
                say(name, "FAILED", type(e).__name__, str(e)[:200])
    del x, y, ref
    torch.cuda.empty_cache()

json.dump(dict(copy_gbs=copy_gbs, rows=rows), open(os.path.join(OUT, "pipe.json"), "w"), indent=1)
say("\n== best per shape ==")
for shape, dt in SHAPES:
    rs = [r for r in rows if r["shape"] == shape and r["dtype"] == dt]
    dflt = [r for r in rs if r["name"].startswith("default")][0]
    pipes = [r for r in rs if r["name"].startswith("pipe")]
    best = min(pipes, key=lambda r: r["us"]) if pipes else None
    cp = [r for r in rs if r["name"] == "torch.copy_"][0]
    say(f"{shape} {dt}: copy {cp['us']:.1f} ({cp['frac']:.0%}) default {dflt['us']:.1f} ({dflt['frac']:.0%}) "
        + (f"best pipe {best['name']} {best['us']:.1f} ({best['frac']:.0%}) err {best['err']:.1e}" if best else ""))
