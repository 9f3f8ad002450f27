"""Prototype: the 'phased' persistent split. A grid of P programs; program p owns a contiguous
range of chunks of the flattened (row, chunk) sequence. Phase 1 streams its chunks and publishes
each chunk's (m, d); phase 2 walks its rows backwards, waits for each row's partials, merges,
and re-reads its chunks backwards (from L2) to write y. One barrier per row, no tickets."""
import triton
import triton.language as tl
import torch

LOG2E = 1.4426950408889634


@triton.jit
def _pack(m, d):
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    d_bits = d.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@triton.jit
def _unpack(words):
    m = ((words >> 32) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    d = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return m, d


@triton.jit
def _chunk_stats(x):
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(tl.exp2((x - m_safe) * 1.4426950408889634), axis=0)


@triton.jit
def phased_kernel(x_ptr, y_ptr, slots, stale, n_cols, xs, ys, n_chunks, cpr, n_stale, n_programs,
                  BLOCK: tl.constexpr, PARTS: tl.constexpr, STAGES: tl.constexpr,
                  MAX_POLLS: tl.constexpr):
    pid = tl.program_id(0)
    lo = (pid.to(tl.int64) * n_chunks) // n_programs
    hi = ((pid.to(tl.int64) + 1) * n_chunks) // n_programs
    cols = tl.arange(0, BLOCK)
    for c in tl.range(lo, hi, num_stages=STAGES):
        row = c // cpr
        offs = (c - row * cpr) * BLOCK + cols
        x = tl.load(x_ptr + row * xs + offs, mask=offs < n_cols, other=float("-inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m, d = _chunk_stats(x)
        tl.atomic_xchg(slots + c, _pack(m, d), sem="relaxed")
    # zero the launch before's words past... (each program zeroes a strided share of stale)
    for i in range(pid, n_stale, n_programs):
        tl.store(stale + i, 0)
    if hi > lo:
        r_lo = lo // cpr
        r_hi = (hi - 1) // cpr
        parts = tl.arange(0, PARTS)
        for k in range(0, r_hi - r_lo + 1):
            row = r_hi - k
            words_ptr = slots + row * cpr + parts
            pmask = parts < cpr
            words = tl.load(words_ptr, mask=pmask, other=-1, volatile=True)
            polls = 0
            while (tl.max(tl.where(words == 0, 1, 0), axis=0) == 1) & (polls < MAX_POLLS):
                words = tl.load(words_ptr, mask=pmask, other=-1, volatile=True)
                polls += 1
            if tl.max(tl.where(words == 0, 1, 0), axis=0) == 0:
                m_parts, d_parts = _unpack(words)
                m_parts = tl.where(pmask, m_parts, float("-inf"))
                d_parts = tl.where(pmask, d_parts, 0.0)
                m = tl.max(m_parts, axis=0)
                m_safe = tl.where(m == float("-inf"), 0.0, m)
                d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
            else:
                m = float("-inf")
                d = 0.0
                for cb in range(0, cpr):
                    offs = cb * BLOCK + cols
                    x = tl.load(x_ptr + row * xs + offs, mask=offs < n_cols,
                                other=float("-inf")).to(tl.float32)
                    m_c, d_c = _chunk_stats(x)
                    m_new = tl.maximum(m, m_c)
                    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                    d = d * tl.exp2((m - m_safe) * 1.4426950408889634) + d_c * tl.exp2((m_c - m_safe) * 1.4426950408889634)
                    m = m_new
            inv_d = 1.0 / d
            c_first = tl.maximum(lo, row * cpr)
            c_last = tl.minimum(hi, (row + 1) * cpr)
            for j in tl.range(0, c_last - c_first, num_stages=STAGES):
                c = c_last - 1 - j
                offs = (c - row * cpr) * BLOCK + cols
                mask = offs < n_cols
                x = tl.load(x_ptr + row * xs + offs, mask=mask, other=0.0,
                            eviction_policy="evict_first").to(tl.float32)
                y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
                tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=mask,
                         eviction_policy="evict_first")


def launch(x, y, block=4096, per_sm=2, warps=8, stages=1, sms=None, max_polls=1 << 16):
    from flashtune.gen import row_sync
    n_rows, n_cols = x.shape
    cpr = triton.cdiv(n_cols, block)
    n_chunks = n_rows * cpr
    if sms is None:
        sms = row_sync.sm_count(x.device.index) if x.is_cuda else 4
    P = min(n_chunks, per_sm * sms)
    with row_sync.polled_partials(x.device, n_chunks) as ws:
        return phased_kernel[(P,)](x, y, ws.slots, ws.stale, n_cols, x.stride(0), y.stride(0), n_chunks,
                            cpr, ws.n_stale, P, BLOCK=block, PARTS=triton.next_power_of_2(cpr),
                            STAGES=stages, MAX_POLLS=max_polls, num_warps=warps)
