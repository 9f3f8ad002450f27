"""Floors for the long rows under the benchmark's own measurement (do_bench medians, L2 flushed
by do_bench's 256 MB zero_), next to the 80%-of-copy target that issue 2 asks for.

Per shape and dtype (times in us, % = 2 * bytes(x) / time over the 1 GiB copy's rate):
  target      the time that is 80% of the 1 GiB copy's rate
  copy        torch copy_ of x into y (same bytes in and out as a softmax)
  tcopy       a Triton copy kernel (8192-element blocks)
  read        a Triton read-only pass over x (sums it; writes one float per program)
  write       a Triton write-only pass over y
  stream      the persistent pipeline of session 8 (`pipe.py`) with MODE 0: each item read
              and written at once, no statistics: a copy with a softmax's loop shape
  deferred    MODE 1: each item's statistics, then the previous item re-read from L2 and
              written, with NO synchronization (outputs wrong): the floor of any two-pass
              schedule of this kind, best over CONFIGS
  flashtune   flashtune.softmax (default config, empty cache)
  torch       torch.softmax
Rounds are interleaved (ROUNDS, median of the rounds' medians).
"""
import os
import statistics
import sys

import torch
import triton
import triton.language as tl
import triton.testing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "session8_2026-11-21", "scripts"))
import pipe  # noqa: E402  (session 8's scratch pipeline: MODE 0 stream, MODE 1 deferred)

import flashtune  # noqa: E402

OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count
log = open(os.path.join(OUT, "floors.log"), "w")


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


@triton.jit
def read_kernel(src, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out + pid, tl.sum(x, axis=0))


@triton.jit
def write_kernel(dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.full([BLOCK], 1.0, tl.float32).to(dst.dtype.element_ty), mask=offs < n)


# (splits, block, warps, programs per SM)
CONFIGS = {
    2: [(64, 8192, 8, 4), (128, 8192, 8, 4), (256, 4096, 4, 4), (256, 4096, 8, 4), (128, 8192, 8, 8)],
    4: [(64, 8192, 8, 2), (128, 8192, 8, 2), (256, 4096, 8, 4), (128, 4096, 4, 4), (256, 4096, 4, 2)],
}
CONFIGS_128 = {
    2: [(32, 8192, 8, 4), (32, 8192, 8, 8), (64, 4096, 4, 8), (16, 16384, 16, 4)],
    4: [(32, 8192, 8, 2), (32, 8192, 8, 4), (64, 4096, 4, 8), (16, 8192, 8, 2)],
}
SHAPES = [(16, 1048576), (128, 262144)]

say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
big2 = torch.empty_like(big)
copy_gbs = statistics.median(2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
                             for _ in range(3))
say(f"copy 1 GiB: {copy_gbs:.0f} GB/s")
del big, big2
torch.cuda.empty_cache()

table = []
for shape in SHAPES:
    for dt in ("float16", "bfloat16", "float32"):
        x = torch.randn(*shape, device="cuda", dtype=DT[dt])
        y = torch.empty_like(x)
        fx, fy = x.view(-1), y.view(-1)
        n = fx.numel()
        sums = torch.empty(triton.cdiv(n, 8192), device="cuda", dtype=torch.float32)
        nbytes = 2 * n * x.element_size()
        target = nbytes / (0.8 * copy_gbs * 1e9) * 1e6
        ref = torch.softmax(x.double(), -1)
        err = (flashtune.softmax(x, -1).double() - ref).abs().max().item()
        cands = {
            "copy": lambda: y.copy_(x),
            "tcopy": lambda: pipe.triton_copy(fx, fy),
            "read": lambda: read_kernel[(triton.cdiv(n, 8192),)](fx, sums, n, BLOCK=8192, num_warps=8),
            "write": lambda: write_kernel[(triton.cdiv(n, 8192),)](fy, n, BLOCK=8192, num_warps=8),
            "flashtune": lambda: flashtune.softmax(x, -1),
            "torch": lambda: torch.softmax(x, -1),
        }
        cfgs = (CONFIGS if shape[0] == 16 else CONFIGS_128)[x.element_size() if x.element_size() == 4 else 2]
        for mode, name in ((0, "stream"), (1, "deferred")):
            for s, b, w, p in cfgs:
                cands[f"{name} s{s} b{b} w{w} p{p}"] = (
                    lambda s=s, b=b, w=w, p=p, mode=mode: pipe.launch(x, y, s, b, w, SMS * p, mode=mode))
        for f in cands.values():
            f()
        torch.cuda.synchronize()
        times = {k: [] for k in cands}
        for _ in range(ROUNDS):
            for k, f in cands.items():
                times[k].append(bench(f))
        med = {k: statistics.median(v) for k, v in times.items()}
        pct = lambda t: 100 * nbytes / (t * 1e-6) / 1e9 / copy_gbs
        say(f"== {shape[0]}x{shape[1]} {dt}: target (80%) {target:.1f} us; flashtune max err {err:.2e}")
        for k, t in med.items():
            say(f"  {k:32s} {t:7.1f} us {pct(t):5.0f}%   rounds {' '.join(f'{v:.1f}' for v in times[k])}")
        best = lambda prefix: min((t, k) for k, t in med.items() if k.startswith(prefix))
        table.append((f"{shape[0]}x{shape[1]}", dt, target, med["copy"], med["tcopy"], med["read"],
                      med["write"], best("stream")[0], best("deferred"), med["flashtune"], med["torch"]))
        del x, y, ref
        torch.cuda.empty_cache()

say("\n| shape | dtype | target 80% | copy | Triton copy | read-only | write-only | stream best | deferred best (no sync) | flashtune | torch |")
say("|---|---|---|---|---|---|---|---|---|---|---|")
for sh, dt, tg, c, tc, r, w, st, (df, dk), ft, tt in table:
    pct = lambda t: 100 * tg * 0.8 / t
    say(f"| {sh} | {dt} | {tg:.1f} | {c:.1f} ({pct(c):.0f}%) | {tc:.1f} ({pct(tc):.0f}%) | {r:.1f} | {w:.1f} "
        f"| {st:.1f} ({pct(st):.0f}%) | {df:.1f} ({pct(df):.0f}%) `{dk.split(' ', 1)[1]}` | {ft:.1f} ({pct(ft):.0f}%) | {tt:.1f} ({pct(tt):.0f}%) |")
