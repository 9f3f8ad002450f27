"""Prototype: the persistent split with the HBM read of item k and the L2 re-read of the item it
finishes issued together (one chunk per item), so their latencies overlap.

The product's persistent split (softmax_split.py.jinja) reads item k chunk by chunk, publishes
its (m, d), and only then re-reads item k-1 from L2 to write it: per program, an HBM latency and
an L2 latency in series. On the H100, session 19's floors put that schedule at 29.6 us on
16x1048576 fp16 even with no synchronization at all (floors.py, "deferred"), against 26.5 us for
a single pass with the same loop shape ("stream") and a target of 28.0 us.

Here each item is one chunk of BLOCK columns. Per turn a program loads x[k] (HBM, evict_last)
and x[fin] (L2, evict_first) back to back, where fin = k - LAG; reduces x[k] to (m, d) and
publishes it as one 64-bit word; waits for fin's row (SYNC=1: polls the row's words; SYNC=0:
reads them once, outputs wrong: the schedule's floor); merges and writes y[fin].
Workspace: two halves of int64 words, as in flashtune.gen.row_sync.polled_partials.

Env: CASES="RxC:dtype,..." (default: 16x1048576 and 128x262144, three dtypes), ROUNDS.
"""
import os
import statistics
import sys

import torch
import triton
import triton.language as tl
import triton.testing

import flashtune

OUT = os.environ.get("OUT", "/tmp")
ROUNDS = int(os.environ.get("ROUNDS", "3"))
MAX_POLLS = 1 << 16
LOG2E = 1.4426950408889634
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
log = None


def say(*a):
    s = " ".join(str(v) for v in a)
    print(s, flush=True)
    log.write(s + "\n")
    log.flush()


