"""Session 33: session 20's grid.py, with the split regime (fused, persistent, paired) also
tried where the default is the online regime (4096x50257 on the H200: online at 79% of copy).
SPLIT_SPLITS lists the splits tried. Original docstring:

A grid of product configs (split regime, persistent and paired) on a few long-row cases,
through each kernel's launch() (the product's code path, no dispatch), next to the default and
torch.softmax. do_bench medians (L2 flushed), interleaved rounds; every config's output is
checked against float64 first (a wrong config is reported and dropped).

Env: CASES="RxC:dtype,..."; N (configs sampled per case, besides the default); ROUNDS;
TOP (configs re-timed in the final rounds); SEED.
"""
import itertools
import os
import random
import statistics

import torch
import triton
import triton.testing

from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config, problem_misfit

OUT = os.environ.get("OUT", "/tmp")
CASES = os.environ.get("CASES", "128x262144:float16,16x1048576:float16,16x1048576:float32")
N = int(os.environ.get("N", "40"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
TOP = int(os.environ.get("TOP", "6"))
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "grid.log"), "a")
space = OPS["softmax"].space


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def short(c):
    stats = "lane" if c["lane_stats"] else "vec" if c["vector_stats"] else "plain"
    if c["regime"] in ("row", "coop"):
        return f"{c['regime']} b{c['block']} s{c['splits']} w{c['num_warps']}"
    if c["regime"] == "online":
        return (f"online b{c['block']} w{c['num_warps']} st{c['num_stages']} {stats} "
                f"l2{int(c['l2_hint'])} res{c['resident']} al{int(c['align'])}")
    return (f"b{c['block']} s{c['splits']} w{c['num_warps']} st{c['num_stages']} "
            f"p{c['programs_per_sm']} {stats}{' paired' if c['paired_loads'] else ''}")


def online_candidates(problem, default):
    out = []
    for block, warps, stages, stats, l2, resident in itertools.product(
            (4096, 8192, 16384), (4, 8, 16, 32), (1, 2, 3), ("plain", "lane", "vec"), (False, True),
            (0, 4096, 8192, 16384)):
        if block // (32 * warps) < 4 or block // (32 * warps) > 128:
            continue
        raw = dict(default.as_dict(), block=block, num_warps=warps, num_stages=stages, l2_hint=l2,
                   lane_stats=stats == "lane", vector_stats=stats == "vec", resident=resident)
        if space.is_valid(raw) and problem_misfit(space.validate(raw), problem) is None:
            out.append(space.validate(raw))
    return out


