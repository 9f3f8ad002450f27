"""H200: chunk loops as tl.range(num_stages=N) (Triton pipelines their loads through shared
memory) vs plain range (num_stages 1), long-row softmax; prefetch into registers for reference."""
import os, itertools, sys, time
import torch, triton, triton.testing
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import SoftmaxProblem, default_config, OPS

OUT = os.environ.get("OUT", "/tmp")
log = open(os.path.join(OUT, "stages_sweep.log"), "w")
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


def variants(x, y, raws, ref, tag):
    """Time each raw config (alternating, 2 rounds); check against ref and the first's output."""
    mods, outs = [], []
    for raw in raws:
        try:
            mods.append(load_variant("softmax", OPS["softmax"].space.validate(raw)))
            y.zero_(); mods[-1].launch(x, y); torch.cuda.synchronize(); outs.append(y.clone())
        except Exception as e:
            say(f"  {tag} {raw['num_stages']}: FAILED {type(e).__name__} {str(e)[:150]}")
            mods.append(None); outs.append(None)
    ts = [[] for _ in raws]
    for _ in range(2):
        for i, m in enumerate(mods):
            if m is not None:
                ts[i].append(bench(lambda: m.launch(x, y)))
    frac = lambda us: 2 * x.numel() * x.element_size() / (us * 1e-6) / 1e9 / COPY
    res = []
    parts = []
    for raw, t, o in zip(raws, ts, outs):
        if not t:
            res.append(1e9); parts.append(f"st{raw['num_stages']}{'pf' if raw.get('prefetch') else ''} FAIL"); continue
        tm = sum(t) / len(t)
        err = float((o.float() - ref).abs().max())
        same = outs[0] is not None and torch.equal(o, outs[0])
        res.append(tm)
        parts.append(f"st{raw['num_stages']}{'pf' if raw.get('prefetch') else ''} {tm:6.1f} ({frac(tm):.0%}){'' if same else ' DIFF'} e{err:.0e}")
    say(f"{tag}: " + " | ".join(parts))
    return res


def shape_setup(rows, cols, dtype):
    x = torch.randn(rows, cols, device="cuda", dtype=DT[dtype]); y = torch.empty_like(x)
    ref = torch.softmax(x.float(), -1)
    tc = bench(lambda: y.copy_(x))
    say(f"== {rows}x{cols} {dtype}: same-size copy {tc:.1f} us "
        f"({2 * x.numel() * x.element_size() / (tc * 1e-6) / 1e9 / COPY:.0%})")
    return x, y, ref


def base_of(rows, cols, dtype):
    base = dict(default_config("softmax", SoftmaxProblem(rows, cols, dtype)))
    base["prefetch"] = False
    return base


# 1. Online grid, fp16, the two many-row shapes: stages 1-4 per tile config.
for rows, cols in ((1024, 65536), (4096, 50257)):
    x, y, ref = shape_setup(rows, cols, "float16")
    base = base_of(rows, cols, "float16")
    best = {}
    for block, warps, lane in itertools.product((8192, 16384, 4096), (16, 8, 32), (False, True)):
        if time.time() - T0 > LIMIT * 0.35 * (1 if rows == 1024 else 2):
            say("time limit: grid stopped"); break
        if block // (warps * 32) < 4:
            continue
        raws = [dict(base, block=block, num_warps=warps, lane_stats=lane, num_stages=st) for st in (1, 2, 3, 4)]
        ts = variants(x, y, raws, ref, f"  b{block} w{warps} lane{int(lane)}")
        for st, t in zip((1, 2, 3, 4), ts):
            best[st] = min(best.get(st, (1e9, "")), (t, f"b{block} w{warps} lane{int(lane)}"))
    say(f"best per stages: {best}")
    for st, (t, tag) in sorted(best.items()):
        summary.append((f"{rows}x{cols} fp16 best with stages {st}: {tag}", t, 2 * x.numel() * 2 / (t * 1e-6) / 1e9 / COPY))
    del x, y, ref; torch.cuda.empty_cache()

# 2. Defaults, every dtype, all long-row shapes: stages 1, 2, 3.
for (rows, cols), dtype in itertools.product(((1024, 65536), (4096, 50257), (128, 262144), (16, 1048576)),
                                             ("float16", "bfloat16", "float32")):
    if time.time() - T0 > LIMIT:
        say("time limit: defaults stopped"); break
    x, y, ref = shape_setup(rows, cols, dtype)
    base = base_of(rows, cols, dtype)
    raws = [dict(base, num_stages=st) for st in (1, 2, 3)]
    ts = variants(x, y, raws, ref, f"default {base['regime']} b{base['block']} w{base['num_warps']} "
                  f"lane{int(base['lane_stats'])} s{base['splits']} p{base['programs_per_sm']}")
    for st, t in zip((1, 2, 3), ts):
        summary.append((f"{rows}x{cols} {dtype} default, stages {st}", t, 2 * x.numel() * x.element_size() / (t * 1e-6) / 1e9 / COPY))
    del x, y, ref; torch.cuda.empty_cache()

say("\n| case | us | % of copy |\n|---|---|---|")
for name, t, f in summary:
    say(f"| {name} | {t:.1f} | {f:.0%} |")
