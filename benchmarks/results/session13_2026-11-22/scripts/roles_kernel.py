"""Reader/writer roles over the persistent split's helpers (gpu_roles.py): readers read and
publish, writers wait for a row, re-read and write."""
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
def roles_kernel(
    x_ptr, y_ptr, slots, stale, tickets, stamps, n_cols, x_row_stride, y_row_stride, seg_len, n_items,
    n_stale, n_programs, BLOCK: tl.constexpr, SPLITS: tl.constexpr, MAX_POLLS: tl.constexpr,
    READ_Q: tl.constexpr, ROLE_DEN: tl.constexpr, STAMPS: tl.constexpr,
):
    # Readers read items (in ticket order) and publish their (m, d); writers take items in
    # the same order, wait for the item's row, re-read it (L2) and write it. Readers never
    # wait, so the two roles overlap: DRAM reads and writes at once, as in a copy.
    # tickets: [start, reader items, writer items, exits]
    start = tl.atomic_add(tickets, 1, sem="relaxed")
    st = stamps + tl.program_id(0) * 64
    k = 1
    if STAMPS:
        tl.store(st, _now())
    if start % ROLE_DEN < READ_Q:
        item = tl.atomic_add(tickets + 1, 1, sem="relaxed")
        while item < n_items:
            row, seg_start, seg_end = _segment_of(item, n_cols, seg_len, SPLITS)
            m_seg, d_seg = _segment_stats(x_ptr + row * x_row_stride, seg_start, seg_end, BLOCK)
            tl.atomic_xchg(slots + item, _pack(m_seg, d_seg), sem="relaxed")
            if STAMPS:
                if k < 61:
                    tl.store(st + k, 1 * 1000000 + item); tl.store(st + k + 1, _now()); k += 2
            item = tl.atomic_add(tickets + 1, 1, sem="relaxed")
    else:
        item = tl.atomic_add(tickets + 2, 1, sem="relaxed")
        while item < n_items:
            if STAMPS:
                row, seg_start, seg_end = _segment_of(item, n_cols, seg_len, SPLITS)
                row_slots = slots + row * SPLITS + tl.arange(0, SPLITS)
                words = tl.load(row_slots, volatile=True)
                while _unpublished(words) == 1:
                    words = tl.load(row_slots, volatile=True)
                if k < 61:
                    tl.store(st + k, 2 * 1000000 + item); tl.store(st + k + 1, _now()); k += 2
            _finish_item(x_ptr, y_ptr, slots, stale, item, n_cols, x_row_stride, y_row_stride,
                         seg_len, SPLITS, BLOCK, MAX_POLLS)
            if STAMPS:
                if k < 61:
                    tl.store(st + k, 3 * 1000000 + item); tl.store(st + k + 1, _now()); k += 2
            item = tl.atomic_add(tickets + 2, 1, sem="relaxed")
    if STAMPS:
        tl.store(st + 63, k)
    for i in range(n_items + tl.program_id(0), n_stale, n_programs):
        tl.store(stale + i, 0)
    exits = tl.atomic_add(tickets + 3, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(tickets, 0, sem="relaxed")
        tl.atomic_xchg(tickets + 1, 0, sem="relaxed")
        tl.atomic_xchg(tickets + 2, 0, sem="relaxed")
        tl.atomic_xchg(tickets + 3, 0, sem="relaxed")


class Roles:
    """Launcher with its own workspace (two halves, as row_sync's)."""
    def __init__(self, device, capacity):
        self.words = torch.zeros((2, capacity), dtype=torch.int64, device=device)
        self.tickets = torch.zeros(4, dtype=torch.int32, device=device)
        self.half = 0
        self.written = [0, 0]
        self.dummy = torch.zeros(1, dtype=torch.int64, device=device)

    def launch(self, x, y, splits, block, P, read_q, den, warps, stamps=None):
        n_rows, n_cols = x.shape
        seg_len = triton.cdiv(triton.cdiv(n_cols, splits), block) * block
        n_items = n_rows * splits
        h = self.half
        roles_kernel[(P,)](x, y, self.words[h], self.words[1 - h], self.tickets,
                           stamps if stamps is not None else self.dummy, n_cols, x.stride(0), y.stride(0),
                           seg_len, n_items, self.written[1 - h], P, BLOCK=block, SPLITS=splits,
                           MAX_POLLS=row_sync.MAX_POLLS, READ_Q=read_q, ROLE_DEN=den,
                           STAMPS=stamps is not None, num_warps=warps, num_stages=1)
        self.written[1 - h] = 0
        self.written[h] = n_items
        self.half = 1 - h
