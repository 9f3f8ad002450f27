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
def _publish(part_m, part_d, cnt, tot, r, s, S, m, d, SPOW2: tl.constexpr):
    tl.store(part_m + r * S + s, m)
    tl.store(part_d + r * S + s, d)
    c = tl.atomic_add(cnt + r, 1, sem="acq_rel")
    if c == S - 1:
        idx = tl.arange(0, SPOW2)
        pm = tl.load(part_m + r * S + idx, mask=idx < S, other=float("-inf"), cache_modifier=".cg")
        pd = tl.load(part_d + r * S + idx, mask=idx < S, other=0.0, cache_modifier=".cg")
        M = tl.max(pm, axis=0)
        M_safe = tl.where(M == float("-inf"), 0.0, M)
        D = tl.sum(pd * tl.exp2((pm - M_safe) * 1.4426950408889634), axis=0)
        tl.atomic_xchg(tot + r, _pack(M, D), sem="release")


@triton.jit
def _write(y_ptr, y_stride, tot, r, x, cols, mask, MAX_POLLS: tl.constexpr):
    w = tl.load(tot + r, volatile=True)
    polls = 0
    while (w == 0) & (polls < MAX_POLLS):
        w = tl.load(tot + r, volatile=True)
        polls += 1
    M, D = _unpack(w)
    y = tl.exp2((x.to(tl.float32) - M) * 1.4426950408889634) * (1.0 / D)
    tl.store(y_ptr + r.to(tl.int64) * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def stream_kernel(x_ptr, y_ptr, part_m, part_d, cnt, tot, stale_cnt, stale_tot, n_stale,
                  n_rows, n_cols, x_stride, y_stride, seg_len, S, G, P,
                  BLOCK: tl.constexpr, SPOW2: tl.constexpr, MAX_POLLS: tl.constexpr):
    p = tl.program_id(0)
    s = p % S
    g = p // S
    lane = tl.arange(0, BLOCK)
    cols = s * seg_len + lane
    seg_end = tl.minimum(s * seg_len + seg_len, n_cols)
    cmask = cols < seg_end
    n_mine = tl.cdiv(n_rows - g, G)
{% for k in range(depth) %}
    x{{ k }} = tl.load(x_ptr + (g + {{ k }} * G).to(tl.int64) * x_stride + cols,
                       mask=cols < tl.where(n_mine > {{ k }}, seg_end, 0), other=0.0)
{% endfor %}
    xp = x0
    for i in range(0, n_mine):
        r = g + i * G
        xc = x0
{% for k in range(depth - 1) %}
        x{{ k }} = x{{ k + 1 }}
{% endfor %}
        x{{ depth - 1 }} = tl.load(x_ptr + (r + {{ depth }} * G).to(tl.int64) * x_stride + cols,
                                   mask=cols < tl.where(n_mine > i + {{ depth }}, seg_end, 0),
                                   other=0.0)
        m, d = _seg_stats(xc, cmask)
        _publish(part_m, part_d, cnt, tot, r, s, S, m, d, SPOW2)
        if i > 0:
            _write(y_ptr, y_stride, tot, r - G, xp, cols, cmask, MAX_POLLS)
        xp = xc
    if n_mine > 0:
        _write(y_ptr, y_stride, tot, g + (n_mine - 1) * G, xp, cols, cmask, MAX_POLLS)
    for j in range(p, n_stale, P):
        tl.store(stale_cnt + j, 0)
        tl.store(stale_tot + j, 0)
'''

_MODS = {}


def kernel_for(depth):
    if depth not in _MODS:
        src = jinja2.Template(SRC, undefined=jinja2.StrictUndefined).render(depth=depth)
        d = tempfile.mkdtemp(prefix="stream_proto_")
        path = os.path.join(d, f"stream_d{depth}.py")
        with open(path, "w") as f:
            f.write(src)
        spec = importlib.util.spec_from_file_location(f"stream_d{depth}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        _MODS[depth] = mod.stream_kernel
    return _MODS[depth]


class Workspace:
    def __init__(self, device, cap=1 << 16):
        self.cnt = torch.zeros((2, cap), dtype=torch.int32, device=device)
        self.tot = torch.zeros((2, cap), dtype=torch.int64, device=device)
        self.part = torch.empty((2, 1 << 20), dtype=torch.float32, device=device)
        self.half = 0
        self.written = [0, 0]


def stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms):
    n_rows, n_cols = x.shape
    P = sms * pps
    S = P // groups
    P = S * groups
    seg_len = triton.cdiv(triton.cdiv(n_cols, S), 16) * 16
    if seg_len > block:
        return None
    h = ws.half
    kernel_for(depth)[(P,)](
        x, y, ws.part[0], ws.part[1], ws.cnt[h], ws.tot[h], ws.cnt[1 - h], ws.tot[1 - h],
        ws.written[1 - h], n_rows, n_cols, x.stride(0), y.stride(0), seg_len, S, groups, P,
        BLOCK=block, SPOW2=triton.next_power_of_2(S), MAX_POLLS=1 << 16, num_warps=warps)
    ws.written[1 - h] = 0
    ws.written[h] = n_rows
    ws.half = 1 - h
    return y


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
    grid = list(itertools.product(
        [int(v) for v in os.environ.get("PPS", "2,4").split(",")],
        [int(v) for v in os.environ.get("WARPS", "4,8").split(",")],
        [int(v) for v in os.environ.get("GROUPS", "1,2,4").split(",")],
        [int(v) for v in os.environ.get("DEPTHS", "1,2,3").split(",")]))
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
        for pps, warps, groups, depth in grid:
            S = sms * pps // groups
            block = triton.next_power_of_2(triton.cdiv(triton.cdiv(C, S), 16) * 16)
            if block > 16384 or block * x.element_size() // (32 * warps) > 64:
                continue
            y = torch.full_like(x, float("nan"))
            try:
                stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms)
                torch.cuda.synchronize()
                err = (y.double() - ref).abs().max().item()
                ok = err <= 1.1 * err_t + 2 * 2 ** -10 * ref.max().item() and not torch.isnan(y).any()
                # repeat to check the alternation of halves
                for _ in range(3):
                    y.fill_(float("nan"))
                    stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms)
                torch.cuda.synchronize()
                err2 = (y.double() - ref).abs().max().item()
                ok = ok and err2 <= 1.1 * err_t + 2 * 2 ** -10 * ref.max().item()
                t = triton.testing.do_bench(
                    lambda: stream_softmax(x, y, ws, pps, warps, groups, depth, block, sms),
                    return_mode="median")
            except Exception as e:  # noqa: BLE001
                print(f"  pps={pps} w={warps} G={groups} D={depth} B={block}: FAIL {type(e).__name__} {str(e)[:200]}")
                continue
            line = (f"  pps={pps} w={warps} G={groups} D={depth} B={block}: {t*1e3:.1f} us "
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
