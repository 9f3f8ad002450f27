"""Prototype: the "stream" schedule for long rows (few rows, huge columns).

P = SMs x pps programs, each owning one column segment (of at most BLOCK columns) of the rows
g, g + G, g + 2G, ... (G row groups, S = P / G segments per row). A program keeps its
segments in registers: it loads DEPTH rows ahead, reduces the current row's segment to a
partial (m, d), publishes it, and the last of the row's S programs to arrive (an acq_rel
counter) merges the S partials into the row's total (one 64-bit word). Each program then waits
for the previous row's total and writes that row's segment from the registers it still holds.
x is read from HBM once and never re-read; the reads of later rows overlap the writes of
earlier ones. Counters and totals come in two halves that alternate between launches; each
launch zeroes the other half.

Usage on the GPU: python stream_proto.py [shapes] ; prints a table and checks every output
against float64.
"""
import importlib.util
import itertools
import os
import sys
import tempfile
import time

import jinja2
import torch
import triton
import triton.language as tl

SRC = r'''
import triton
import triton.language as tl


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
def _seg_stats(x, mask):
    xf = tl.where(mask, x.to(tl.float32), float("-inf"))
    m = tl.max(xf, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(tl.exp2((xf - m_safe) * 1.4426950408889634), axis=0)
    return m, d


@triton.jit
def _row_total(slots, row, S, idx, words, MAX_POLLS: tl.constexpr):
    """The row's (M, D) from its S published partial words (zero: not yet), polled until all
    are there. `words`: a first poll the caller issued early."""
    polls = 0
    while (tl.max(tl.where(words == 0, 1, 0), axis=0) == 1) & (polls < MAX_POLLS):
        words = tl.load(slots + row * S + idx, mask=idx < S, other=1, volatile=True)
        polls += 1
    pm, pd = _unpack(words)
    pm = tl.where(idx < S, pm, float("-inf"))
    pd = tl.where(idx < S, pd, 0.0)
    M = tl.max(pm, axis=0)
    M_safe = tl.where(M == float("-inf"), 0.0, M)
    D = tl.sum(pd * tl.exp2((pm - M_safe) * 1.4426950408889634), axis=0)
    return M, D


@triton.jit
def _write(y_ptr, y_stride, r, x, M, D, cols, mask):
    y = tl.exp2((x.to(tl.float32) - M) * 1.4426950408889634) * (1.0 / D)
    tl.store(y_ptr + r.to(tl.int64) * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def stream_kernel(x_ptr, y_ptr, slots, stale, totals, n_stale,
                  n_rows, n_cols, x_stride, y_stride, seg_len, S, G, P,
                  BLOCK: tl.constexpr, SPOW2: tl.constexpr, MAX_POLLS: tl.constexpr):
    # No fences and no counters: a partial is one 64-bit word published by a relaxed exchange;
    # every program polls its row's S words itself (an acq_rel counter per row cost a fence
    # per row in every program: 2x slower).
    p = tl.program_id(0)
    s = p % S
    g = p // S
    lane = tl.arange(0, BLOCK)
    idx = tl.arange(0, SPOW2)
    cols = s * seg_len + lane
    seg_end = tl.minimum(s * seg_len + seg_len, n_cols)
    cmask = cols < seg_end
    n_mine = tl.cdiv(n_rows - g, G)
{% for k in range(depth) %}
    x{{ k }} = tl.load(x_ptr + (g + {{ k }} * G).to(tl.int64) * x_stride + cols,
                       mask=cols < tl.where(n_mine > {{ k }}, seg_end, 0), other=0.0)
{% endfor %}
    # Segments held for the output, LAG rows behind the one being reduced: h1 the newest.
    # Each starts as its own zeros: Triton carries a name through a loop only if the body
    # rebinds it to a value other than its value before the loop, and `h1 = xc` (= x0 before
    # the loop on the first pass) would look unchanged: the loop would keep the prologue's row.
{% for k in range(1, lag + 1) %}
    h{{ k }} = tl.zeros_like(x0)
{% endfor %}
    for i in range(0, n_mine):
        r = g + i * G
        # First poll of the partials of the row written this turn, issued before the
        # reduction so that its latency hides behind it (all ones while i < LAG: unused).
        words = tl.load(slots + (r - {{ lag }} * G) * S + idx,
                        mask=idx < tl.where(i >= {{ lag }}, S, 0), other=1, volatile=True)
        xc = x0
{% for k in range(depth - 1) %}
        x{{ k }} = x{{ k + 1 }}
{% endfor %}
        x{{ depth - 1 }} = tl.load(x_ptr + (r + {{ depth }} * G).to(tl.int64) * x_stride + cols,
                                   mask=cols < tl.where(n_mine > i + {{ depth }}, seg_end, 0),
                                   other=0.0)
        m, d = _seg_stats(xc, cmask)
        tl.atomic_xchg(slots + r * S + s, _pack(m, d), sem="relaxed")
        if i >= {{ lag }}:
{% if nosync %}
            M = tl.load(totals + (r - {{ lag }} * G) * 2)
            D = tl.load(totals + (r - {{ lag }} * G) * 2 + 1)
{% else %}
            M, D = _row_total(slots, r - {{ lag }} * G, S, idx, words, MAX_POLLS)
{% endif %}
            _write(y_ptr, y_stride, r - {{ lag }} * G, h{{ lag }}, M, D, cols, cmask)
{% for k in range(lag, 1, -1) %}
        h{{ k }} = h{{ k - 1 }}
{% endfor %}
        h1 = xc
{% for k in range(lag, 0, -1) %}
    if n_mine >= {{ k }}:
        row = g + (n_mine - {{ k }}) * G
{% if nosync %}
        M = tl.load(totals + row * 2)
        D = tl.load(totals + row * 2 + 1)
{% else %}
        words = tl.load(slots + row * S + idx, mask=idx < S, other=1, volatile=True)
        M, D = _row_total(slots, row, S, idx, words, MAX_POLLS)
{% endif %}
        _write(y_ptr, y_stride, row, h{{ k }}, M, D, cols, cmask)
{% endfor %}
    for j in range(p, n_stale, P):
        tl.store(stale + j, 0)
'''

