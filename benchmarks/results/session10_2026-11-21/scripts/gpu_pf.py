"""H200: prefetch (load the next chunk before computing this one) on/off, long-row softmax."""
import os, itertools, sys, time
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "prefetch_sweep.log"), "w")
T0 = time.time()
LIMIT = float(os.environ.get("LIMIT", "520"))


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


def pair(x, y, raw, ref, tag):
    """Time raw with prefetch off and on, alternating; check both against ref and each other."""
    mods = []
    for pf in (False, True):
        cfg = OPS["softmax"].space.validate(dict(raw, prefetch=pf))
        mods.append(load_variant("softmax", cfg))
    outs = []
    for m in mods:
        y.zero_(); m.launch(x, y); torch.cuda.synchronize(); outs.append(y.clone())
    same = torch.equal(outs[0], outs[1])
    err = [float((o.float() - ref).abs().max()) for o in outs]
    ts = [[], []]
    for _ in range(2):
        for i, m in enumerate(mods):
            ts[i].append(bench(lambda: m.launch(x, y)))
    t0, t1 = (sum(v) / len(v) for v in ts)
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    line = (f"{tag}: off {t0:7.1f} us ({frac(t0):.0%})  on {t1:7.1f} us ({frac(t1):.0%})  "
            f"on/off {t1 / t0:.3f}  bitwise-equal {same}  err {err[0]:.1e}/{err[1]:.1e}")
    say(line)
    return t0, t1, same


def shape_setup(rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda", dtype=DT[dtype]); y = torch.empty_like(x)
    ref = torch.softmax(x.float(), -1)
    tc = bench(lambda: y.copy_(x))
    say(f"== {rows}x{cols} {dtype}: same-size copy {tc:.1f} us "
        f"({2 * x.numel() * x.element_size() / (tc * 1e-6) / 1e9 / COPY:.0%})")
    return x, y, ref


# 1. The defaults, every dtype, the long-row shapes (online and persistent split).
for (rows, cols), dtype in itertools.product(((1024, 65536), (4096, 50257), (128, 262144), (16, 1048576)),
                                             ("float16", "bfloat16", "float32")):
    x, y, ref = shape_setup(rows, cols, dtype)
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
    base.pop("prefetch", None)
    t0, t1, same = pair(x, y, base, ref, f"default {base['regime']} b{base['block']} w{base['num_warps']} "
                        f"lane{int(base['lane_stats'])} s{base['splits']} p{base['programs_per_sm']}")
    summary.append((f"{rows}x{cols} {dtype} default", t0, t1, same))
    del x, y, ref; torch.cuda.empty_cache()

# 2. Online grid, fp16, the two many-row shapes.
for rows, cols in ((1024, 65536), (4096, 50257)):
    x, y, ref = shape_setup(rows, cols, "float16")
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, "float16")))
    base.pop("prefetch", None)
    best = {False: (1e9, ""), True: (1e9, "")}
    for block, warps, lane in itertools.product((4096, 8192, 16384), (8, 16, 32), (True, False)):
        if time.time() - T0 > LIMIT:
            say("time limit: grid stopped"); break
        if block // (warps * 32) < 4:
            continue
        raw = dict(base, block=block, num_warps=warps, num_stages=1, lane_stats=lane)
        tag = f"b{block} w{warps} lane{int(lane)}"
        try:
            t0, t1, same = pair(x, y, raw, ref, "  " + tag)
        except Exception as e:
            say(f"  {tag}: FAILED {type(e).__name__} {str(e)[:120]}"); continue
        best[False] = min(best[False], (t0, tag)); best[True] = min(best[True], (t1, tag))
    say(f"best off: {best[False]}  best on: {best[True]}")
    summary.append((f"{rows}x{cols} fp16 best of grid: off {best[False][1]} / on {best[True][1]}",
                    best[False][0], best[True][0], None))
    del x, y, ref; torch.cuda.empty_cache()

say("\n| case | off us | on us | on/off | bitwise |\n|---|---|---|---|---|")
for name, t0, t1, same in summary:
    say(f"| {name} | {t0:.1f} | {t1:.1f} | {t1 / t0:.3f} | {same} |")
