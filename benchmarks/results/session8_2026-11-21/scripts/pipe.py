"""Scratch prototype: a persistent, pipelined split softmax (fp32 stats, exp2, one launch).

Items are (row, segment) pairs handed out by a ticket counter. A program reads its item's
segment, publishes the segment's (m, d), and only then finishes its previous item (waits for
that row, merges, writes): the wait overlaps the read of the next segment.
Counters (int32, zero between launches): [ticket, exits, arrivals per row, departures per row].
"""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _stats(x_row, lo, hi, BLOCK: tl.constexpr, HINT: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    m = float("-inf")
    d = 0.0
    c = 0.0
    for start in range(lo, hi, BLOCK):
        offs = start + cols
        if HINT:
            x = tl.load(x_row + offs, mask=offs < hi, other=float("-inf"), eviction_policy="evict_last")
        else:
            x = tl.load(x_row + offs, mask=offs < hi, other=float("-inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2((m - m_safe) * 1.4426950408889634)
        d = d * alpha
        term = tl.sum(tl.exp2((x - m_safe) * 1.4426950408889634), axis=0) - c * alpha
        total = d + term
        c = (total - d) - term
        d = total
        m = m_new
    return m, d


@triton.jit
def _write(x_row, y_row, lo, hi, m, d, BLOCK: tl.constexpr, HINT: tl.constexpr):
    inv_d = 1.0 / d
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(tl.maximum(hi - lo, 0), BLOCK)
    for i in range(0, n_chunks):
        start = lo + (n_chunks - 1 - i) * BLOCK
        offs = start + cols
        mask = offs < hi
        if HINT:
            x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
        if HINT:
            tl.store(y_row + offs, y.to(y_row.dtype.element_ty), mask=mask, eviction_policy="evict_first")
        else:
            tl.store(y_row + offs, y.to(y_row.dtype.element_ty), mask=mask)


@triton.jit
def _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, item, n_rows, n_cols, xs, ys, seg_len,
            SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr, HINT: tl.constexpr,
            MODE: tl.constexpr = 3):
    row = item // SPLITS
    seg_start = (item % SPLITS) * seg_len
    seg_end = tl.minimum(seg_start + seg_len, n_cols)
    x_row = x_ptr + row.to(tl.int64) * xs
    arrivals = sync_ptr + 2 + row
    count = SPLITS
    if MODE >= 2:
        count = tl.atomic_add(arrivals, 0, sem="acquire")
        polls = 0
        while (count < SPLITS) & (polls < MAX_POLLS):
            count = tl.atomic_add(arrivals, 0, sem="acquire")
            polls += 1
    parts = tl.arange(0, SPLITS)
    if MODE < 3:
        m_parts = tl.where(parts == 0, 0.0, float("-inf"))
        d_parts = tl.where(parts == 0, 1.0, 0.0)
    elif count >= SPLITS:
        m_parts = tl.load(m_ptr + row * SPLITS + parts, cache_modifier=".cg")
        d_parts = tl.load(d_ptr + row * SPLITS + parts, cache_modifier=".cg")
    else:
        m_parts = tl.full([SPLITS], float("-inf"), tl.float32)
        d_parts = tl.zeros([SPLITS], tl.float32)
        for s in range(SPLITS):
            s_start = s * seg_len
            m_s, d_s = _stats(x_row, s_start, tl.minimum(s_start + seg_len, n_cols), BLOCK, HINT)
            m_parts = tl.where(parts == s, m_s, m_parts)
            d_parts = tl.where(parts == s, d_s, d_parts)
    m = tl.max(m_parts, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
    _write(x_row, y_ptr + row.to(tl.int64) * ys, seg_start, seg_end, m, d, BLOCK, HINT)
    if MODE >= 2:
        departures = sync_ptr + 2 + n_rows + row
        left = tl.atomic_add(departures, 1, sem="relaxed")
        if left == SPLITS - 1:
            tl.atomic_xchg(arrivals, 0, sem="relaxed")
            tl.atomic_xchg(departures, 0, sem="relaxed")


@triton.jit
def pipe_kernel(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, n_rows, n_cols, xs, ys, seg_len, n_items,
                n_programs, SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr,
                HINT: tl.constexpr, MODE: tl.constexpr = 3):
    item = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    prev = item * 0 - 1
    while item < n_items:
        row = item // SPLITS
        seg_start = (item % SPLITS) * seg_len
        seg_end = tl.minimum(seg_start + seg_len, n_cols)
        if MODE == 0:
            _write(x_ptr + row.to(tl.int64) * xs, y_ptr + row.to(tl.int64) * ys, seg_start, seg_end, 0.0, 1.0, BLOCK, HINT)
        else:
            m_seg, d_seg = _stats(x_ptr + row.to(tl.int64) * xs, seg_start, seg_end, BLOCK, HINT)
            tl.store(m_ptr + item, m_seg)
            tl.store(d_ptr + item, d_seg)
            if MODE >= 2:
                tl.atomic_add(sync_ptr + 2 + row, 1, sem="release")
            if prev >= 0:
                _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, prev, n_rows, n_cols, xs, ys, seg_len,
                        SPLITS, BLOCK, MAX_POLLS, HINT, MODE)
            prev = item
        item = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    if prev >= 0:
        _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, prev, n_rows, n_cols, xs, ys, seg_len,
                SPLITS, BLOCK, MAX_POLLS, HINT, MODE)
    # The last program out resets the ticket: every program's final ticket came before its exit.
    exits = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


_COUNTERS = {}


def launch(x, y, splits, block, num_warps, programs, max_polls=1 << 16, hint=True, num_stages=1, mode=3):
    n_rows, n_cols = x.shape
    seg_len = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
    n_items = n_rows * splits
    stats = torch.empty((2, n_items), dtype=torch.float32, device=x.device)
    key = x.device
    cnt = _COUNTERS.get(key)
    if cnt is None or cnt.numel() < 2 + 2 * n_rows:
        cnt = torch.zeros(2 + 2 * n_rows + 1024, dtype=torch.int32, device=x.device)
        _COUNTERS[key] = cnt
    programs = min(programs, n_items)
    pipe_kernel[(programs,)](x, y, stats[0], stats[1], cnt, n_rows, n_cols, x.stride(0), y.stride(0),
                             seg_len, n_items, programs, SPLITS=splits, BLOCK=block,
                             MAX_POLLS=max_polls, HINT=hint, MODE=mode, num_warps=num_warps, num_stages=num_stages)
    return y


@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=mask, eviction_policy="evict_first"), mask=mask,
             eviction_policy="evict_first")


def triton_copy(src, dst, block=8192, num_warps=8):
    n = src.numel()
    copy_kernel[(triton.cdiv(n, block),)](src, dst, n, BLOCK=block, num_warps=num_warps)
