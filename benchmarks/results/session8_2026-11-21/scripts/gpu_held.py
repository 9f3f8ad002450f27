"""Scratch GPU run: held persistent split vs the product default, copy, torch.softmax."""
import json, os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import held
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
SHAPES = [((16, 1048576), "float16"), ((16, 1048576), "bfloat16"), ((16, 1048576), "float32"),
          ((128, 262144), "float16"), ((128, 262144), "bfloat16"), ((128, 262144), "float32")]
if os.environ.get("HELD_MORE"):
    SHAPES += [((1024, 65536), "float16"), ((4096, 16384), "float16")]
PPS = tuple(int(p) for p in os.environ.get("HELD_PPS", "1,2,4").split(","))


def combos(shape):
    r, c = shape
    out = []
    for block, warps in ((16384, 16), (16384, 32), (8192, 8), (8192, 16), (4096, 4), (4096, 8), (2048, 4), (2048, 2)):
        splits = c // block
        if 2 <= splits <= 512:
            out.append((splits, block, warps))
    return out


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


rows = []
log = open(os.path.join(OUT, "held.log"), "w")


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
    ref = torch.softmax(x.double(), -1)
    tol = 1e-2 if dt != "float32" else 1e-6

    def rec(name, us, err=None, extra=""):
        gbs = nbytes / (us * 1e-6) / 1e9
        rows.append(dict(shape=shape, dtype=dt, name=name, us=us, gbs=gbs, frac=gbs / copy_gbs, err=err))
        say(f"{shape} {dt} {name:30s} {us:8.1f} us {gbs:6.0f} GB/s {gbs / copy_gbs:5.1%}"
            + ("" if err is None else f" err {err:.2e}") + extra)

    rec("torch.copy_", bench(lambda: y.copy_(x)))
    rec("torch.softmax", bench(lambda: torch.softmax(x, -1)))
    cfg = default_config("softmax", SoftmaxProblem(*shape, dt))
    mod = load_variant("softmax", cfg)
    y.zero_(); mod.launch(x, y); torch.cuda.synchronize()
    rec("default " + f"s{cfg['splits']} b{cfg['block']} w{cfg['num_warps']} p{cfg.get('programs_per_sm')}",
        bench(lambda: mod.launch(x, y)), float((y.double() - ref).abs().max()))
    for splits, block, warps in combos(shape):
        for hf in ((False, True) if dt != "float32" else (False,)):
            for pps in PPS:
                name = f"held s{splits} b{block} w{warps} p{pps}{' f32' if hf else ''}"
                try:
                    y.zero_()
                    k = None
                    for _ in range(3):
                        k = held.launch(x, y, splits, block, warps, SMS * pps, hold_f32=hf)
                    torch.cuda.synchronize()
                    err = float((y.double() - ref).abs().max())
                    left = int(held._COUNTERS[x.device].abs().sum())
                    if left:
                        say(name, "COUNTERS LEFT", left)
                    regs = f" regs {getattr(k, 'n_regs', '?')} spills {getattr(k, 'n_spills', '?')}"
                    rec(name, bench(lambda: held.launch(x, y, splits, block, warps, SMS * pps, hold_f32=hf)),
                        err, regs + (" BAD" if err > tol else ""))
                except Exception as e:
                    say(name, "FAILED", type(e).__name__, str(e)[:200])
    del x, y, ref
    torch.cuda.empty_cache()

json.dump(dict(copy_gbs=copy_gbs, rows=rows), open(os.path.join(OUT, "held.json"), "w"), indent=1)
say("\n== best per shape ==")
for shape, dt in SHAPES:
    rs = [r for r in rows if r["shape"] == shape and r["dtype"] == dt]
    dflt = [r for r in rs if r["name"].startswith("default")][0]
    cands = [r for r in rs if r["name"].startswith("held")]
    best = min(cands, key=lambda r: r["us"]) if cands else None
    cp = [r for r in rs if r["name"] == "torch.copy_"][0]
    say(f"{shape} {dt}: copy {cp['us']:.1f} ({cp['frac']:.0%}) default {dflt['us']:.1f} ({dflt['frac']:.0%}) "
        + (f"best {best['name']} {best['us']:.1f} ({best['frac']:.0%}) err {best['err']:.1e}" if best else ""))
