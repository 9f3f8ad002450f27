"""Scratch GPU run 3: the plain fused split with chunks of 16384 and 16 warps (untested before)
next to the persistent pipelined split's best, fp16 / bf16 / fp32."""
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
SHAPES = [((16, 1048576), "float16"), ((16, 1048576), "bfloat16"), ((16, 1048576), "float32"),
          ((128, 262144), "float16"), ((128, 262144), "float32"), ((64, 524288), "float16"),
          ((32, 1048576), "float16"), ((8, 2097152), "float16"), ((256, 131072), "float16")]
log = open(os.path.join(OUT, "pipe3.log"), "w")
rows = []


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n"); log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e3


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
copy_gbs = 2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
say(f"copy {copy_gbs:.0f} GB/s")
del big, big2
for shape, dt in SHAPES:
    x = torch.randn(*shape, device="cuda", dtype=DT[dt])
    y = torch.empty_like(x)
    nbytes = 2 * x.numel() * x.element_size()
    ref = torch.softmax(x.float(), -1)
    d = default_config("softmax", SoftmaxProblem(*shape, dt))
    cands = [("default", d)]
    for sp in (16, 32):
        for b, w, st in ((16384, 16, 1), (16384, 16, 2), (16384, 32, 1)):
            if shape[1] // sp >= b:
                c = SPACE.validate(dict(d, splits=sp, block=b, num_warps=w, num_stages=st))
                if c != d:
                    cands.append((f"fused s{sp} b{b} w{w} st{st}", c))
    for name, cfg in cands:
        try:
            mod = load_variant("softmax", cfg)
            y.zero_(); mod.launch(x, y); torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max())
            us = bench(lambda: mod.launch(x, y))
        except Exception as e:
            say(name, "FAILED", type(e).__name__, str(e)[:200]); continue
        gbs = nbytes / (us * 1e-6) / 1e9
        rows.append(dict(shape=shape, dtype=dt, name=name, us=us, frac=gbs / copy_gbs, err=err))
        say(f"{shape} {dt} {name:30s} {us:7.1f} us {gbs / copy_gbs:6.1%} err {err:.1e}")
    for sp, b, w, p in ((32, 16384, 16, 2), (32, 8192, 8, 4), (128, 8192, 8, 2), (64, 8192, 8, 4)):
        if shape[1] // sp < b:
            continue
        name = f"pipe s{sp} b{b} w{w} p{p}"
        pipe.launch(x, y, sp, b, w, SMS * p); torch.cuda.synchronize()
        err = float((y.float() - ref).abs().max())
        us = bench(lambda: pipe.launch(x, y, sp, b, w, SMS * p))
        gbs = nbytes / (us * 1e-6) / 1e9
        rows.append(dict(shape=shape, dtype=dt, name=name, us=us, frac=gbs / copy_gbs, err=err))
        say(f"{shape} {dt} {name:30s} {us:7.1f} us {gbs / copy_gbs:6.1%} err {err:.1e}")
    del x, y, ref
json.dump(rows, open(os.path.join(OUT, "pipe3.json"), "w"), indent=1)
say("\n== summary ==")
for shape, dt in SHAPES:
    rs = sorted([r for r in rows if r["shape"] == shape and r["dtype"] == dt], key=lambda r: r["us"])
    dd = [r for r in rs if r["name"] == "default"][0]
    bf = [r for r in rs if r["name"].startswith("fused")][:1]
    bp = [r for r in rs if r["name"].startswith("pipe")][:1]
    say(f"{shape} {dt}: default {dd['us']:.1f} ({dd['frac']:.0%})" + "".join(
        f" | {r['name']} {r['us']:.1f} ({r['frac']:.0%})" for r in bf + bp))
