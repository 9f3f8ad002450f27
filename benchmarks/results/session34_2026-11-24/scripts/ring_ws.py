"""Prototype (thirty-fourth session): ring_softmax.py's schedule with its two chains in two warp
partitions that run at once (Gluon warp specialization).

ring_softmax.py runs, per step, row r's statistics and then row r - L's merge, normalize and
store in one instruction stream, and the whole chain (about 2.2-2.7 us a step on the H100) paces
the kernel. Here:
    default partition (WS warps):  for each row r: wait for its slot, reduce it to (m, d),
                                   publish the word;
    worker partition (WW warps):   for each row q: poll its P words (first loaded a step
                                   earlier, re-polled while one is zero), merge them, normalize the
                                   slot in place, TMA-store it, and refill the slot of the row
                                   stored one step earlier (once that store has read it).
The partitions share nothing but the slots' TMA barriers (both wait on them) and the words in
global memory: a slot is refilled only after its row's words were all published, so the
statistics partition has read it by then.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared

from ring_softmax import _CTA_BARRIER, _TMA_LOAD, _TMA_STORE, _pack, LOG2E

# Triton 3.6: warp_specialize(default_args, default_fn, worker_args, worker_fns, warps, regs);
# later: warp_specialize([(default_fn, args), (worker_fn, args), ...], warps, regs).
_WS_LIST_API = gl.constexpr("functions_and_args" in gl.warp_specialize.__doc__)


@gluon.jit
def _stats_rows(x_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows,
                K: gl.constexpr, STEP: gl.constexpr):
    """Rows K, K + STEP, ...: statistics and words."""
    # 4 warps: a layout built in a called function must use literal lists (a constexpr inside
    # one makes it a tuple Gluon refuses), and layouts cannot be passed to partitions
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    S: gl.constexpr = smem.shape[0]
    P: gl.constexpr = p_buf.shape[0]
    MODE: gl.constexpr = m_buf.shape[0] // 16  # 1 << the kernel's MODE
    for r in range(K, n_rows, STEP):
        slot = r % S
        mbarrier.wait(bars.index(slot), (r // S) & 1)
        if (MODE == 2) | (MODE == 8) | (MODE == 16):  # modes 1, 3, 4
            # (m, d) = (0, 1) without looking at the slot
            gl.store(words_mine + r * P + pid, pid.to(gl.int64) * 0 + 0x3F800000)
        else:
            xt = smem.index(slot).load(layout)
            m = gl.max(gl.max(xt, axis=1), axis=0).to(gl.float32) * LOG2E
            d = gl.sum(gl.sum(gl.exp2(xt.to(gl.float32) * LOG2E - m), axis=1), axis=0)
            gl.store(words_mine + r * P + pid, _pack(m, d))


@gluon.jit
def _write_rows(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit,
                K: gl.constexpr, STEP: gl.constexpr):
    """Rows K, K + STEP, ...: merge, normalize, store, refill."""
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # 4 warps
    w_layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    S: gl.constexpr = smem.shape[0]
    BR: gl.constexpr = smem.shape[1]
    BC: gl.constexpr = smem.shape[2]
    P: gl.constexpr = p_buf.shape[0]
    MODE: gl.constexpr = m_buf.shape[0] // 16  # 1 << the kernel's MODE
    p_offs = gl.arange(0, P, layout=w_layout)
    SUBS: gl.constexpr = P * BR
    # Words are loaded two of this partition's rows ahead (nxt: row q, nxt2: row q + STEP), so
    # that the other CTAs' statistics are mostly in by the time they are used; a word still
    # zero then is polled again.
    nxt = gl.load(words_mine + K * P + p_offs, volatile=True)
    nxt2 = gl.load(words_mine + (K + STEP) * P + p_offs, mask=K + STEP < n_rows, other=0,
                   volatile=True)
    for q in range(K, n_rows, STEP):
        slot = q % S
        words = nxt
        spins = 0
        missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
        if MODE == 16:  # mode 4: no wait for the other CTAs
            missing = False
        while missing & (spins < spin_limit):
            words = gl.load(words_mine + q * P + p_offs, volatile=True)
            missing = gl.min((words != 0).to(gl.int32), axis=0) == 0
            spins += 1
        pm = ((words >> 32) & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
        pd = (words & 0xFFFFFFFF).to(gl.int32).to(gl.float32, bitcast=True)
        m_row = gl.max(pm, axis=0)
        inv = 1.0 / gl.sum(pd * gl.exp2(pm - m_row), axis=0)
        nxt = nxt2
        nxt2 = gl.load(words_mine + (q + 2 * STEP) * P + p_offs, mask=q + 2 * STEP < n_rows,
                       other=0, volatile=True)
        # all words published: this CTA's statistics partition has read the slot. The slot's
        # barrier phase has completed (it cannot move on before this partition refills it).
        mbarrier.wait(bars.index(slot), (q // S) & 1)
        xt = smem.index(slot).load(layout)
        if (MODE == 4) | (MODE == 8) | (MODE == 16):  # modes 2, 3, 4
            y = xt
        else:
            y = (gl.exp2(xt.to(gl.float32) * LOG2E - m_row) * inv).to(xt.dtype)
        smem.index(slot).store(y)
        fence_async_shared()
        _CTA_BARRIER()  # the partition's warps have written the slot before the TMA reads it
        _TMA_STORE(y_desc, [q * SUBS + pid * BR, 0], smem.index(slot))
        if (q >= STEP) & (q - STEP + S < n_rows):
            tma.store_wait(pendings=1)  # this partition's last store has read its slot
            prev = (q - STEP) % S
            mbarrier.expect(bars.index(prev), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [(q - STEP + S) * SUBS + pid * BR, 0], bars.index(prev),
                      smem.index(prev))
    tma.store_wait(pendings=0)


# Partition entry points: one argument tuple serves all (Triton 3.6 passes one to every worker).
@gluon.jit
def _stats_1of1(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _stats_rows(x_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, 0, 1)


@gluon.jit
def _write_1of1(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _write_rows(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit, 0, 1)


@gluon.jit
def _stats_0of2(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _stats_rows(x_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, 0, 2)


@gluon.jit
def _stats_1of2(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _stats_rows(x_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, 1, 2)


@gluon.jit
def _write_0of2(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _write_rows(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit, 0, 2)


@gluon.jit
def _write_1of2(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit):
    _write_rows(x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit, 1, 2)


@gluon.jit
def ring_ws(x_desc, y_desc, words_ptr, n_rows, parity, spin_limit,
            P: gl.constexpr, BR: gl.constexpr, BC: gl.constexpr, S: gl.constexpr,
            WW: gl.constexpr, num_warps: gl.constexpr, MODE: gl.constexpr = 0,
            SPLIT: gl.constexpr = 1):
    """MODE (timing probes, wrong results): 1 no statistics math, 2 no normalize math, 3 both,
    4 both and no wait for the other CTAs' words (loaded and merged all the same).
    SPLIT 2: two statistics and two writer partitions, each taking every other row."""
    pid = gl.program_id(0)
    dtype: gl.constexpr = x_desc.dtype
    SUBS: gl.constexpr = P * BR
    RPAD: gl.constexpr = 64
    words_mine = words_ptr + parity * (RPAD * P)
    words_next = words_ptr + (1 - parity) * (RPAD * P)
    c_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
    clear_rows = gl.arange(0, RPAD, layout=c_layout)
    gl.store(words_next + clear_rows * P + pid, gl.zeros([RPAD], gl.int64, c_layout))

    smem = gl.allocate_shared_memory(dtype, [S, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [S, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(S):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(S):
        if i < n_rows:
            mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
            _TMA_LOAD(x_desc, [i * SUBS + pid * BR, 0], bars.index(i), smem.index(i))
    gl.static_assert(num_warps == 4)
    gl.static_assert(WW == 4)
    # Constexprs do not pass into partitions as arguments; shapes of shared-memory descriptors
    # do (P: an unused 1-D buffer of P bytes).
    p_buf = gl.allocate_shared_memory(gl.int8, [P], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    MODE_BYTES: gl.constexpr = 16 << MODE  # MODE, carried the same way (a power of two)
    m_buf = gl.allocate_shared_memory(gl.int8, [MODE_BYTES], gl.SwizzledSharedLayout(1, 1, 1, [0]))
    args = (x_desc, y_desc, smem, bars, p_buf, m_buf, words_mine, pid, n_rows, spin_limit)
    if SPLIT == 1:
        if _WS_LIST_API:
            gl.warp_specialize([(_stats_1of1, args), (_write_1of1, args)], [WW], [128])
        else:
            gl.warp_specialize(args, _stats_1of1, args, [_write_1of1], [WW], [128])
    else:
        if _WS_LIST_API:
            gl.warp_specialize([(_stats_0of2, args), (_stats_1of2, args), (_write_0of2, args),
                                (_write_1of2, args)], [4, 4, 4], [120, 120, 120])
        else:
            gl.warp_specialize(args, _stats_0of2, args, [_stats_1of2, _write_0of2, _write_1of2],
                               [4, 4, 4], [120, 120, 120])
    for i in gl.static_range(S):
        mbarrier.invalidate(bars.index(i))
