"""The persistent split of persist_src.py with %globaltimer stamps after each read, wait and
write (gpu_timeline.py). Shares the rendered helpers (imported: Triton resolves them from
this module's globals)."""
import torch
import triton
import triton.language as tl

from flashtune.gen import row_sync
from persist_src import (_finish_item, _merge_and_write, _pack, _segment_of, _segment_stats,  # noqa: F401
                         _take_ticket, _unpack, _unpublished)


@triton.jit
def _now():
    return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def timeline_kernel(
    x_ptr, y_ptr, slots, stale, tickets, stamps, n_cols, x_row_stride, y_row_stride, seg_len, n_items,
    n_stale, n_programs, BLOCK: tl.constexpr, SPLITS: tl.constexpr, MAX_POLLS: tl.constexpr, LAG: tl.constexpr,
):
    # stamps[pid]: [start, then per event (kind, item, t)]: kind 1 = read+publish done, 2 = wait done, 3 = write done
    st = stamps + tl.program_id(0) * 64
    tl.store(st, _now())
    k = 1
    item = _take_ticket(tickets)
    prev = item * 0 - 1
    while item < n_items:
        row, seg_start, seg_end = _segment_of(item, n_cols, seg_len, SPLITS)
        m_seg, d_seg = _segment_stats(x_ptr + row * x_row_stride, seg_start, seg_end, BLOCK)
        tl.atomic_xchg(slots + item, _pack(m_seg, d_seg), sem="relaxed")
        tl.store(st + k, 1 * 1000000 + item); tl.store(st + k + 1, _now()); k += 2
        if LAG == 0:
            prev = item
        if prev >= 0:
            row, seg_start, seg_end = _segment_of(prev, n_cols, seg_len, SPLITS)
            row_slots = slots + row * SPLITS + tl.arange(0, SPLITS)
            words = tl.load(row_slots, volatile=True)
            polls = 0
            while (_unpublished(words) == 1) & (polls < MAX_POLLS):
                words = tl.load(row_slots, volatile=True)
                polls += 1
            m_parts, d_parts = _unpack(words)
            tl.store(st + k, 2 * 1000000 + prev); tl.store(st + k + 1, _now()); k += 2
            _merge_and_write(x_ptr + row * x_row_stride, y_ptr + row * y_row_stride, seg_start, seg_end, m_parts, d_parts, BLOCK)
            tl.store(st + k, 3 * 1000000 + prev); tl.store(st + k + 1, _now()); k += 2
        prev = item
        if LAG == 0:
            prev = item * 0 - 1
        item = _take_ticket(tickets)
    if prev >= 0:
        row, seg_start, seg_end = _segment_of(prev, n_cols, seg_len, SPLITS)
        row_slots = slots + row * SPLITS + tl.arange(0, SPLITS)
        words = tl.load(row_slots, volatile=True)
        polls = 0
        while (_unpublished(words) == 1) & (polls < MAX_POLLS):
            words = tl.load(row_slots, volatile=True)
            polls += 1
        m_parts, d_parts = _unpack(words)
        tl.store(st + k, 2 * 1000000 + prev); tl.store(st + k + 1, _now()); k += 2
        _merge_and_write(x_ptr + row * x_row_stride, y_ptr + row * y_row_stride, seg_start, seg_end, m_parts, d_parts, BLOCK)
        tl.store(st + k, 3 * 1000000 + prev); tl.store(st + k + 1, _now()); k += 2
    tl.store(st + 63, k)
