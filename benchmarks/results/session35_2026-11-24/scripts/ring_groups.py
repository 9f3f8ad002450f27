"""Prototype (thirty-fifth session): the thirty-fourth session's row-pipelined read-once softmax
(session34 scripts/ring_softmax.py, ring_ws.py) with the CTAs split into G groups.

There every CTA (P = 128) owned one 16 KB slice of every one of the 16 rows, so each CTA walked
16 rows and paid 16 per-row chains (reduce, publish a word, wait for all P partners' words,
merge, normalize, store): about 2.7 us a chain, 43-48 us in one instruction stream, 33.9 us at
best with warp specialization. Here the P * G CTAs form G groups of P; group g owns rows
g, g + G, g + 2G, ... and CTA j of a group owns slice j of each of its rows. With G = 4, P = 32
each CTA walks 4 rows of 64 KB slices: a quarter of the chains, each waiting on 32 partners
rather than 128, with 4x the data per chain to hide it behind.

A slot (BR x BC) is reduced and normalized in CR-row chunks (online (m, d) merge across chunks),
so a 64 KB slot never sits in registers whole. y is written back into its slot and stored by
TMA; the slot is refilled once that store has read it.

MODE (timing probes; every mode but 0 gives wrong results):
    0 softmax   1 no wait for missing words   2 the schedule as a copy (no math, no words)
    3 statistics and words, then a copy        6 normalize with constants (no statistics, words)
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared

_TMA_LOAD = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_TMA_STORE = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global
_CTA_BARRIER = getattr(gl, "barrier", None) or gl.thread_barrier
# Triton 3.6: warp_specialize(default_args, default_fn, worker_args, worker_fns, warps, regs);
# later: warp_specialize([(default_fn, args), (worker_fn, args), ...], warps, regs).
_WS_LIST_API = gl.constexpr("functions_and_args" in gl.warp_specialize.__doc__)

LOG2E = gl.constexpr(1.4426950408889634)
RPAD = gl.constexpr(64)  # word rows per parity half (n_rows <= RPAD)


@gluon.jit
def _pack(m, d):
    m_bits = m.to(gl.int32, bitcast=True).to(gl.int64) & 0xFFFFFFFF
    d_bits = d.to(gl.int32, bitcast=True).to(gl.int64) & 0xFFFFFFFF
    return (m_bits << 32) | d_bits


@gluon.jit
def _slot_stats(tile, layout: gl.constexpr, CR: gl.constexpr):
    """(m, d) of a slot in exp2 units: m = max(x) * log2(e), d = sum(exp2(x * log2(e) - m)),
    chunk by chunk with the associative merge."""
    NCH: gl.constexpr = tile.shape[0] // CR
    xt = tile.slice(0, CR, dim=0).load(layout)
    m = gl.max(gl.max(xt, axis=1), axis=0).to(gl.float32) * LOG2E
    d = gl.sum(gl.sum(gl.exp2(xt.to(gl.float32) * LOG2E - m), axis=1), axis=0)
    for c in gl.static_range(1, NCH):
        xt = tile.slice(c * CR, CR, dim=0).load(layout)
        mc = gl.max(gl.max(xt, axis=1), axis=0).to(gl.float32) * LOG2E
        dc = gl.sum(gl.sum(gl.exp2(xt.to(gl.float32) * LOG2E - mc), axis=1), axis=0)
        mn = gl.maximum(m, mc)
        d = d * gl.exp2(m - mn) + dc * gl.exp2(mc - mn)
        m = mn
    return m, d


@gluon.jit
def _slot_normalize(tile, m_row, inv, layout: gl.constexpr, CR: gl.constexpr):
    """y = exp2(x * log2(e) - m_row) * inv, in place, chunk by chunk."""
    NCH: gl.constexpr = tile.shape[0] // CR
    for c in gl.static_range(NCH):
        ch = tile.slice(c * CR, CR, dim=0)
        xt = ch.load(layout)
        ch.store((gl.exp2(xt.to(gl.float32) * LOG2E - m_row) * inv).to(xt.dtype))


@gluon.jit
def _merge_words(words_row, words, spin_limit, p_offs, WAIT: gl.constexpr):
    """Row statistics (m, 1/d) from its P words; words still zero are polled again."""
    if WAIT:
        spins = 0
        missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
        while missing & (spins < spin_limit):
            words = gl.load(words_row + p_offs, volatile=True)
            missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
            spins += 1
    pm = ((words >> 32) & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
    pd = (words & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
    m_row = gl.max(pm, axis=0)
    return m_row, 1.0 / gl.sum(pd * gl.exp2(pm - m_row), axis=0)


@gluon.jit
def ring_groups(x_desc, y_desc, words_ptr, n_rows, parity, spin_limit,
                P: gl.constexpr, G: gl.constexpr, BR: gl.constexpr, BC: gl.constexpr,
                S: gl.constexpr, L: gl.constexpr, CR: gl.constexpr, MODE: gl.constexpr,
                num_warps: gl.constexpr):
    """One instruction stream. Step r: row g + r*G's slot reduced, its word published; then the
    row L steps back merged, normalized in its slot, TMA-stored; the slot stored a step earlier
    refilled S steps ahead."""
    gl.static_assert(L + 1 < S)
    pid = gl.program_id(0)
    g = pid // P
    j = pid % P
    n_steps = n_rows // G
    SUBS: gl.constexpr = P * BR
    words_mine = words_ptr + parity * (RPAD * P)
    words_next = words_ptr + (1 - parity) * (RPAD * P)
    w_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    clear_rows = gl.arange(0, RPAD, layout=w_layout)  # the G CTAs of column j write the same zeros
    gl.store(words_next + clear_rows * P + j, gl.zeros([RPAD], gl.int64, w_layout))

    smem = gl.allocate_shared_memory(x_desc.dtype, [S, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(S):
        if i < n_steps:
            mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [(g + i * G) * SUBS + j * BR, 0], bars.index(i), smem.index(i))

    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    p_offs = gl.arange(0, P, layout=w_layout)
    nxt = gl.zeros([P], gl.int64, w_layout)
    for r in range(n_steps + L):
        if r < n_steps:
            slot = r % S
            mbarrier.wait(bars.index(slot), (r // S) & 1)
            if (MODE != 2) & (MODE != 6):
                m, d = _slot_stats(smem.index(slot), layout, CR)
                gl.store(words_mine + (g + r * G) * P + j, _pack(m, d))
        if r >= L:
            q = r - L
            row = g + q * G
            slot = q % S
            if (MODE != 2) & (MODE != 3):
                if MODE == 6:
                    m_row = 0.0
                    inv = 1.0 / 1048576.0
                else:
                    if q == 0:
                        nxt = gl.load(words_mine + row * P + p_offs, volatile=True)
                    m_row, inv = _merge_words(words_mine + row * P, nxt, spin_limit, p_offs,
                                              MODE == 0)
                    if q + 1 < n_steps:  # the next row's words: ready, mostly, by the next step
                        nxt = gl.load(words_mine + (row + G) * P + p_offs, volatile=True)
                _slot_normalize(smem.index(slot), m_row, inv, layout, CR)
                fence_async_shared()
                _CTA_BARRIER()  # every warp has written the slot before the TMA reads it
            _TMA_STORE(y_desc, [row * SUBS + j * BR, 0], smem.index(slot))
            if (q >= 1) & (q - 1 + S < n_steps):
                tma.store_wait(pendings=1)  # the store of one step ago has read its slot
                prev = (q - 1) % S
                mbarrier.expect(bars.index(prev), x_desc.block_type.nbytes)
                _TMA_LOAD(x_desc, [(g + (q - 1 + S) * G) * SUBS + j * BR, 0], bars.index(prev),
                          smem.index(prev))
    tma.store_wait(pendings=0)
    for i in gl.static_range(S):
        mbarrier.invalidate(bars.index(i))


# ---- warp-specialized: a statistics partition and a writer partition, 4 warps each ----------
# Constexprs do not pass into partitions; they travel as shapes of small shared-memory buffers
# that are never read: p_buf [P], g_buf [G], c_buf [CR], m_buf [16 << MODE] bytes.

@gluon.jit
def _ws_stats(x_desc, y_desc, smem, bars, p_buf, g_buf, c_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    S: gl.constexpr = smem.shape[0]
    P: gl.constexpr = p_buf.shape[0]
    G: gl.constexpr = g_buf.shape[0]
    CR: gl.constexpr = c_buf.shape[0]
    MODE_BIT: gl.constexpr = m_buf.shape[0] // 16  # 1 << MODE
    g = pid // P
    j = pid % P
    for r in range(0, n_rows // G):
        slot = r % S
        mbarrier.wait(bars.index(slot), (r // S) & 1)
        if (MODE_BIT == 4) | (MODE_BIT == 64):  # modes 2, 6: (m, d) = (0, 1) unread
            gl.store(words_mine + (g + r * G) * P + j, pid.to(gl.int64) * 0 + 0x3F800000)
        else:
            m, d = _slot_stats(smem.index(slot), layout, CR)
            gl.store(words_mine + (g + r * G) * P + j, _pack(m, d))


@gluon.jit
def _ws_write(x_desc, y_desc, smem, bars, p_buf, g_buf, c_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    w_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    S: gl.constexpr = smem.shape[0]
    BR: gl.constexpr = smem.shape[1]
    P: gl.constexpr = p_buf.shape[0]
    G: gl.constexpr = g_buf.shape[0]
    CR: gl.constexpr = c_buf.shape[0]
    MODE_BIT: gl.constexpr = m_buf.shape[0] // 16  # 1 << MODE
    SUBS: gl.constexpr = P * BR
    g = pid // P
    j = pid % P
    n_steps = n_rows // G
    p_offs = gl.arange(0, P, layout=w_layout)
    nxt = gl.load(words_mine + g * P + p_offs, volatile=True)
    for q in range(0, n_steps):
        row = g + q * G
        slot = q % S
        m_row, inv = _merge_words(words_mine + row * P, nxt, spin_limit, p_offs,
                                  MODE_BIT != 2)  # mode 1: no wait
        nxt = gl.load(words_mine + (row + G) * P + p_offs, mask=q + 1 < n_steps, other=0,
                      volatile=True)
        # every word published: this CTA's statistics partition is done with the slot
        mbarrier.wait(bars.index(slot), (q // S) & 1)
        if (MODE_BIT != 4) & (MODE_BIT != 8):  # modes 2, 3: a copy
            if MODE_BIT == 64:
                m_row = 0.0
                inv = 1.0 / 1048576.0
            _slot_normalize(smem.index(slot), m_row, inv, layout, CR)
            fence_async_shared()
            _CTA_BARRIER()
        _TMA_STORE(y_desc, [row * SUBS + j * BR, 0], smem.index(slot))
        if (q >= 1) & (q - 1 + S < n_steps):
            tma.store_wait(pendings=1)
            prev = (q - 1) % S
            mbarrier.expect(bars.index(prev), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [(g + (q - 1 + S) * G) * SUBS + j * BR, 0], bars.index(prev),
                      smem.index(prev))
    tma.store_wait(pendings=0)


@gluon.jit
def ring_groups_ws(x_desc, y_desc, words_ptr, n_rows, parity, spin_limit,
                   P: gl.constexpr, G: gl.constexpr, BR: gl.constexpr, BC: gl.constexpr,
                   S: gl.constexpr, CR: gl.constexpr, MODE: gl.constexpr,
                   num_warps: gl.constexpr):
    gl.static_assert(num_warps == 4)
    pid = gl.program_id(0)
    g = pid // P
    j = pid % P
    n_steps = n_rows // G
    SUBS: gl.constexpr = P * BR
    words_mine = words_ptr + parity * (RPAD * P)
    words_next = words_ptr + (1 - parity) * (RPAD * P)
    c_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    clear_rows = gl.arange(0, RPAD, layout=c_layout)
    gl.store(words_next + clear_rows * P + j, gl.zeros([RPAD], gl.int64, c_layout))

    smem = gl.allocate_shared_memory(x_desc.dtype, [S, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(S):
        if i < n_steps:
            mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [(g + i * G) * SUBS + j * BR, 0], bars.index(i), smem.index(i))
    b_layout: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [0])
    p_buf = gl.allocate_shared_memory(gl.int8, [P], b_layout)
    g_buf = gl.allocate_shared_memory(gl.int8, [G], b_layout)
    c_buf = gl.allocate_shared_memory(gl.int8, [CR], b_layout)
    m_buf = gl.allocate_shared_memory(gl.int8, [16 << MODE], b_layout)
    args = (x_desc, y_desc, smem, bars, p_buf, g_buf, c_buf, m_buf, words_mine, pid, n_rows, spin_limit)
    if _WS_LIST_API:
        gl.warp_specialize([(_ws_stats, args), (_ws_write, args)], [4], [128])
    else:
        gl.warp_specialize(args, _ws_stats, args, [_ws_write], [4], [128])
    for i in gl.static_range(S):
        mbarrier.invalidate(bars.index(i))
