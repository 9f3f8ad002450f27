"""Prototype: persistent split softmax that HOLDS each segment in registers (one HBM read,
no L2 re-read). Each program loops over (row, segment) items by ticket: load item i, publish
its (m, d), then finish item i-1 from registers (wait for its row, merge, write)."""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def _take_ticket(sync_ptr):
    return tl.atomic_add(sync_ptr, 1, sem="relaxed")


@triton.jit
def _arrive(sync_ptr, row):
    tl.atomic_add(sync_ptr + 2 + row, 1, sem="release")


@triton.jit
def _wait_row(sync_ptr, row, SPLITS: tl.constexpr, MAX_POLLS: tl.constexpr):
    arrivals = sync_ptr + 2 + row
    count = tl.atomic_add(arrivals, 0, sem="acquire")
    polls = 0
    while (count < SPLITS) & (polls < MAX_POLLS):
        count = tl.atomic_add(arrivals, 0, sem="acquire")
        polls += 1
    return count >= SPLITS


@triton.jit
def _depart_row(sync_ptr, row, n_rows, SPLITS: tl.constexpr):
    arrivals = sync_ptr + 2 + row
    departures = sync_ptr + 2 + n_rows + row
    left = tl.atomic_add(departures, 1, sem="relaxed")
    if left == SPLITS - 1:
        tl.atomic_xchg(arrivals, 0, sem="relaxed")
        tl.atomic_xchg(departures, 0, sem="relaxed")


@triton.jit
def _stats(x):
    m = tl.max(x, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    return m, tl.sum(tl.exp2((x - m_safe) * 1.4426950408889634), axis=0)


@triton.jit
def _load_seg(x_ptr, item, n_cols, x_row_stride, seg_len, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    lanes = tl.arange(0, BLOCK)
    row = (item // SPLITS).to(tl.int64)
    offs = (item % SPLITS) * seg_len + lanes
    mask = (lanes < seg_len) & (offs < n_cols)
    return tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=float("-inf"))


@triton.jit
def _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, item, x_held, n_rows, n_cols, x_row_stride,
            y_row_stride, seg_len, SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr):
    row = (item // SPLITS).to(tl.int64)
    waited = _wait_row(sync_ptr, row, SPLITS, MAX_POLLS)
    parts = tl.arange(0, SPLITS)
    if waited:
        m_parts = tl.load(m_ptr + row * SPLITS + parts, cache_modifier=".cg")
        d_parts = tl.load(d_ptr + row * SPLITS + parts, cache_modifier=".cg")
    else:
        m_parts = tl.full([SPLITS], float("-inf"), tl.float32)
        d_parts = tl.zeros([SPLITS], tl.float32)
        for s in range(SPLITS):
            x_s = _load_seg(x_ptr, row * SPLITS + s, n_cols, x_row_stride, seg_len, SPLITS, BLOCK)
            m_s, d_s = _stats(x_s.to(tl.float32))
            m_parts = tl.where(parts == s, m_s, m_parts)
            d_parts = tl.where(parts == s, d_s, d_parts)
    m = tl.max(m_parts, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
    lanes = tl.arange(0, BLOCK)
    offs = (item % SPLITS) * seg_len + lanes
    mask = (lanes < seg_len) & (offs < n_cols)
    y = tl.exp2((x_held.to(tl.float32) - m) * 1.4426950408889634) * (1.0 / d)
    tl.store(y_ptr + row * y_row_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)
    _depart_row(sync_ptr, row, n_rows, SPLITS)


@triton.jit
def held_kernel(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                seg_len, n_items, n_programs, BLOCK: tl.constexpr, SPLITS: tl.constexpr,
                MAX_POLLS: tl.constexpr, HOLD_F32: tl.constexpr):
    item = _take_ticket(sync_ptr)
    prev = item * 0 - 1
    if HOLD_F32:
        held = tl.zeros([BLOCK], tl.float32)
    else:
        held = tl.zeros([BLOCK], x_ptr.dtype.element_ty)
    while item < n_items:
        raw = _load_seg(x_ptr, item, n_cols, x_row_stride, seg_len, SPLITS, BLOCK)
        x = raw.to(tl.float32)
        m_seg, d_seg = _stats(x)
        tl.store(m_ptr + item, m_seg)
        tl.store(d_ptr + item, d_seg)
        _arrive(sync_ptr, (item // SPLITS).to(tl.int64))
        if prev >= 0:
            _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, prev, held, n_rows, n_cols, x_row_stride,
                    y_row_stride, seg_len, SPLITS, BLOCK, MAX_POLLS)
        prev = item
        if HOLD_F32:
            held = x
        else:
            held = raw
        item = _take_ticket(sync_ptr)
    if prev >= 0:
        _finish(x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, prev, held, n_rows, n_cols, x_row_stride,
                y_row_stride, seg_len, SPLITS, BLOCK, MAX_POLLS)
    exits = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


_COUNTERS = {}


def launch(x, y, splits, block, warps, n_persistent, hold_f32=False, max_polls=1 << 16):
    n_rows, n_cols = x.shape
    seg_len = triton.cdiv(triton.cdiv(n_cols, splits), 16) * 16
    assert seg_len <= block, (seg_len, block)
    n_items = n_rows * splits
    stats = torch.empty((2, n_items), dtype=torch.float32, device=x.device)
    c = _COUNTERS.get(x.device)
    if c is None or c.numel() < 2 + 2 * n_rows:
        c = _COUNTERS[x.device] = torch.zeros(2 + 2 * n_rows + 1024, dtype=torch.int32, device=x.device)
    n_persistent = min(n_persistent, n_items)
    return held_kernel[(n_persistent,)](x, y, stats[0], stats[1], c, n_rows, n_cols, x.stride(0), y.stride(0),
                                        seg_len, n_items, n_persistent, BLOCK=block, SPLITS=splits,
                                        MAX_POLLS=max_polls, HOLD_F32=hold_f32, num_warps=warps, num_stages=1)
