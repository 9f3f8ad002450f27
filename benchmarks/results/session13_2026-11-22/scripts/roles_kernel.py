# ---------------------------------------------------------------------------------------------
# flashtune generated kernel: softmax (fwd), regime "split".
# Split softmax: one row spread over several programs (few rows, huge columns).
# Each program takes a segment: its partial (m, d), merged per row, then the output.
#
# Tunables of this variant (every tunable of the space, with the value rendered here):
#   regime           = split     row | online | split | coop (forward only)
#   block            = 8192     elements per tile along the row (power of two)
#   rows_per_program = 1     rows per program (row regime; 1 otherwise)
#   splits           = 64     programs per row (split and coop regimes; 1 otherwise)
#   num_warps        = 8
#   num_stages       = 1     software pipelining depth of the chunk loops
#   exp2             = True     exp(a - b) computed as exp2((a - b) * log2 e)
#   lane_stats       = False     online (m, d) kept per lane, merged once at the end
#   vector_stats     = False     online (m, d) kept per 16-byte vector of the chunk: each
#                             thread reduces its own vectors, no barrier in the loop
#   max_pass         = False     a max-only pass, then a sum pass: no rescaling exps
#   resident         = 0     leading columns held in registers, read once (online)
#   align            = False     rows walked from a 16-byte boundary: whole-vector loads
#                             and stores for rows of odd width (online)
#   fused            = True     split: statistics, row barrier and output in one launch
#   programs_per_sm  = 4     fused split: a persistent grid of this many programs
#                             per SM, each finishing one segment while reading the next (0: a
#                             program per segment)
#   l2_hint          = True     first pass keeps lines in L2 (evict_last); the last pass
#                             (and the forward's output stores) streams them out (evict_first)
# Constraints (checked by flashtune.gen before rendering, repeated as tl.static_assert):
#   block, rows_per_program, splits are powers of two; block * rows_per_program <= 65536;
#   row regime: the whole row fits in one tile (block >= n_cols, checked at launch);
#   coop: block <= 32768, splits >= 2, the row fits in splits tiles (checked at launch);
#   online/split: block <= 16384; split: splits >= 2; lane_stats, vector_stats and max_pass
#   exclude each other;
#   resident (a power of two <= 32768, or 0) only in the online regime; align only in the
#   online regime, with resident 0; fused only in the split regime (one launch where
#   splits <= SMs / 4, checked at launch; two otherwise); programs_per_sm only with fused
#   (one launch where splits <= SMs / 2).
# Statistics (max, sum) are fp32 whatever the input dtype; inputs and outputs keep their dtype.
# The kernel works on a 2-D view (rows, cols) with unit column stride and any row stride.
# ---------------------------------------------------------------------------------------------
import triton
import triton.language as tl
import torch

from flashtune.gen import row_sync


