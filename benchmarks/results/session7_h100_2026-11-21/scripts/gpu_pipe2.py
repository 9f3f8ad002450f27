"""Scratch GPU run 2: bytes in flight. Fused split and the pipelined split with bigger chunks per
thread (block 16384 with 8 warps), pipelining stages, programs per SM."""
import json, os, sys
import torch, triton, triton.testing
sys.path.insert(0, os.path.dirname(__file__))
import pipe
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

OUT = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
SPACE = OPS["softmax"].space
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
SHAPES = [((16, 1048576), "float16"), ((16, 1048576), "float32"), ((128, 262144), "float16"),
          ((128, 262144), "float32")]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


rows = []
log = open(os.path.join(OUT, "pipe2.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


def fused_cands(shape, dt):
    d = default_config("softmax", SoftmaxProblem(*shape, dt))
    out = [("default", d)]
    for sp in (8, 16, 32):
        for b, w in ((16384, 8), (16384, 4), (8192, 4), (8192, 8)):
            for st in (1, 2):
                try:
                    c = SPACE.validate(dict(d, splits=sp, block=b, num_warps=w, num_stages=st))
                except Exception:
                    continue
                if c != d and sp * b <= shape[1]:
                    out.append((f"fused s{sp} b{b} w{w} st{st}", c))
    return out


def pipe_cands(shape):
    r, c = shape
    sps = (32, 64, 128) if r <= 16 else (8, 16, 32)
    out = []
    for sp in sps:
        for b, w in ((16384, 8), (16384, 16), (8192, 8)):
            if c // sp < b:
                continue
            for st in (1, 2):
                for p in (2, 4, 6):
                    out.append((sp, b, w, st, p))
    return out


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
    for name, cfg in fused_cands(shape, dt):
        try:
            mod = load_variant("softmax", cfg)
            y.zero_(); mod.launch(x, y); torch.cuda.synchronize()
            rec(name, bench(lambda: mod.launch(x, y)), float((y.float() - ref).abs().max()))
        except Exception as e:
            say(name, "FAILED", type(e).__name__, str(e)[:200])
    for sp, b, w, st, p in pipe_cands(shape):
        name = f"pipe s{sp} b{b} w{w} st{st} p{p}"
        try:
            y.zero_()
            for _ in range(3):
                pipe.launch(x, y, sp, b, w, SMS * p, num_stages=st)
            torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max())
            if int(pipe._COUNTERS[x.device].abs().sum()):
                say(name, "COUNTERS LEFT")
            rec(name, bench(lambda: pipe.launch(x, y, sp, b, w, SMS * p, num_stages=st)), err)
        except Exception as e:
            say(name, "FAILED", type(e).__name__, str(e)[:200])
    del x, y, ref
    torch.cuda.empty_cache()

json.dump(dict(copy_gbs=copy_gbs, rows=rows), open(os.path.join(OUT, "pipe2.json"), "w"), indent=1)
say("\n== best 4 per shape ==")
for shape, dt in SHAPES:
    rs = sorted([r for r in rows if r["shape"] == shape and r["dtype"] == dt and r["name"] != "torch.copy_"],
                key=lambda r: r["us"])
    d = [r for r in rs if r["name"] == "default"][0]
    say(f"{shape} {dt}: default {d['us']:.1f} ({d['frac']:.0%}); " + "; ".join(
        f"{r['name']} {r['us']:.1f} ({r['frac']:.0%})" for r in rs[:4]))
