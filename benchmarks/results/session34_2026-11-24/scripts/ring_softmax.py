"""Prototype (thirty-fourth session): a row-pipelined read-once softmax for few, very long rows
(16 x 1048576 16-bit), in Gluon.

Earlier read-once schedules either held the whole tensor and wrote it only after every read
(twenty-ninth session: a copy shaped that way reaches only 77-79% of copy, since reads and
writes do not overlap), or lagged writes in registers behind Triton's pipeliner (twenty-second
session: registers ran out). Here every CTA (P of them, all resident) owns one slice of every
row, and walks the rows in order through a ring of S shared-memory slots:

    step r:  wait for row r's slice (TMA, issued S - L rows ahead), reduce it to (m, d),
             publish (m, d) as one 64-bit word;
             then row q = r - L: read its P words (prefetched a step earlier; re-polled while
             any is still zero), merge them, normalize the slot, store y from registers,
             and refill the slot with row q + S.
    TMA_STORE=1: y is written back into the slot and stored by TMA; the slot is refilled a
             step later, once that store has read it.

So while a CTA writes row q it has rows q+1 .. q+S-1 loading: reads and writes overlap as in a
copy, x is read from HBM once and y written once, and each row's wait has L steps of slack.
Words live in two halves chosen by `parity`; each launch clears its words in the other half for
the next launch (stream order makes that safe).

MODE 0 is the softmax. Timing probes (wrong results), each leaving parts out:
    1: no wait for missing words            2: the schedule as a copy (no math, no words)
    3: statistics and words, a copy for the write   4: no statistics; merge words, normalize
    5: statistics without the word store, a copy     6: normalize with constants (no words)
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared

# Triton 3.6 names: async_copy_global_to_shared (and _shared_to_global), thread_barrier; later:
# async_load, async_store, barrier.
_TMA_LOAD = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_TMA_STORE = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_CTA_BARRIER = getattr(gl, "barrier", None) or gl.thread_barrier

LOG2E = gl.constexpr(1.4426950408889634)


@gluon.jit
def _pack(m, d):
    m_bits = m.to(gl.int32, bitcast=True).to(gl.int64) & 0xFFFFFFFF
    d_bits = d.to(gl.int32, bitcast=True).to(gl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@gluon.jit
def ring_softmax(x_desc, y_desc, y_ptr, words_ptr, n_rows, parity, spin_limit,
                 P: gl.constexpr, BR: gl.constexpr, BC: gl.constexpr, S: gl.constexpr,
                 L: gl.constexpr, MODE: gl.constexpr, TMA_STORE: gl.constexpr,
                 num_warps: gl.constexpr):
    gl.static_assert(L + 1 < S)
    pid = gl.program_id(0)
    dtype: gl.constexpr = x_desc.dtype
    SUBS: gl.constexpr = P * BR  # BC-wide sub-rows per softmax row
    RPAD: gl.constexpr = 64      # rows cleared per launch (n_rows <= RPAD)

    words_mine = words_ptr + parity * (RPAD * P)
    words_next = words_ptr + (1 - parity) * (RPAD * P)
    w_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    clear_rows = gl.arange(0, RPAD, layout=w_layout)
    gl.store(words_next + clear_rows * P + pid, gl.zeros([RPAD], gl.int64, w_layout))

    smem = gl.allocate_shared_memory(dtype, [S, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(S):
        if i < n_rows:
            mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [i * SUBS + pid * BR, 0], bars.index(i), smem.index(i))

    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    r_offs = gl.arange(0, BR, layout=gl.SliceLayout(1, layout))
    c_offs = gl.arange(0, BC, layout=gl.SliceLayout(0, layout))
    tile_offs = (pid * BR + r_offs)[:, None] * BC + c_offs[None, :]
    p_offs = gl.arange(0, P, layout=w_layout)

    nxt = gl.zeros([P], gl.int64, w_layout)
    for r in range(n_rows + L):
        if r < n_rows:
            slot = r % S
            mbarrier.wait(bars.index(slot), (r // S) & 1)
            if (MODE != 2) & (MODE != 4) & (MODE != 6):
                xt = smem.index(slot).load(layout)
                # the max in x's own type (exact), then exp2(x * log2(e) - m): one FMA each
                m = gl.max(gl.max(xt, axis=1), axis=0).to(gl.float32) * LOG2E
                d = gl.sum(gl.sum(gl.exp2(xt.to(gl.float32) * LOG2E - m), axis=1), axis=0)
                if MODE != 5:
                    gl.store(words_mine + r * P + pid, _pack(m, d))
        if r >= L:
            q = r - L
            slot = q % S
            if (MODE == 2) | (MODE == 3) | (MODE == 5):
                y = smem.index(slot).load(layout)
            else:
                y = _normalize(words_mine, nxt, q, smem.index(slot), spin_limit, p_offs, layout,
                               P, MODE)
                if q + 1 < n_rows:  # the next row's words: ready, mostly, by the next step
                    nxt = gl.load(words_mine + (q + 1) * P + p_offs, volatile=True)
            if TMA_STORE:
                # y goes back into its slot and out through the TMA unit: the warps go on
                # with the next step while it drains, instead of waiting on their store queue.
                smem.index(slot).store(y)
                fence_async_shared()
                _CTA_BARRIER()  # every warp has written the slot before the TMA reads it
                _TMA_STORE(y_desc, [q * SUBS + pid * BR, 0], smem.index(slot))
                # refill the slot of the row stored one step ago, once its store has read it
                if (q >= 1) & (q - 1 + S < n_rows):
                    tma.store_wait(pendings=1)
                    prev = (q - 1) % S
                    mbarrier.expect(bars.index(prev), x_desc.block_type.nbytes)
                    _TMA_LOAD(x_desc, [(q - 1 + S) * SUBS + pid * BR, 0], bars.index(prev),
                              smem.index(prev))
            else:
                gl.store(y_ptr + q * (SUBS * BC) + tile_offs, y)
                _CTA_BARRIER()  # every warp has read the slot before the TMA refills it
                if q + S < n_rows:
                    mbarrier.expect(bars.index(slot), x_desc.block_type.nbytes)
                    _TMA_LOAD(x_desc, [(q + S) * SUBS + pid * BR, 0], bars.index(slot),
                              smem.index(slot))
    if TMA_STORE:
        tma.store_wait(pendings=0)
    for i in gl.static_range(S):
        mbarrier.invalidate(bars.index(i))


@gluon.jit
def _normalize(words_mine, nxt, q, tile, spin_limit, p_offs, layout: gl.constexpr,
               P: gl.constexpr, MODE: gl.constexpr):
    """Row q's statistics from its P words (`nxt`, prefetched; re-polled while one is zero),
    then the slot's slice of row q normalized, in x's type."""
    if MODE == 6:
        m_row = 0.0
        inv = 1.0 / 1048576.0
    else:
        words = nxt
        if q == 0:
            words = gl.load(words_mine + p_offs, volatile=True)
        if MODE == 0:
            spins = 0
            missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
            while missing & (spins < spin_limit):
                words = gl.load(words_mine + q * P + p_offs, volatile=True)
                missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
                spins += 1
        pm = ((words >> 32) & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
        pd = (words & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
        m_row = gl.max(pm, axis=0)
        inv = 1.0 / gl.sum(pd * gl.exp2(pm - m_row), axis=0)
    xt = tile.load(layout)
    return (gl.exp2(xt.to(gl.float32) * LOG2E - m_row) * inv).to(xt.dtype)