@triton.jit
def _segment_stats(x_row, seg_start, seg_end, BLOCK: tl.constexpr):
    """(m, d) of columns [seg_start, seg_end) of the row at x_row (chunks of BLOCK)."""
    cols = tl.arange(0, BLOCK)
    # One online (m, d) for the row, merged with each chunk's (max, sum) as in background.md.
    # d adds one chunk sum per step, a sequential sum as long as the row has chunks: it is
    # compensated (Kahan; c holds the rounding lost so far), four scalar flops per chunk.
    m = float("-inf")
    d = 0.0
    c = 0.0
    for start in range(seg_start, seg_end, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < seg_end, other=float("-inf"), eviction_policy="evict_last")
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
def _segment_write(x_row, y_row, seg_start, seg_end, m, d, BLOCK: tl.constexpr):
    """The output of columns [seg_start, seg_end), given the row's (m, d)."""
    inv_d = 1.0 / d
    cols = tl.arange(0, BLOCK)
    n_chunks = tl.cdiv(tl.maximum(seg_end - seg_start, 0), BLOCK)
    for i in range(0, n_chunks):  # backwards: re-read the most recently loaded chunks first
        start = seg_start + (n_chunks - 1 - i) * BLOCK
        offs = start + cols
        mask = offs < seg_end
        x = tl.load(x_row + offs, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        # m unguarded: an all -inf row gives NaN, as in torch.
        y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
        tl.store(y_row + offs, y.to(y_row.dtype.element_ty), mask=mask, eviction_policy="evict_first")


@triton.jit
def _take_ticket(sync_ptr):
    # A ticket numbers programs in the order they actually started. Every program of an
    # earlier row started before this one, so a row only ever waits on programs that are
    # running or free to start once earlier rows finish: no deadlock (program_id order is
    # not a promise of start order; the ticket is).
    # Relaxed: a number, nothing to order (acq_rel would add fences to every program).
    return tl.atomic_add(sync_ptr, 1, sem="relaxed")


@triton.jit
def _arrive_and_wait(sync_ptr, row, SPLITS: tl.constexpr, MAX_POLLS: tl.constexpr):
    """Arrive (release: this program's (m, d) stores are visible before the count), then wait
    until the row's SPLITS programs have arrived (acquire: their stores are visible). True if
    they all came; False after MAX_POLLS polls (partners starved of SMs by other work)."""
    # A scalar atomic runs on one thread of the program; a volatile load would run on every
    # thread, and that many pollers on one L2 line slowed the GPU run 2-5x.
    arrivals = sync_ptr + 2 + row
    tl.atomic_add(arrivals, 1, sem="release")
    count = tl.atomic_add(arrivals, 0, sem="acquire")
    polls = 0
    while (count < SPLITS) & (polls < MAX_POLLS):
        count = tl.atomic_add(arrivals, 0, sem="acquire")
        polls += 1
    return count >= SPLITS


@triton.jit
def _leave_row(sync_ptr, row, n_rows, n_programs, SPLITS: tl.constexpr):
    # The row's last program out (every partner has arrived and stopped waiting by then)
    # zeroes the row's counters, and the grid's last program zeroes the ticket and done
    # counters: the workspace is all zero for the next launch on this stream (launches on one
    # stream run one after another). Relaxed: a release here would wait for this program's
    # output stores to land before counting.
    arrivals = sync_ptr + 2 + row
    departures = sync_ptr + 2 + n_rows + row
    left = tl.atomic_add(departures, 1, sem="relaxed")
    if left == SPLITS - 1:
        tl.atomic_xchg(arrivals, 0, sem="relaxed")
        tl.atomic_xchg(departures, 0, sem="relaxed")
    done = tl.atomic_add(sync_ptr + 1, 1, sem="relaxed")
    if done == n_programs - 1:
        tl.atomic_xchg(sync_ptr, 0, sem="relaxed")
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed")


@triton.jit
def _segment_of(prog, n_cols, seg_len, SPLITS: tl.constexpr):
    """Work item `prog` (row-major over the rows' SPLITS segments): its row and columns."""
    seg_start = (prog % SPLITS) * seg_len
    return (prog // SPLITS).to(tl.int64), seg_start, tl.minimum(seg_start + seg_len, n_cols)


@triton.jit
def _partials_from_x(x_row, n_cols, seg_len, SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    """Every segment's (m, d) from x, by the code its own program runs, for a program that gave
    up waiting on its partners: the row's outputs agree bit for bit."""
    parts = tl.arange(0, SPLITS)
    m_parts = tl.full([SPLITS], float("-inf"), tl.float32)
    d_parts = tl.zeros([SPLITS], tl.float32)
    for s in range(SPLITS):
        s_start = s * seg_len
        m_s, d_s = _segment_stats(x_row, s_start, tl.minimum(s_start + seg_len, n_cols), BLOCK)
        m_parts = tl.where(parts == s, m_s, m_parts)
        d_parts = tl.where(parts == s, d_s, d_parts)
    return m_parts, d_parts


@triton.jit
def _merge_and_write(x_row, y_row, seg_start, seg_end, m_parts, d_parts, BLOCK: tl.constexpr):
    # Merge the row's SPLITS partial (m, d) states; the merge is associative (background.md).
    m = tl.max(m_parts, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_parts * tl.exp2((m_parts - m_safe) * 1.4426950408889634), axis=0)
    _segment_write(x_row, y_row, seg_start, seg_end, m, d, BLOCK)


@triton.jit
def _finish_segment(x_row, y_row, m_ptr, d_ptr, row, seg_start, seg_end, n_cols, seg_len, waited,
                    SPLITS: tl.constexpr, BLOCK: tl.constexpr):
    """Merge the row's SPLITS partial (m, d) and write the segment's output. waited False: the
    partners' partials may be missing (gave up waiting): computed from x instead."""
    if waited:
        parts = tl.arange(0, SPLITS)
        m_parts = tl.load(m_ptr + row * SPLITS + parts, cache_modifier=".cg")
        d_parts = tl.load(d_ptr + row * SPLITS + parts, cache_modifier=".cg")
    else:
        m_parts, d_parts = _partials_from_x(x_row, n_cols, seg_len, SPLITS, BLOCK)
    _merge_and_write(x_row, y_row, seg_start, seg_end, m_parts, d_parts, BLOCK)


@triton.jit
def _softmax_split(
    x_ptr, y_ptr, m_ptr, d_ptr, sync_ptr, n_rows, n_cols, x_row_stride, y_row_stride, seg_len,
    n_programs, BLOCK: tl.constexpr, SPLITS: tl.constexpr, PHASE: tl.constexpr,
    MAX_POLLS: tl.constexpr,
):
    # Cost per element: read 2, write 1. The second read comes from L2 where the segment is
    # still there: the segment a program re-reads is the one it read last (fused), or the
    # launch before's most recent ones (two launches, the second in reverse program order).
    #
    # PHASE 1 then PHASE 2 (fused off; the Triton interpreter; more SPLITS than one launch can
    #   wait on safely): two launches that never wait. PHASE 1 writes each segment's partial
    #   (m, d); PHASE 2 merges the row's partials and writes the segment's output.
    # PHASE 0 (fused on, GPU): one launch; each program publishes its (m, d), waits for the
    #   rest of its row (row_barrier in _softmax_common.py.jinja; launch() uses it for
    #   SPLITS <= SMs / 4), then writes: no second launch, and the re-read follows the first
    #   read closely. A program that stops waiting after MAX_POLLS polls (partners starved of
    #   SMs) computes its partners' (m, d) from x itself with their code: slower, never
    #   stuck, and bit-identical (checked in the interpreter, and forced on a GPU by a test).
    # programs_per_sm > 0: the persistent kernel below instead (one launch, SPLITS <= SMs / 2).
    tl.static_assert(BLOCK <= 16384)
    tl.static_assert((BLOCK & (BLOCK - 1)) == 0)
    tl.static_assert(SPLITS >= 2)
    if PHASE == 0:
        prog = _take_ticket(sync_ptr)
    elif PHASE == 1:
        prog = tl.program_id(0)
    else:
        # Reverse order of PHASE 1: the most recently read segments come first.
        prog = n_programs - 1 - tl.program_id(0)
    row, seg_start, seg_end = _segment_of(prog, n_cols, seg_len, SPLITS)
    x_row = x_ptr + row * x_row_stride
    if PHASE != 2:
        m_seg, d_seg = _segment_stats(x_row, seg_start, seg_end, BLOCK)
        tl.store(m_ptr + prog, m_seg)
        tl.store(d_ptr + prog, d_seg)
    if PHASE != 1:
        if PHASE == 0:
            waited = _arrive_and_wait(sync_ptr, row, SPLITS, MAX_POLLS)
        else:
            waited = True  # PHASE 2: the partials were written by the launch before
        _finish_segment(x_row, y_ptr + row * y_row_stride, m_ptr, d_ptr, row, seg_start, seg_end,
                        n_cols, seg_len, waited, SPLITS, BLOCK)
    if PHASE == 0:
        _leave_row(sync_ptr, row, n_rows, n_programs, SPLITS)


@triton.jit
def _pack(m, d):
    """A partial (m, d) as one 64-bit word (m's bits high, d's low): published and read whole.
    Zero (m = +0.0, d = 0) is never a real partial (a finite m gives d >= 1): "not yet"."""
    m_bits = m.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    d_bits = d.to(tl.int32, bitcast=True).to(tl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@triton.jit
def _unpack(words):
    m = ((words >> 32) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    d = (words & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    return m, d


@triton.jit
def _unpublished(words):
    """1 while some partial of the row is still zero (not published), else 0."""
    return tl.max(tl.where(words == 0, 1, 0), axis=0)


@triton.jit
def _finish_item(x_ptr, y_ptr, slots, stale, item, n_cols, x_row_stride, y_row_stride, seg_len,
                 SPLITS: tl.constexpr, BLOCK: tl.constexpr, MAX_POLLS: tl.constexpr):
    """Wait for the partials of work item `item`'s row, then write the item's segment."""
    row, seg_start, seg_end = _segment_of(item, n_cols, seg_len, SPLITS)
    x_row = x_ptr + row * x_row_stride
    # Poll the row's words themselves: the reader needs nothing else its partners wrote, so no
    # arrival counter and no acquire/release (volatile: a fresh read from L2 every poll).
    row_slots = slots + row * SPLITS + tl.arange(0, SPLITS)
    words = tl.load(row_slots, volatile=True)
    polls = 0
    while (_unpublished(words) == 1) & (polls < MAX_POLLS):
        words = tl.load(row_slots, volatile=True)
        polls += 1
    if _unpublished(words) == 0:
        m_parts, d_parts = _unpack(words)
    else:
        m_parts, d_parts = _partials_from_x(x_row, n_cols, seg_len, SPLITS, BLOCK)
    tl.store(stale + item, 0)  # the launch before's word: zero for the launch after
    _merge_and_write(x_row, y_ptr + row * y_row_stride, seg_start, seg_end, m_parts, d_parts,
                     BLOCK)


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
