"""Experimental kernels (scratch, not product code): fused split (one launch, streamed
segments, L2 re-read) and the online kernel with register prefetch."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _chunk_lane_update(m_lane, d_lane, x):
    m_new = tl.maximum(m_lane, x)
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    d_lane = d_lane * tl.exp2((m_lane - m_safe) * 1.4426950408889634) + tl.exp2((x - m_safe) * 1.4426950408889634)
    return m_new, d_lane


@triton.jit
def _seg_stats(x_row, lo, hi, BLOCK: tl.constexpr, PREFETCH: tl.constexpr, HINT: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    m_lane = tl.full([BLOCK], float("-inf"), tl.float32)
    d_lane = tl.zeros([BLOCK], tl.float32)
    if PREFETCH:
        offs = lo + cols
        x_next = tl.load(x_row + offs, mask=offs < hi, other=float("-inf"), eviction_policy=HINT)
        for start in range(lo, hi, BLOCK):
            x = x_next.to(tl.float32)
            offs = start + BLOCK + cols
            x_next = tl.load(x_row + offs, mask=offs < hi, other=float("-inf"), eviction_policy=HINT)
            m_lane, d_lane = _chunk_lane_update(m_lane, d_lane, x)
    else:
        for start in range(lo, hi, BLOCK):
            offs = start + cols
            x = tl.load(x_row + offs, mask=offs < hi, other=float("-inf"), eviction_policy=HINT).to(tl.float32)
            m_lane, d_lane = _chunk_lane_update(m_lane, d_lane, x)
    m = tl.max(m_lane, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_lane * tl.exp2((m_lane - m_safe) * 1.4426950408889634), axis=0)
    return m, d


@triton.jit
def _seg_write(x_row, y_row, lo, hi, m, inv_d, BLOCK: tl.constexpr, PREFETCH: tl.constexpr,
               STORE_HINT: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(tl.maximum(hi - lo, 0), BLOCK)
    if PREFETCH:
        offs = lo + (n_chunks - 1) * BLOCK + cols
        x_next = tl.load(x_row + offs, mask=(offs < hi) & (offs >= lo), other=0.0, eviction_policy="evict_first")
        for i in range(0, n_chunks):
            offs = lo + (n_chunks - 1 - i) * BLOCK + cols
            x = x_next.to(tl.float32)
            offs_n = offs - BLOCK
            x_next = tl.load(x_row + offs_n, mask=(offs_n >= lo) & (offs_n < hi), other=0.0, eviction_policy="evict_first")
            y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
            tl.store(y_row + offs, y.to(y_row.dtype.element_ty), mask=offs < hi, eviction_policy=STORE_HINT)
    else:
        for i in range(0, n_chunks):
            offs = lo + (n_chunks - 1 - i) * BLOCK + cols
            x = tl.load(x_row + offs, mask=offs < hi, other=0.0, eviction_policy="evict_first").to(tl.float32)
            y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
            tl.store(y_row + offs, y.to(y_row.dtype.element_ty), mask=offs < hi, eviction_policy=STORE_HINT)


@triton.jit
def fused_split(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, n_rows, n_cols, sx, sy, seg_len, n_programs,
                BLOCK: tl.constexpr, SPLITS: tl.constexpr, PREFETCH: tl.constexpr,
                PHASE: tl.constexpr, STORE_HINT: tl.constexpr):
    if PHASE == 0:
        prog = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    else:
        prog = tl.program_id(0)
    row = (prog // SPLITS).to(tl.int64)
    lo = (prog % SPLITS) * seg_len
    hi = tl.minimum(lo + seg_len, n_cols)
    x_row = x_ptr + row * sx
    y_row = y_ptr + row * sy
    if PHASE != 2:
        m_seg, d_seg = _seg_stats(x_row, lo, hi, BLOCK, PREFETCH, "evict_last")
        tl.store(m_ptr + prog, m_seg)
        tl.store(d_ptr + prog, d_seg)
    if PHASE != 1:
        if PHASE == 0:
            arrivals = sync_ptr + 2 + row
            tl.atomic_add(arrivals, 1, sem="release")
            count = tl.atomic_add(arrivals, 0, sem="acquire")
            while count < SPLITS:
                count = tl.atomic_add(arrivals, 0, sem="acquire")
        parts = tl.arange(0, SPLITS)
        m_parts = tl.load(m_ptr + row * SPLITS + parts, cache_modifier=".cg")
        d_parts = tl.load(d_ptr + row * SPLITS + parts, cache_modifier=".cg")
        m = tl.max(m_parts, axis=0)
        m_safe = tl.where(m == float("-inf"), 0.0, m)
        d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
        _seg_write(x_row, y_row, lo, hi, m, 1.0 / d, BLOCK, PREFETCH, STORE_HINT)
    if PHASE == 0:
        departures = sync_ptr + 2 + n_rows + row
        left = tl.atomic_add(departures, 1, sem="relaxed")
        if left == SPLITS - 1:
            tl.atomic_xchg(arrivals, 0, sem="relaxed")
            tl.atomic_xchg(departures, 0, sem="relaxed")
        done = tl.atomic_add(sync_ptr + 1, 1, sem="relaxed")
        if done == n_programs - 1:
            tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
            tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


_SYNC = {}


def fused_split_launch(x, y, block, splits, warps, prefetch, one_launch=True, store_hint="",
                       stages=1):
    n_rows, n_cols = x.shape
    seg_len = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
    n_programs = n_rows * splits
    stats = torch.empty((2, n_programs), dtype=torch.float32, device=x.device)
    need = 2 + 2 * n_rows
    c = _SYNC.get(x.device)
    if c is None or c.numel() < need:
        c = torch.zeros(max(need, 1024), dtype=torch.int32, device=x.device)
        _SYNC[x.device] = c
    for phase in ((0,) if one_launch else (1, 2)):
        fused_split[(n_programs,)](x, y, stats[0], stats[1], c, n_rows, n_cols, x.stride(0), y.stride(0),
                                   seg_len, n_programs, BLOCK=block, SPLITS=splits, PREFETCH=prefetch,
                                   PHASE=phase, STORE_HINT=store_hint, num_warps=warps, num_stages=stages)


@triton.jit
def online_pf(x_ptr, y_ptr, n_cols, sx, sy, BLOCK: tl.constexpr, PREFETCH: tl.constexpr,
              STORE_HINT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * sx
    y_row = y_ptr + row * sy
    m, d = _seg_stats(x_row, 0, n_cols, BLOCK, PREFETCH, "evict_last")
    _seg_write(x_row, y_row, 0, n_cols, m, 1.0 / d, BLOCK, PREFETCH, STORE_HINT)


def online_pf_launch(x, y, block, warps, prefetch, store_hint="", stages=1):
    online_pf[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block,
                             PREFETCH=prefetch, STORE_HINT=store_hint, num_warps=warps,
                             num_stages=stages)
