"""The default variant for 16x1048576 fp16 (persistent split), as `flashtune source` rendered it
at e2ecc11; timeline_kernel.py and roles_kernel.py build on its helpers."""
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
def _softmax_split_persistent(
    x_ptr, y_ptr, slots, stale, tickets, n_cols, x_row_stride, y_row_stride, seg_len, n_items,
    n_stale, n_programs, BLOCK: tl.constexpr, SPLITS: tl.constexpr, MAX_POLLS: tl.constexpr,
):
    # programs_per_sm: a grid of 4 programs per SM loops over the work items
    # (row, segment), numbered by tickets. Each program reads its item's segment and publishes
    # the (m, d), and only then finishes its previous item (waits for that row's partials,
    # re-reads the segment, writes it): the wait for a row overlaps the read of the next
    # segment, and the reads of some rows overlap the writes of others. Same cost per element
    # as PHASE 0, without its atomics: a partial is one 64-bit word in `slots` (all zero at the
    # start), published by a relaxed exchange and polled by its row's readers. Each finish
    # zeroes the same item's word in `stale`, the launch before's half; the tail below zeroes
    # that launch's words past this one's items (row_sync.polled_partials swaps the halves).
    # H100: 128 x 262144 fp16 54 us (62 us with PHASE 0's counters), 16 x 1048576 fp16 34 us.
    # No deadlock while at least SPLITS / 2 programs run: a program waits only after
    # publishing two items, so if every running program waited on one row whose tickets are
    # not all taken, that row would hold 2 x (running programs) < SPLITS items (launch() runs
    # this for SPLITS <= SMs / 2; the bounded wait covers programs starved by other work).
    tl.static_assert(BLOCK <= 16384)
    tl.static_assert((BLOCK & (BLOCK - 1)) == 0)
    tl.static_assert(SPLITS >= 2)
    item = _take_ticket(tickets)
    prev = item * 0 - 1  # no previous item yet
    while item < n_items:
        row, seg_start, seg_end = _segment_of(item, n_cols, seg_len, SPLITS)
        m_seg, d_seg = _segment_stats(x_ptr + row * x_row_stride, seg_start, seg_end, BLOCK)
        tl.atomic_xchg(slots + item, _pack(m_seg, d_seg), sem="relaxed")
        if prev >= 0:
            _finish_item(x_ptr, y_ptr, slots, stale, prev, n_cols, x_row_stride, y_row_stride,
                         seg_len, SPLITS, BLOCK, MAX_POLLS)
        prev = item
        item = _take_ticket(tickets)
    if prev >= 0:
        _finish_item(x_ptr, y_ptr, slots, stale, prev, n_cols, x_row_stride, y_row_stride,
                     seg_len, SPLITS, BLOCK, MAX_POLLS)
    for i in range(n_items + tl.program_id(0), n_stale, n_programs):
        tl.store(stale + i, 0)
    # The last program out zeroes the ticket and exit counters for the next launch. Every
    # program takes its last ticket before it counts its exit (acq_rel orders the two).
    exits = tl.atomic_add(tickets + 1, 1, sem="acq_rel")
    if exits == n_programs - 1:
        tl.atomic_xchg(tickets, 0, sem="relaxed")
        tl.atomic_xchg(tickets + 1, 0, sem="relaxed")


def launch(x, y):
    """x, y: 2-D tensors (rows, cols), unit column stride. Uses a small fp32 workspace."""
    n_rows, n_cols = x.shape
    # Segments are whole chunks, so only the last segment of a row has a ragged end.
    seg_len = triton.cdiv(triton.cdiv(n_cols, 64), 8192) * 8192
    n_programs = n_rows * 64
    if row_sync.one_launch(x, 64, persistent=True):
        n_persistent = min(n_programs, 4 * row_sync.sm_count(x.device.index))
        with row_sync.polled_partials(x.device, n_programs) as ws:
            _softmax_split_persistent[(n_persistent,)](
                x, y, ws.slots, ws.stale, ws.tickets, n_cols, x.stride(0), y.stride(0), seg_len,
                n_programs, ws.n_stale, n_persistent, BLOCK=8192, SPLITS=64,
                MAX_POLLS=row_sync.MAX_POLLS,
                num_warps=8, num_stages=1,
            )
        return
    stats = torch.empty((2, n_programs), dtype=torch.float32, device=x.device)
    phases = (1, 2)
    counters = stats.view(torch.int32)  # not read by phases 1 and 2
    for phase in phases:
        _softmax_split[(n_programs,)](
            x, y, stats[0], stats[1], counters, n_rows, n_cols, x.stride(0), y.stride(0), seg_len,
            n_programs, BLOCK=8192, SPLITS=64, PHASE=phase,
            MAX_POLLS=row_sync.MAX_POLLS,
            num_warps=8, num_stages=1,
        )
