"""Prototype: a read-once long-row schedule whose loads run ahead through shared memory.

The eighth, eleventh and eighteenth sessions held segments in registers so that x is read once;
each time the registers the held data took cut the loads in flight, and the schedule was slower
than re-reading from L2 (eighteenth: 33.9 us on 16 x 1048576 fp16 even with no sync at all).
This one holds only the current tile in registers. The loads of the next STAGES - 1 tiles are
in flight in shared memory: Triton's pipeliner (`tl.range(..., num_stages=STAGES)`) turns the
loop's load into asynchronous copies.

Grid: G programs. Work item i = (row i // SEGS, column tile i % SEGS) of BLOCK columns; program
p takes items p, p + G, p + 2G, ... in order. Per item: load the tile, reduce it to a partial
(m, d), publish it as one 64-bit word (relaxed exchange), poll the row's SEGS words until all
are there, merge them, write the tile's output from the registers. No deadlock while all G
programs run and G >= SEGS (a row's items are in distinct programs); a wait is bounded
(MAX_POLLS), after which the program computes the row's statistics from x itself.

MODE 0: a copy with the loop's shape (load, store). MODE 1: statistics, then each row's (M, D)
read from `totals` (made by torch beforehand): the schedule without its sync. MODE 2: the real
thing.

Usage on the GPU: python pipe_stream.py  (env OUT, SHAPES="16x1048576,128x262144",
DTYPES="float16,bfloat16"); prints a table and checks every MODE 1/2 output against float64.
On the CPU: INTERPRET=1 (sets TRITON_INTERPRET) runs small checks of MODE 1 and 2 (give-up).
"""
import itertools
import os
import statistics
import sys
import time

if os.environ.get("INTERPRET") == "1":
    os.environ["TRITON_INTERPRET"] = "1"