@triton.jit
def _pack(m, d):
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    d_bits = d.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@triton.jit
def _load_item(x_ptr, item, n_items, n_cols, xs, SPLITS: tl.constexpr, BLOCK: tl.constexpr,
               FIRST: tl.constexpr):
    # An item outside [0, n_items) (no item to finish yet) loads nothing. (Item 0's address:
    # a negative item's quotient and remainder differ between the GPU and the interpreter.)
    valid = (item >= 0) & (item < n_items)
    safe = tl.where(valid, item, 0)
    row = (safe // SPLITS).to(tl.int64)
    offs = (safe % SPLITS) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < tl.where(valid, n_cols, 0)
    if FIRST:
        x = tl.load(x_ptr + row * xs + offs, mask=mask, other=float("-inf"),
                    eviction_policy="evict_last")
    else:
        x = tl.load(x_ptr + row * xs + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    return x.to(tl.float32)


@triton.jit
def _finish(y_ptr, slots, stale, fin, xb, n_cols, ys, SPLITS: tl.constexpr, BLOCK: tl.constexpr,
            SYNC: tl.constexpr, MAX_POLLS: tl.constexpr):
    row = (fin // SPLITS).to(tl.int64)
    row_slots = slots + row * SPLITS + tl.arange(0, SPLITS)
    if SYNC:
        words = tl.load(row_slots, volatile=True)
        polls = 0
        while (tl.max(tl.where(words == 0, 1, 0), axis=0) == 1) & (polls < MAX_POLLS):
            words = tl.load(row_slots, volatile=True)
            polls += 1
    else:
        words = tl.load(row_slots)
    m_parts = ((words >> 32) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    d_parts = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    m = tl.max(m_parts, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
    tl.store(stale + fin, 0)
    offs = (fin % SPLITS) * BLOCK + tl.arange(0, BLOCK)
    y = tl.exp2((xb - m) * 1.4426950408889634) * (1.0 / d)
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_cols,
             eviction_policy="evict_first")


@triton.jit
def fused_kernel(x_ptr, y_ptr, slots, stale, tickets, n_cols, xs, ys, n_items, n_stale, n_programs,
                 SPLITS: tl.constexpr, BLOCK: tl.constexpr, LAG: tl.constexpr, SYNC: tl.constexpr,
                 MAX_POLLS: tl.constexpr):
    item = tl.atomic_add(tickets, 1, sem="relaxed")
    p1 = item * 0 - 1
    p2 = item * 0 - 2
    while item < n_items:
        if LAG == 2:
            fin = p2
        else:
            fin = p1
        xa = _load_item(x_ptr, item, n_items, n_cols, xs, SPLITS, BLOCK, True)
        xb = _load_item(x_ptr, fin, n_items, n_cols, xs, SPLITS, BLOCK, False)
        m = tl.max(xa, axis=0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        d = tl.sum(tl.exp2((xa - m_safe) * 1.4426950408889634), axis=0)
        tl.atomic_xchg(slots + item, _pack(m, d), sem="relaxed")
        if fin >= 0:
            _finish(y_ptr, slots, stale, fin, xb, n_cols, ys, SPLITS, BLOCK, SYNC, MAX_POLLS)
        if LAG == 2:
            p2 = p1
        p1 = item
        item = tl.atomic_add(tickets, 1, sem="relaxed")
    if LAG == 2:
        if p2 >= 0:
            xb = _load_item(x_ptr, p2, n_items, n_cols, xs, SPLITS, BLOCK, False)
            _finish(y_ptr, slots, stale, p2, xb, n_cols, ys, SPLITS, BLOCK, SYNC, MAX_POLLS)
    if p1 >= 0:
        xb = _load_item(x_ptr, p1, n_items, n_cols, xs, SPLITS, BLOCK, False)
        _finish(y_ptr, slots, stale, p1, xb, n_cols, ys, SPLITS, BLOCK, SYNC, MAX_POLLS)
    for i in range(n_items + tl.program_id(0), n_stale, n_programs):
        tl.store(stale + i, 0)
    exits = tl.atomic_add(tickets + 1, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(tickets, 0, sem="relaxed")
        tl.atomic_xchg(tickets + 1, 0, sem="relaxed")


class Workspace:
    def __init__(self, n, device="cuda"):
        self.words = torch.zeros((2, n), dtype=torch.int64, device=device)
        self.halves = (self.words[0], self.words[1])
        self.tickets = torch.zeros(2, dtype=torch.int32, device=device)
        self.half = 0
        self.written = [0, 0]


WS = None
REGS = {}


def programs_that_fit(regs, warps):
    """Programs per SM that the register file holds (registers go out per warp, by 256)."""
    return min(65536 // (-(-regs * 32 // 256) * 256 * warps), 64 // warps)


def launch(x, y, block, warps, pps, lag, sync):
    n_rows, n_cols = x.shape
    splits = n_cols // block
    assert splits * block == n_cols and splits & (splits - 1) == 0
    n_items = n_rows * splits
    programs = min(n_items, pps * SMS)
    h = WS.half
    if x.is_cuda:  # a grid that does not fit starves the programs its partners wait on
        key = (x.dtype, block, warps, lag, sync, splits)
        if key not in REGS:
            ck = fused_kernel.warmup(x, y, WS.halves[h], WS.halves[1 - h], WS.tickets, n_cols,
                                     x.stride(0), y.stride(0), n_items, WS.written[1 - h], programs,
                                     SPLITS=splits, BLOCK=block, LAG=lag, SYNC=sync,
                                     MAX_POLLS=MAX_POLLS, num_warps=warps, num_stages=1, grid=(1,))
            ck._init_handles()  # n_regs is filled in when the module is loaded
            REGS[key] = ck.n_regs
        fit = programs_that_fit(REGS[key], warps)
        if fit < 1:
            raise RuntimeError(f"{REGS[key]} registers: no program fits")
        programs = min(n_items, min(pps, fit) * SMS)
    fused_kernel[(programs,)](x, y, WS.halves[h], WS.halves[1 - h], WS.tickets, n_cols,
                              x.stride(0), y.stride(0), n_items, WS.written[1 - h], programs,
                              SPLITS=splits, BLOCK=block, LAG=lag, SYNC=sync,
                              MAX_POLLS=MAX_POLLS, num_warps=warps, num_stages=1)
    WS.written[1 - h] = 0
    WS.written[h] = n_items
    WS.half = 1 - h
    return y


def bench(fn):
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def main():
    global log, WS
    log = open(os.path.join(OUT, "fused_proto.log"), "w")
    WS = Workspace(1 << 16)
    # (block, warps, programs per SM)
    CFG16 = [(8192, 8, 4), (8192, 8, 8), (4096, 4, 4), (4096, 4, 8), (16384, 16, 2), (8192, 4, 4)]
    CFG32 = [(8192, 8, 2), (8192, 8, 4), (4096, 4, 4), (4096, 8, 4), (4096, 4, 8)]
    cases = os.environ.get("CASES", "16x1048576:float16,16x1048576:bfloat16,16x1048576:float32,"
                           "128x262144:float16,128x262144:float32")

    say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    big2 = torch.empty_like(big)
    copy_gbs = statistics.median(2 * big.numel() / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
                                 for _ in range(3))
    say(f"copy 1 GiB: {copy_gbs:.0f} GB/s")
    del big, big2
    torch.cuda.empty_cache()
    summary = []
    for case in cases.split(","):
        shp, dt = case.split(":")
        shape = tuple(int(v) for v in shp.split("x"))
        x = torch.randn(*shape, device="cuda", dtype=DT[dt])
        x[0, 5] = 30.0  # one large logit, so a wrong merge shows
        y = torch.empty_like(x)
        ref = torch.softmax(x.double(), -1)
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda t, nbytes=nbytes: 100 * nbytes / (t * 1e-6) / 1e9 / copy_gbs
        tol = 2e-3 if x.element_size() == 2 else 1e-6
        cands = {"copy": lambda: y.copy_(x), "flashtune": lambda: flashtune.softmax(x, -1)}
        for block, warps, pps in (CFG32 if dt == "float32" else CFG16):
            for lag in (1, 2):
                for sync in (1, 0):
                    name = f"b{block} w{warps} p{pps} lag{lag} {'sync' if sync else 'nosync'}"
                    try:
                        for _ in range(3):
                            y.fill_(float("nan"))
                            launch(x, y, block, warps, pps, lag, sync)
                            torch.cuda.synchronize()
                            err = (y.double() - ref).abs().max().item()
                            if sync and not err <= tol:
                                say(f"  {name}: WRONG max err {err:.3e}")
                                break
                        else:
                            fit = programs_that_fit(REGS[(x.dtype, block, warps, lag, sync, x.shape[1] // block)], warps)
                            if fit < pps:
                                name += f" (fit {fit})"
                            cands[name] = (lambda b=block, w=warps, p=pps, l=lag, s=sync:
                                           launch(x, y, b, w, p, l, s))
                    except Exception as e:  # noqa: BLE001
                        say(f"  {name}: FAILED {type(e).__name__} {str(e)[:200]}")
        times = {k: [] for k in cands}
        for _ in range(ROUNDS):
            for k, f in cands.items():
                times[k].append(bench(f))
        med = {k: statistics.median(v) for k, v in times.items()}
        say(f"== {shp} {dt}: target (80%) {nbytes / (0.8 * copy_gbs * 1e9) * 1e6:.1f} us")
        for k, t in med.items():
            say(f"  {k:34s} {t:7.1f} us {pct(t):5.0f}%   rounds {' '.join(f'{v:.1f}' for v in times[k])}")
        best = lambda tag: min(((t, k) for k, t in med.items() if tag in k.split()), default=(float("nan"), "-"))
        summary.append((shp, dt, med["copy"], med["flashtune"], best("sync"), best("nosync"), pct))
        del x, y, ref
        torch.cuda.empty_cache()

    say("\n| shape | dtype | copy | flashtune default | fused, synced (best) | fused, no sync (floor) |")
    say("|---|---|---|---|---|---|")
    for shp, dt, c, ft, (ts, ks), (tn, kn), pct in summary:
        say(f"| {shp} | {dt} | {c:.1f} ({pct(c):.0f}%) | {ft:.1f} ({pct(ft):.0f}%) | {ts:.1f} ({pct(ts):.0f}%) `{ks}` "
            f"| {tn:.1f} ({pct(tn):.0f}%) `{kn}` |")


if __name__ == "__main__":
    main()
