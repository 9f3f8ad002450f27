"""Prototype: persistent split softmax whose row sync polls the partials themselves.

Each (m, d) partial is published as one 64-bit word (m bits high, d bits low) by a relaxed
atomic exchange: no fence, no arrival counter. The all-zero word (m = +0.0, d = 0) is never a
real partial (a finite m gives d >= 1), so zero means "not yet". A reader polls its row's
SPLITS words with volatile loads until none is zero; it needs nothing else the writer wrote,
so no acquire/release. Two parities of the workspace alternate between launches on a stream:
a launch writes slots[P] and zeroes slots[1 - P] (the launch before's, finished by then).
"""
import threading
import torch
import triton
import triton.language as tl
from pipe import _stats, _write


@triton.jit
def _pack(m, d):
    mb = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    db = d.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return (mb << 32) | db


@triton.jit
def _unpack(w):
    m = ((w >> 32) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    d = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return m, d


@triton.jit
def _finish(x_ptr, y_ptr, ws, other, sync_ptr, item, n_cols, xs, ys, seg_len,
            SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr, HINT: tl.constexpr,
            PREFETCH: tl.constexpr = False):
    row = item // SPLITS
    seg_start = (item % SPLITS) * seg_len
    seg_end = tl.minimum(seg_start + seg_len, n_cols)
    x_row = x_ptr + row.to(tl.int64) * xs
    parts = tl.arange(0, SPLITS)
    if PREFETCH:  # segment = one chunk: re-read it before polling
        offs = seg_start + tl.arange(0, BLOCK)
        x_pre = tl.load(x_row + offs, mask=offs < seg_end, other=0.0, eviction_policy="evict_first").to(tl.float32)
    words = tl.load(ws + row * SPLITS + parts, volatile=True)
    polls = 0
    while (tl.min(tl.where(words == 0, 0, 1), axis=0) == 0) & (polls < MAX_POLLS):
        words = tl.load(ws + row * SPLITS + parts, volatile=True)
        polls += 1
    if tl.min(tl.where(words == 0, 0, 1), axis=0) == 1:
        m_parts, d_parts = _unpack(words)
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
    tl.store(other + item, 0)  # the launch before's slot: ready for the next launch
    if PREFETCH:
        y = tl.exp2((x_pre - m) * 1.4426950408889634) * (1.0 / d)
        tl.store(y_ptr + row.to(tl.int64) * ys + offs, y.to(y_ptr.dtype.element_ty), mask=offs < seg_end, eviction_policy="evict_first")
    else:
        _write(x_row, y_ptr + row.to(tl.int64) * ys, seg_start, seg_end, m, d, BLOCK, HINT)


@triton.jit
def poll_kernel(x_ptr, y_ptr, ws, other, sync_ptr, n_cols, xs, ys, seg_len, n_items, n_reset,
                n_programs, SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr,
                HINT: tl.constexpr, PREFETCH: tl.constexpr = False):
    item = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    prev = item * 0 - 1
    while item < n_items:
        row = item // SPLITS
        seg_start = (item % SPLITS) * seg_len
        seg_end = tl.minimum(seg_start + seg_len, n_cols)
        m_seg, d_seg = _stats(x_ptr + row.to(tl.int64) * xs, seg_start, seg_end, BLOCK, HINT)
        tl.atomic_xchg(ws + item, _pack(m_seg, d_seg), sem="relaxed")
        if prev >= 0:
            _finish(x_ptr, y_ptr, ws, other, sync_ptr, prev, n_cols, xs, ys, seg_len,
                    SPLITS, BLOCK, MAX_POLLS, HINT, PREFETCH)
        prev = item
        item = tl.atomic_add(sync_ptr, 1, sem="relaxed")
    if prev >= 0:
        _finish(x_ptr, y_ptr, ws, other, sync_ptr, prev, n_cols, xs, ys, seg_len,
                SPLITS, BLOCK, MAX_POLLS, HINT, PREFETCH)
    # Slots of the launch before past this launch's items.
    for i in range(n_items + tl.program_id(0), n_reset, n_programs):
        tl.store(other + i, 0)
    exits = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


class _Workspace:
    def __init__(self, device, cap):
        self.words = torch.zeros((2, cap), dtype=torch.int64, device=device)
        self.counters = torch.zeros(2, dtype=torch.int32, device=device)
        self.parity = 0
        self.dirty = [0, 0]
        self.lock = threading.Lock()


_WS = {}


def launch(x, y, splits, block, num_warps, programs, max_polls=1 << 16, hint=True, num_stages=1, prefetch=False):
    n_rows, n_cols = x.shape
    seg_len = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
    n_items = n_rows * splits
    key = (x.device, torch.cuda.current_stream(x.device).cuda_stream) if x.is_cuda else x.device
    ws = _WS.get(key)
    if ws is None or ws.words.shape[1] < n_items:
        ws = _WS[key] = _Workspace(x.device, max(n_items, 1024))
    programs = min(programs, n_items)
    with ws.lock:
        p = ws.parity
        n_reset = ws.dirty[1 - p]
        poll_kernel[(programs,)](x, y, ws.words[p], ws.words[1 - p], ws.counters, n_cols, x.stride(0),
                                 y.stride(0), seg_len, n_items, n_reset, programs, SPLITS=splits,
                                 BLOCK=block, MAX_POLLS=max_polls, HINT=hint, PREFETCH=prefetch, num_warps=num_warps,
                                 num_stages=num_stages)
        ws.dirty[1 - p] = 0
        ws.dirty[p] = n_items
        ws.parity = 1 - p
    return y