import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _pack(m, d):
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    d_bits = d.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@triton.jit
def _unpack(w):
    m = ((w >> 32) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    d = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return m, d


@triton.jit
def _tile_stats(xf):
    m = tl.max(xf, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(tl.exp2((xf - m_safe) * 1.4426950408889634), axis=0)


@triton.jit
def _row_from_x(x_ptr, row, n_cols, x_stride, SEGS: tl.constexpr, BLOCK: tl.constexpr):
    """Give-up path: every tile's (m, d) of the row, by the publishers' code (same bits)."""
    idx = tl.arange(0, SEGS)
    lane = tl.arange(0, BLOCK)
    pm = tl.full([SEGS], float("-inf"), tl.float32)
    pd = tl.zeros([SEGS], tl.float32)
    for s in range(SEGS):
        cols = s * BLOCK + lane
        xs = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols,
                     other=float("-inf")).to(tl.float32)
        m_s, d_s = _tile_stats(xs)
        pm = tl.where(idx == s, m_s, pm)
        pd = tl.where(idx == s, d_s, pd)
    return pm, pd


@triton.jit
def _merge_parts(pm, pd):
    """The row's (M, D) from its tiles' partial (m, d) (the associative merge)."""
    M = tl.max(pm, axis=0)
    M_safe = tl.where(M == float("-inf"), 0.0, M)
    return M, tl.sum(pd * tl.exp2((pm - M_safe) * 1.4426950408889634), axis=0)


@triton.jit
def _redo_items(x_ptr, y_ptr, p, G, turns, n_cols, x_stride, y_stride, SEGS: tl.constexpr,
                BLOCK: tl.constexpr):
    """After a wait gave up: write every item of program p again, with its row's statistics
    computed from x (the publishers' code)."""
    lane = tl.arange(0, BLOCK)
    for k in range(turns):
        item = p + k * G
        row = (item // SEGS).to(tl.int64)
        cols = (item % SEGS) * BLOCK + lane
        mask = cols < n_cols
        pm, pd = _row_from_x(x_ptr, row, n_cols, x_stride, SEGS, BLOCK)
        M, D = _merge_parts(pm, pd)
        xf = tl.load(x_ptr + row * x_stride + cols, mask=mask).to(tl.float32)
        y = tl.exp2((xf - M) * 1.4426950408889634) * (1.0 / D)
        tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


# Poll one 64-bit word until it is nonzero or $2 polls have passed; the word as last read.
_SPIN = tl.constexpr("""{
.reg .pred %sp<2>;
.reg .u32 %sn;
mov.u32 %sn, 0;
SPIN${:uid}:
ld.volatile.global.u64 $0, [$1];
setp.ne.u64 %sp0, $0, 0;
@%sp0 bra DONE${:uid};
add.u32 %sn, %sn, 1;
setp.lt.u32 %sp1, %sn, $2;
@%sp1 bra SPIN${:uid};
DONE${:uid}:
}""")


@triton.jit
def pipe_kernel(x_ptr, y_ptr, slots, stale, totals, n_items, n_stale, n_cols, x_stride, y_stride,
                G, SEGS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr,
                MODE: tl.constexpr, MAX_POLLS: tl.constexpr, SPIN_ASM: tl.constexpr):
    p = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    idx = tl.arange(0, SEGS)
    turns = tl.cdiv(n_items - p, G)
    failed = 0
    for k in tl.range(0, turns, num_stages=STAGES):
        item = p + k * G
        row = (item // SEGS).to(tl.int64)
        cols = (item % SEGS) * BLOCK + lane
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=float("-inf"))
        if MODE == 0:
            y = x
        else:
            xf = x.to(tl.float32)
            m, d = _tile_stats(xf)
            if MODE == 1:
                M = tl.load(totals + row * 2)
                D = tl.load(totals + row * 2 + 1)
            else:
                tl.atomic_xchg(slots + item, _pack(m, d), sem="relaxed")
                row_slots = slots + row * SEGS + idx
                if SPIN_ASM:
                    # The wait as one inline-asm op per word: no loop in the loop body, which
                    # Triton's pipeliner needs (a nested while loop turns pipelining off).
                    words = tl.inline_asm_elementwise(
                        _SPIN, "=l,l,r", [row_slots.to(tl.int64, bitcast=True),
                                          tl.full([SEGS], MAX_POLLS, tl.int32)],
                        dtype=tl.int64, is_pure=False, pack=1)
                else:
                    words = tl.load(row_slots, volatile=True)
                    polls = 0
                    while (tl.max(tl.where(words == 0, 1, 0), axis=0) == 1) & (polls < MAX_POLLS):
                        words = tl.load(row_slots, volatile=True)
                        polls += 1
                # One decision for the whole program (the twentieth session's lesson).
                missing = tl.max(tl.where(words == 0, 1, 0), axis=0)
                missing = tl.max(tl.zeros([BLOCK], tl.int32) + missing, axis=0)
                failed |= missing
                pm, pd = _unpack(words)
                M, D = _merge_parts(pm, pd)
            y = tl.exp2((xf - M) * 1.4426950408889634) * (1.0 / D)
        tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
        tl.store(stale + item, 0)  # the launch before's word (every mode: the halves alternate)
    if failed != 0:
        # Some wait gave up (partners not running): redo every item of this program with
        # the row's statistics computed from x (same code as the publishers').
        _redo_items(x_ptr, y_ptr, p, G, turns, n_cols, x_stride, y_stride, SEGS, BLOCK)
    for j in range(n_items + p, n_stale, G):
        tl.store(stale + j, 0)


# Spin on one 64-bit word, starting from a value read earlier ($2): reread while it is zero, at
# most $3 times; the word as last read.
_SPIN_FROM = tl.constexpr("""{
.reg .pred %sp<2>;
.reg .u32 %sn;
mov.u64 $0, $2;
mov.u32 %sn, 0;
SPIN${:uid}:
setp.ne.u64 %sp0, $0, 0;
@%sp0 bra DONE${:uid};
setp.ge.u32 %sp1, %sn, $3;
@%sp1 bra DONE${:uid};
add.u32 %sn, %sn, 1;
ld.volatile.global.u64 $0, [$1];
bra.uni SPIN${:uid};
DONE${:uid}:
}""")


@triton.jit
def lag_kernel(x_ptr, y_ptr, slots, stale, n_items, n_stale, n_cols, x_stride, y_stride, G,
               SEGS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr,
               LAG: tl.constexpr, MAX_POLLS: tl.constexpr, EARLY: tl.constexpr,
               ASM: tl.constexpr):
    """MODE 3: each turn reduces and publishes tile k, then writes tile k - LAG (held in
    registers since its turn), whose row's partials were published about LAG turns ago."""
    tl.static_assert(LAG >= 1)
    tl.static_assert(LAG <= 2)
    p = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    idx = tl.arange(0, SEGS)
    turns = tl.cdiv(n_items - p, G)
    failed = 0
    # Held tiles start as their own zeros (Triton's loop carry: eighteenth session).
    held1 = tl.zeros([BLOCK], x_ptr.dtype.element_ty)
    held2 = tl.zeros([BLOCK], x_ptr.dtype.element_ty)
    for k in tl.range(0, turns + LAG, num_stages=STAGES):
        item = p + k * G
        valid = k < turns
        row = (item // SEGS).to(tl.int64)
        cols = (item % SEGS) * BLOCK + lane
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < tl.where(valid, n_cols, 0),
                    other=float("-inf"))
        done = p + (k - LAG) * G  # the item written this turn
        d_row = (tl.maximum(done, 0) // SEGS).to(tl.int64)
        d_slots = slots + d_row * SEGS + idx
        if EARLY:
            w0 = tl.load(d_slots, mask=idx < tl.where(k >= LAG, SEGS, 0), other=1, volatile=True)
        xf = x.to(tl.float32)
        m, d = _tile_stats(xf)
        if valid:
            tl.atomic_xchg(slots + item, _pack(m, d), sem="relaxed")
        if k >= LAG:
            if not EARLY:
                w0 = tl.load(d_slots, volatile=True)
            if ASM:
                words = tl.inline_asm_elementwise(
                    _SPIN_FROM, "=l,l,l,r", [d_slots.to(tl.int64, bitcast=True), w0,
                                             tl.full([SEGS], MAX_POLLS, tl.int32)],
                    dtype=tl.int64, is_pure=False, pack=1)
            else:  # the interpreter: no inline asm
                words = w0
                polls = 0
                while (tl.max(tl.where(words == 0, 1, 0), axis=0) == 1) & (polls < MAX_POLLS):
                    words = tl.load(d_slots, volatile=True)
                    polls += 1
            missing = tl.max(tl.where(words == 0, 1, 0), axis=0)
            missing = tl.max(tl.zeros([BLOCK], tl.int32) + missing, axis=0)
            failed |= missing
            pm, pd = _unpack(words)
            M, D = _merge_parts(pm, pd)
            if LAG == 1:
                h = held1
            else:
                h = held2
            d_cols = (done % SEGS) * BLOCK + lane
            y = tl.exp2((h.to(tl.float32) - M) * 1.4426950408889634) * (1.0 / D)
            tl.store(y_ptr + d_row * y_stride + d_cols, y.to(y_ptr.dtype.element_ty),
                     mask=d_cols < n_cols)
            tl.store(stale + done, 0)
        held2 = held1
        held1 = x
    if failed != 0:
        _redo_items(x_ptr, y_ptr, p, G, turns, n_cols, x_stride, y_stride, SEGS, BLOCK)
    for j in range(n_items + p, n_stale, G):
        tl.store(stale + j, 0)


class Workspace:
    """Two halves of partial words; a launch uses one (all zero) and zeroes the other."""

    def __init__(self, device, cap=1 << 20):
        self.words = torch.zeros((2, cap), dtype=torch.int64, device=device)
        self.half = 0
        self.written = [0, 0]

    def take(self, n):
        h = self.half
        out = (self.words[h], self.words[1 - h], self.written[1 - h])
        self.written[1 - h] = 0
        self.written[h] = n
        self.half = 1 - h
        return out


def totals_of(x):
    xf = x.float()
    m = xf.amax(-1)
    d = torch.exp(xf - m[:, None]).sum(-1)
    return torch.stack([m, d], -1).contiguous()


def run(x, y, ws, totals, block, warps, stages, mode, G, max_polls=1 << 16, spin_asm=None,
        maxnreg=0):
    if spin_asm is None:
        spin_asm = int(os.environ.get("SPIN_ASM", "1")) if x.is_cuda else 0
    n_rows, n_cols = x.shape
    segs = triton.cdiv(n_cols, block)
    n_items = n_rows * segs
    slots, stale, n_stale = ws.take(n_items)
    if mode >= 3:  # 3: LAG 1, 4: LAG 2 (EARLY=1: first poll before the reduction)
        return lag_kernel[(G,)](x, y, slots, stale, n_items, n_stale, n_cols, x.stride(0),
                                y.stride(0), G, SEGS=segs, BLOCK=block, STAGES=stages,
                                LAG=mode - 2, MAX_POLLS=max_polls,
                                EARLY=int(os.environ.get("EARLY", "1")), ASM=int(x.is_cuda),
                                num_warps=warps, num_stages=stages,
                                **({"maxnreg": maxnreg} if maxnreg else {}))
    return pipe_kernel[(G,)](x, y, slots, stale, totals, n_items, n_stale, n_cols, x.stride(0),
                             y.stride(0), G, SEGS=segs, BLOCK=block, STAGES=stages, MODE=mode,
                             MAX_POLLS=max_polls, SPIN_ASM=spin_asm, num_warps=warps, num_stages=stages)


def ref_softmax(x):
    return torch.softmax(x.double(), -1)


def err(y, x):
    return (y.double() - ref_softmax(x)).abs().max().item()


def interpret_checks():
    ws = Workspace("cpu", 1 << 12)
    for (r, c), dt, mode in itertools.product([(3, 1000), (4, 512)], [torch.float16, torch.float32],
                                               [1, 2, 3]):
        x = torch.randn(r, c, dtype=dt) * 3
        x[0, 5] = float("-inf")
        y = torch.empty_like(x)
        block = 128
        segs = triton.cdiv(c, block)
        run(x, y, ws, totals_of(x), block, 4, 1, mode, segs, max_polls=4)
        e, et = err(y, x), err(torch.softmax(x, -1), x)
        print(f"interp {r}x{c} {dt} mode {mode}: err {e:.2e} torch {et:.2e}",
              "OK" if e <= 1.1 * et + 1e-6 else "FAIL")


def gpu_main():
    out = os.environ.get("OUT", "/tmp")
    log = open(os.path.join(out, "pipe_stream.log"), "a")

    def say(*a):
        s = " ".join(str(v) for v in a)
        print(s, flush=True)
        log.write(s + "\n")
        log.flush()

    import triton.testing
    import flashtune
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    say("device", torch.cuda.get_device_name(), "torch", torch.__version__, "triton",
        triton.__version__, time.strftime("%Y-%m-%d %H:%M"))
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    big2 = torch.empty_like(big)

    def bench(fn):
        return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3

    copy_rate = (2 << 30) / (bench(lambda: big2.copy_(big)) * 1e-6) / 1e9
    del big, big2
    say(f"1 GiB copy: {copy_rate:.0f} GB/s")
    ws = Workspace("cuda")
    shapes = [tuple(int(v) for v in s.split("x"))
              for s in os.environ.get("SHAPES", "16x1048576,128x262144").split(",")]
    dtypes = os.environ.get("DTYPES", "float16,bfloat16").split(",")
    modes = [int(m) for m in os.environ.get("MODES", "2").split(",")]
    configs = eval(os.environ.get("CONFIGS", "None")) or [
        # (block, warps, stages, programs per SM; the grid is at least the tiles of a row)
        (8192, 8, 1, 1), (8192, 8, 2, 1), (8192, 8, 3, 1), (8192, 8, 4, 1),
        (8192, 4, 3, 1), (8192, 16, 3, 1), (4096, 4, 3, 2), (4096, 8, 4, 2),
        (4096, 4, 6, 2), (16384, 16, 3, 1), (16384, 8, 2, 1), (8192, 8, 3, 2), (2048, 4, 4, 4),
    ]
    rows = []
    for (n_rows, n_cols), dname in itertools.product(shapes, dtypes):
        dt = getattr(torch, dname)
        x = torch.randn(n_rows, n_cols, device="cuda", dtype=dt) * 4
        y = torch.empty_like(x)
        totals = totals_of(x)
        nbytes = 2 * x.numel() * x.element_size()
        pct = lambda us: 100 * nbytes / (us * 1e-6) / 1e9 / copy_rate  # noqa: E731
        t_ft = bench(lambda: flashtune.softmax(x, -1))
        t_torch = bench(lambda: torch.softmax(x, -1))
        t_copy = bench(lambda: y.copy_(x))
        say(f"{n_rows}x{n_cols} {dname}: flashtune {t_ft:.1f} us ({pct(t_ft):.0f}%), torch "
            f"{t_torch:.1f}, copy {t_copy:.1f} ({pct(t_copy):.0f}%), 80% line {t_copy * 0 + nbytes / (0.8 * copy_rate * 1e3):.1f}")
        rows.append((f"{n_rows}x{n_cols}", dname, "flashtune default", t_ft, pct(t_ft), "-"))
        for cfg, mode in itertools.product(configs, modes):
            block, warps, stages, pps = cfg[:4]
            maxnreg = cfg[4] if len(cfg) > 4 else 0
            segs = triton.cdiv(n_cols, block)
            G = max(segs, min(sms * pps, n_rows * segs))
            # MODE 2 waits on partners: every program must run at once.
            if (mode >= 2 and G > sms * 4) or segs > 512:
                continue
            try:
                k = run(x, y, ws, totals, block, warps, stages, mode, G, maxnreg=maxnreg)
                torch.cuda.synchronize()
                fit = min(65536 // (-(-k.n_regs * 32 // 256) * 256 * warps), 64 // warps,
                          (228 * 1024) // max(k.metadata.shared, 1))
                if mode >= 2 and G > fit * sms:
                    say(f"  b{block} w{warps} s{stages} G{G} mode{mode} r{maxnreg}: skipped, "
                        f"{fit} programs fit per SM ({k.n_regs} registers)")
                    continue
                e = err(y, x) if mode else (y != x).sum().item()
                t = bench(lambda: run(x, y, ws, totals, block, warps, stages, mode, G,
                                      maxnreg=maxnreg))
                e2 = err(y, x) if mode else (y != x).sum().item()
                regs, shared = k.n_regs, k.metadata.shared
            except Exception as exc:  # noqa: BLE001
                say(f"  b{block} w{warps} s{stages} G{G} mode{mode}: FAILED {type(exc).__name__}: {str(exc)[:200]}")
                continue
            say(f"  b{block} w{warps} s{stages} G{G} mode{mode} r{maxnreg}: {t:.1f} us ({pct(t):.0f}%) err "
                f"{e:.2e}/{e2:.2e} regs {regs} smem {shared}")
            rows.append((f"{n_rows}x{n_cols}", dname, f"b{block} w{warps} s{stages} G{G} m{mode} r{maxnreg}",
                         t, pct(t), f"{max(e, e2):.1e}"))
    say("\n| shape | dtype | kernel | us | % copy | err |\n|---|---|---|---|---|---|")
    for r in rows:
        say(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.1f} | {r[4]:.0f}% | {r[5]} |")


if __name__ == "__main__":
    if os.environ.get("INTERPRET") == "1":
        interpret_checks()
    else:
        gpu_main()