_MODS = {}


# Triton's default of 3 stages pipelines the in-loop load into a shared-memory ring that a
# segment held two iterations (x -> xc -> xp) outlives: wrong outputs on the GPU.
NUM_STAGES = int(os.environ.get("NUM_STAGES", "1"))
# Diagnostic: each row's (M, D) read from `totals` (computed by torch beforehand) instead of
# polled from the partials: the schedule's cost without its synchronization.
NOSYNC = int(os.environ.get("NOSYNC", "0"))


def kernel_for(depth, lag=1):
    if (depth, lag) not in _MODS:
        src = jinja2.Template(SRC, undefined=jinja2.StrictUndefined).render(
            depth=depth, lag=lag, nosync=NOSYNC)
        d = tempfile.mkdtemp(prefix="stream_proto_")
        path = os.path.join(d, f"stream_d{depth}_l{lag}.py")
        with open(path, "w") as f:
            f.write(src)
        spec = importlib.util.spec_from_file_location(f"stream_d{depth}_l{lag}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODS[depth, lag] = mod.stream_kernel
    return _MODS[depth, lag]


class Workspace:
    def __init__(self, device, cap=1 << 20):
        self.words = torch.zeros((2, cap), dtype=torch.int64, device=device)
        self.half = 0
        self.written = [0, 0]
        self._totals = {}

    def totals_for(self, x):
        """(M, D) per row, computed by torch (the NOSYNC diagnostic only)."""
        if not NOSYNC:
            return self.words[0]
        # Keyed by the tensor object, kept alive here so no later tensor reuses its id.
        if id(x) not in self._totals:
            xf = x.float()
            m = xf.amax(-1)
            d = torch.exp(xf - m[:, None]).sum(-1)
            self._totals[id(x)] = (x, torch.stack([m, d], -1).contiguous())
        return self._totals[id(x)][1]


def stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms, lag=1):
    n_rows, n_cols = x.shape
    P = sms * pps
    S = P // groups
    P = S * groups
    seg_len = triton.cdiv(triton.cdiv(n_cols, S), 16) * 16
    if seg_len > block:
        return None
    h = ws.half
    compiled = kernel_for(depth, lag)[(P,)](
        x, y, ws.words[h], ws.words[1 - h], ws.totals_for(x), ws.written[1 - h], n_rows, n_cols, x.stride(0),
        y.stride(0), seg_len, S, groups, P,
        BLOCK=block, SPOW2=triton.next_power_of_2(S), MAX_POLLS=1 << 16, num_warps=warps,
        num_stages=NUM_STAGES)
    ws.written[1 - h] = 0
    ws.written[h] = n_rows * S
    ws.half = 1 - h
    return compiled


