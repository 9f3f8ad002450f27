"""Default configs before and after the paired-loads default, through the product's launch
path (softmax_forward with an explicit config), interleaved rounds of do_bench medians (L2
flushed), every output checked against float64. "before" is the default with
softmax_space._paired_split switched off, i.e. the eighteenth session's default.

Env: SHAPES="RxC,..." (default below), DTYPES, ROUNDS.
"""
import os
import statistics

import torch
import triton
import triton.testing

from flashtune.gen import load_variant, softmax_space
from flashtune.gen.softmax_ops import softmax_forward
from flashtune.gen.softmax_space import SoftmaxProblem, default_config

OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SHAPES = os.environ.get("SHAPES", "16x1048576,128x262144,64x524288,32x524288,256x131072,"
                        "16x131072,4x1048576,8x262144,100x150000,16x1048575,48x300000,1x1048576")
DTYPES = os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "defaults_ab.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def short(c):
    return (f"b{c['block']} s{c['splits']} w{c['num_warps']} p{c['programs_per_sm']}"
            f"{' paired' if c['paired_loads'] else ''}")


say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
copy_gbs = statistics.median(2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
                             for _ in range(3))
say(f"copy 1 GiB: {copy_gbs:.0f} GB/s")
del big, big2
paired_split = softmax_space._paired_split
rows_out = []
for shp in SHAPES.split(","):
    r, c = (int(v) for v in shp.split("x"))
    for dt in DTYPES:
        problem = SoftmaxProblem(r, c, dt)
        new = default_config("softmax", problem, sm_count=SMS)
        softmax_space._paired_split = lambda *a: {}
        old = default_config("softmax", problem, sm_count=SMS)
        softmax_space._paired_split = paired_split
        if new == old:
            say(f"{shp} {dt}: same default ({short(new)})")
            continue
        x = torch.randn(r, c, device="cuda", dtype=DT[dt]) * 3
        x[0, 7] = 40.0
        ref = torch.softmax(x.double(), -1)
        worst = 0.0
        for log_ in (False, True):
            refl = torch.log_softmax(x.double(), -1) if log_ else ref
            for _ in range(3):  # repeated launches: the workspace halves alternate
                out = softmax_forward(x, -1, log=log_, config=new)
            torch.cuda.synchronize()
            # error relative to each output's size (softmax) or absolute (log_softmax)
            scale = 1.0 if log_ else refl.abs().clamp_min(1e-30)
            err = ((out.double() - refl).abs() / scale).max().item()
            tout = (torch.log_softmax if log_ else torch.softmax)(x, -1).double()
            errt = ((tout - refl).abs() / scale).max().item()
            worst = max(worst, err / max(errt, 1e-30))
            if not err <= 1.1 * errt + 1e-6:
                say(f"{shp} {dt} log={log_}: WRONG err {err:.3e} (torch {errt:.3e})")
        y = torch.empty_like(x)
        mod_old, mod_new = load_variant("softmax", old), load_variant("softmax", new)
        cands = {"before": lambda: mod_old.launch(x, y),
                 "after": lambda: mod_new.launch(x, y),
                 "torch": lambda: torch.softmax(x, -1)}
        times = {k: [] for k in cands}
        for _ in range(ROUNDS):
            for k, f in cands.items():
                times[k].append(bench(f))
        med = {k: statistics.median(v) for k, v in times.items()}
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda t, nbytes=nbytes: 100 * nbytes / (t * 1e-6) / 1e9 / copy_gbs
        say(f"{shp} {dt}: before {med['before']:.1f} ({pct(med['before']):.0f}%) [{short(old)}]  "
            f"after {med['after']:.1f} ({pct(med['after']):.0f}%) [{short(new)}]  torch {med['torch']:.1f}  "
            f"err/torch {worst:.2f}  rounds {times['before']} {times['after']}")
        rows_out.append((shp, dt, med["before"], med["after"], med["torch"], pct))
        del x, ref
        torch.cuda.empty_cache()

say("\n| shape | dtype | before (us, % copy) | after | after / before | torch |")
say("|---|---|---|---|---|---|")
for shp, dt, b, a, t, pct in rows_out:
    say(f"| {shp} | {dt} | {b:.1f} ({pct(b):.0f}%) | {a:.1f} ({pct(a):.0f}%) | {a / b:.3f} | {t:.1f} |")