def held_candidates(problem):
    """The holding regimes: one read of x (the whole row in one program, or over a few
    programs in one launch)."""
    held = [dict(regime="row", block=65536, num_warps=w) for w in (16, 32)]
    for s in (2, 4, 8, 16, 32):
        block = 1 << max(4, (-(-problem.n_cols // s) - 1).bit_length())
        held += [dict(regime="coop", splits=s, block=block, num_warps=w) for w in (8, 16, 32)]
    out = []
    for raw in held:
        try:
            cfg = space.complete(dict(raw, num_stages=1))
        except ValueError:  # ConfigError: outside the space
            continue
        if problem_misfit(cfg, problem) is None:
            out.append(cfg)
    return out


def candidates(problem, rng, default):
    cols = problem.n_cols
    out = []
    splits_tried = tuple(int(v) for v in os.environ.get("SPLIT_SPLITS", "16,32,64,128,256").split(","))
    for splits, block, warps, pps, paired, stats, stages in itertools.product(
            splits_tried, (2048, 4096, 8192, 16384), (2, 4, 8, 16, 32), (0, 2, 4, 8),
            (False, True), ("plain", "lane", "vec"), (1, 2)):
        seg_chunks = -(-(-(-cols // splits)) // block)
        if seg_chunks > 4 or (paired and (seg_chunks != 1 or stats != "plain" or stages != 1)):
            continue
        if block // (32 * warps) < 4 or block // (32 * warps) > 128:
            continue
        raw = dict(regime="split", block=block, splits=splits, num_warps=warps, num_stages=stages,
                   fused=True, programs_per_sm=pps, paired_loads=paired, l2_hint=True,
                   lane_stats=stats == "lane", vector_stats=stats == "vec")
        try:
            cfg = space.complete(raw)
        except ValueError:  # ConfigError: outside the space
            continue
        if problem_misfit(cfg, problem) is None:
            out.append(cfg)
    rng.shuffle(out)
    # Half the sample from the paired loads (few of them, each read overlapping a re-read).
    paired = [k for k in out if k["paired_loads"]][:N // 2]
    return paired + [k for k in out if not k["paired_loads"]]


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
copy_gbs = statistics.median(2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
                             for _ in range(3))
say(f"copy 1 GiB: {copy_gbs:.0f} GB/s")
del big, big2
summary = []
for case in CASES.split(","):
    shp, dt = case.split(":")
    r, c = (int(v) for v in shp.split("x"))
    problem = SoftmaxProblem(r, c, dt)
    rng = random.Random(int(os.environ.get("SEED", "0")))
    default = default_config("softmax", problem, sm_count=SMS)
    cfgs = [default] + [k for k in candidates(problem, rng, default) if k != default][:N]
    x = torch.randn(r, c, device="cuda", dtype=DT[dt]) * 3
    y = torch.empty_like(x)
    ref = torch.softmax(x.double(), -1)
    tol = 1.1 * (torch.softmax(x, -1).double() - ref).abs().max().item() + 1e-6
    runs = {}
    for cfg in cfgs:
        try:
            mod = load_variant("softmax", cfg)
            for _ in range(2):
                mod.launch(x, y)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001  (a config that does not compile or fit)
            say(f"  {short(cfg)}: {type(e).__name__} {str(e)[:100]}")
            continue
        err = (y.double() - ref).abs().max().item()
        if not err <= tol:
            say(f"  {short(cfg)}: WRONG err {err:.3e} > {tol:.3e}")
            continue
        runs[short(cfg)] = (lambda mod=mod: mod.launch(x, y))
    runs["torch"] = lambda: torch.softmax(x, -1)
    nbytes = 2 * x.numel() * x.element_size()
    pct = lambda t, nbytes=nbytes: 100 * nbytes / (t * 1e-6) / 1e9 / copy_gbs  # noqa: E731
    times = {k: [] for k in runs}
    for _ in range(ROUNDS):
        for k, f in runs.items():
            times[k].append(bench(f))
    med = {k: statistics.median(v) for k, v in times.items()}
    top = sorted((k for k in med if k != "torch"), key=med.get)[:TOP]
    dkey = short(default)
    final = {k: [] for k in dict.fromkeys(top + [dkey]) if k in runs}
    for _ in range(3):
        for k in final:
            final[k].append(bench(runs[k]))
    say(f"== {shp} {dt}: {len(runs) - 1} configs ran; torch {med['torch']:.1f} us")
    for k in sorted(med, key=med.get)[:12]:
        say(f"  {k:44s} {med[k]:7.1f} us {pct(med[k]):4.0f}%")
    say("  final rounds:")
    for k, v in sorted(final.items(), key=lambda kv: statistics.median(kv[1])):
        t = statistics.median(v)
        say(f"  {'*' if k == dkey else ' '}{k:43s} {t:7.1f} us {pct(t):4.0f}%  {' '.join(f'{u:.1f}' for u in v)}")
    best = min(final, key=lambda k: statistics.median(final[k]))
    summary.append((shp, dt, statistics.median(final[dkey]) if dkey in final else float("nan"), dkey,
                    statistics.median(final[best]), best, pct))
    del x, y, ref
    torch.cuda.empty_cache()

say("\n| case | default (us, % copy) | best (us, % copy) | best config |")
say("|---|---|---|---|")
for shp, dt, d, dk, b, bk, pct in summary:
    say(f"| {shp} {dt} | {d:.1f} ({pct(d):.0f}%) `{dk}` | {b:.1f} ({pct(b):.0f}%) | `{bk}` |")