def main():
    import flashtune
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    shapes = [tuple(int(v) for v in s.split("x")) for s in
              (sys.argv[1] if len(sys.argv) > 1 else "16x1048576,128x262144").split(",")]
    dtypes = [getattr(torch, d) for d in os.environ.get("DTYPES", "float16,bfloat16,float32").split(",")]
    big = torch.empty(1 << 29, dtype=torch.float16, device=dev)
    big2 = torch.empty_like(big)
    t_big = triton.testing.do_bench(lambda: big2.copy_(big), return_mode="median")
    copy_bw = 2 * big.numel() * 2 / t_big / 1e6
    print(f"device {torch.cuda.get_device_name()} sms {sms} torch {torch.__version__} triton {triton.__version__}")
    print(f"1 GiB copy: {copy_bw:.0f} GB/s")
    ws = Workspace(dev)
    pairs = [tuple(int(v) for v in pw.split("/")) for pw in
             os.environ.get("PPS_WARPS", "2/8,4/4,2/4").split(",")]
    grid = [(pps, warps, g, dd, lag) for (pps, warps), g, dd, lag in itertools.product(
        pairs,
        [int(v) for v in os.environ.get("GROUPS", "1,2,4").split(",")],
        [int(v) for v in os.environ.get("DEPTHS", "1,2").split(",")],
        [int(v) for v in os.environ.get("LAGS", "1,2,3").split(",")])]
    rows = []
    for (R, C), dt in itertools.product(shapes, dtypes):
        torch.manual_seed(0)
        x = torch.randn(R, C, device=dev, dtype=dt)
        ref = torch.softmax(x.double(), dim=-1)
        err_t = (torch.softmax(x, -1).double() - ref).abs().max().item()
        mb = x.numel() * x.element_size()
        t_torch = triton.testing.do_bench(lambda: torch.softmax(x, -1), return_mode="median")
        t_ft = triton.testing.do_bench(lambda: flashtune.softmax(x, -1), return_mode="median")
        yc = torch.empty_like(x)
        t_copy = triton.testing.do_bench(lambda: yc.copy_(x), return_mode="median")
        pct = lambda t: 100 * 2 * mb / t / 1e6 / copy_bw
        print(f"\n{R}x{C} {dt}: torch {t_torch*1e3:.1f} us, flashtune {t_ft*1e3:.1f} us ({pct(t_ft):.0f}%), "
              f"same-size copy {t_copy*1e3:.1f} us ({pct(t_copy):.0f}%), err torch {err_t:.2e}")
        best = None
        for pps, warps, groups, depth, lag in grid:
            S = sms * pps // groups
            block = triton.next_power_of_2(triton.cdiv(triton.cdiv(C, S), 16) * 16)
            if block > 16384 or block * x.element_size() // (32 * warps) > 64:
                continue
            y = torch.full_like(x, float("nan"))
            try:
                ck = stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms, lag)
                torch.cuda.synchronize()
                regs = ck.n_regs
                fit = min(65536 // max(regs * 32 * warps, 1), 64 // warps)
                if fit < pps:
                    print(f"  pps={pps} w={warps} G={groups} D={depth} L={lag}: {regs} regs, "
                          f"{fit} programs fit per SM: skipped")
                    continue
                err = (y.double() - ref).abs().max().item()
                ok = err <= 1.1 * err_t + 2 * 2 ** -10 * ref.max().item() and not torch.isnan(y).any()
                # repeat to check the alternation of halves
                for _ in range(3):
                    y.fill_(float("nan"))
                    stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms, lag)
                torch.cuda.synchronize()
                err2 = (y.double() - ref).abs().max().item()
                ok = ok and err2 <= 1.1 * err_t + 2 * 2 ** -10 * ref.max().item()
                if not ok:
                    print(f"  pps={pps} w={warps} G={groups} D={depth} L={lag}: WRONG "
                          f"err={err:.2e}/{err2:.2e}")
                    continue
                t = triton.testing.do_bench(
                    lambda: stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms, lag),
                    return_mode="median")
            except Exception as e:  # noqa: BLE001
                print(f"  pps={pps} w={warps} G={groups} D={depth} L={lag} B={block}: FAIL {type(e).__name__} {str(e)[:200]}")
                continue
            line = (f"  pps={pps} w={warps} G={groups} D={depth} L={lag} B={block} r{regs}: {t*1e3:.1f} us "
                    f"({pct(t):.0f}%) {'ok' if ok else 'WRONG err=%.2e' % max(err, err2)}")
            print(line)
            if ok and (best is None or t < best[0]):
                best = (t, line)
        rows.append((f"{R}x{C}", str(dt).split(".")[-1], t_torch, t_ft, t_copy, best))
    print("\n| shape | dtype | torch us | flashtune us (%) | copy us (%) | stream best us (%) | config |")
    print("|---|---|---|---|---|---|---|")
    for name, dt, tt, tf, tc, best in rows:
        mb = 0
        R, C = (int(v) for v in name.split("x"))
        el = {"float16": 2, "bfloat16": 2, "float32": 4}[dt]
        pct = lambda t: 100 * 2 * R * C * el / t / 1e6 / copy_bw
        b = f"{best[0]*1e3:.1f} ({pct(best[0]):.0f}%) | {best[1].split(':')[0].strip()}" if best else "- | -"
        print(f"| {name} | {dt} | {tt*1e3:.1f} | {tf*1e3:.1f} ({pct(tf):.0f}%) | {tc*1e3:.1f} ({pct(tc):.0f}%) | {b} |")


if __name__ == "__main__":
    main()
