"""Prototype (twenty-ninth session): hold a whole 16 x 1048576 16-bit tensor on chip.

32 MiB of x fits in the H100's shared memory plus a little of its register file: 128 CTAs,
one per SM (their shared memory forces that), 8 CTAs per row, each CTA holding 1/8 of a row
(256 KB): NSMEM TMA blocks of [BR, BC] in shared memory and the rest, [RREG, BC], in
registers. Phase 1 loads everything and folds each block into the CTA's (m, d) as it lands.
Then (SYNC=1) each CTA publishes (m, d) and waits for its row's 8 CTAs through a counter, or
(SYNC=0, the ceiling) uses its own stats. Phase 2 normalizes in place and TMA-stores.
x is read from HBM exactly once and y written once, as in a copy.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import tma, mbarrier, fence_async_shared

LOG2E = 1.4426950408889634

# Triton 3.6 names the TMA copies async_copy_global_to_shared / async_copy_shared_to_global;
# later versions renamed them async_load / async_store (the old names raise).
_TMA_LOAD = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_TMA_STORE = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def hold_softmax(x_desc, y_desc, x_ptr, y_ptr, stats_ptr, count_ptr, target, spin_limit,
                 CTAS_PER_ROW: gl.constexpr, NSMEM: gl.constexpr, RREG: gl.constexpr,
                 BR: gl.constexpr, BC: gl.constexpr, SYNC: gl.constexpr,
                 num_warps: gl.constexpr):
    pid = gl.program_id(0)
    row = pid // CTAS_PER_ROW
    sub_rows: gl.constexpr = NSMEM * BR + RREG
    base = pid * sub_rows
    dtype: gl.constexpr = x_desc.dtype

    smem = gl.allocate_shared_memory(dtype, [NSMEM, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NSMEM, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NSMEM):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(NSMEM):
        mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
        _TMA_LOAD(x_desc, [base + i * BR, 0], bars.index(i), smem.index(i))

    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [num_warps, 1], [1, 0])
    r_offs = gl.arange(0, RREG, layout=gl.SliceLayout(1, layout))
    c_offs = gl.arange(0, BC, layout=gl.SliceLayout(0, layout))
    reg_offs = (base + NSMEM * BR + r_offs)[:, None].to(gl.int64) * BC + c_offs[None, :]
    held = gl.load(x_ptr + reg_offs)

    # phase 1: (m, d) in log2 units, block by block as the TMA loads land
    v = held.to(gl.float32) * 1.4426950408889634
    m = gl.max(gl.max(v, axis=1), axis=0)
    d = gl.sum(gl.sum(gl.exp2(v - m), axis=1), axis=0)
    for i in gl.static_range(NSMEM):
        mbarrier.wait(bars.index(i), 0)
        b = smem.index(i).load(layout).to(gl.float32) * 1.4426950408889634
        m_new = gl.maximum(m, gl.max(gl.max(b, axis=1), axis=0))
        d = d * gl.exp2(m - m_new) + gl.sum(gl.sum(gl.exp2(b - m_new), axis=1), axis=0)
        m = m_new

    if SYNC:
        gl.store(stats_ptr + 2 * pid, m)
        gl.store(stats_ptr + 2 * pid + 1, d)
        gl.atomic_add(count_ptr + row, 1, sem="release")
        seen = gl.atomic_add(count_ptr + row, 0, sem="acquire")
        spins = 0
        while (seen < target) & (spins < spin_limit):
            seen = gl.atomic_add(count_ptr + row, 0, sem="acquire")
            spins += 1
        p_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
        p = gl.arange(0, CTAS_PER_ROW, layout=p_layout)
        pm = gl.load(stats_ptr + 2 * (row * CTAS_PER_ROW + p), cache_modifier=".cg")
        pd = gl.load(stats_ptr + 2 * (row * CTAS_PER_ROW + p) + 1, cache_modifier=".cg")
        m_row = gl.max(pm, axis=0)
        d_row = gl.sum(pd * gl.exp2(pm - m_row), axis=0)
    else:
        m_row = m
        d_row = d
    inv = 1.0 / d_row

    # phase 2: normalize in place and store; the register block goes last
    for i in gl.static_range(NSMEM):
        b = smem.index(i).load(layout).to(gl.float32) * 1.4426950408889634
        smem.index(i).store((gl.exp2(b - m_row) * inv).to(dtype))
        fence_async_shared()
        _TMA_STORE(y_desc, [base + i * BR, 0], smem.index(i))
    gl.store(y_ptr + reg_offs, (gl.exp2(v - m_row) * inv).to(dtype))
    tma.store_wait(pendings=0)
    for i in gl.static_range(NSMEM):
        mbarrier.invalidate(bars.index(i))


@gluon.jit
def hold_softmax_v2(x_desc, y_desc, x_ptr, y_ptr, stats_ptr, count_ptr, target, spin_limit,
                    CTAS_PER_ROW: gl.constexpr, NSMEM: gl.constexpr, RREG: gl.constexpr,
                    BR: gl.constexpr, BC: gl.constexpr, SYNC: gl.constexpr,
                    num_warps: gl.constexpr, MODE: gl.constexpr = 0):
    """v2: no CTA-wide barrier per block. Each warp owns whole sub-rows of a block, so the
    per-block reductions stay inside a warp (per-sub-row running (m, d)), and phase 2 stores
    from registers (st.global) instead of through shared memory and a TMA store.
    MODE (timing probes, wrong results): 1 skips phase 1's math, 2 stores x unchanged in
    phase 2, 3 both (a copy that holds the tensor on chip)."""
    pid = gl.program_id(0)
    row = pid // CTAS_PER_ROW
    sub_rows: gl.constexpr = NSMEM * BR + RREG
    base = pid * sub_rows
    dtype: gl.constexpr = x_desc.dtype

    smem = gl.allocate_shared_memory(dtype, [NSMEM, BR, BC], x_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [NSMEM, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NSMEM):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(NSMEM):
        mbarrier.expect(bars.index(i), x_desc.block_type.nbytes)
        _TMA_LOAD(x_desc, [base + i * BR, 0], bars.index(i), smem.index(i))

    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [num_warps, 1], [1, 0])
    rows_l: gl.constexpr = gl.SliceLayout(1, layout)
    c_offs = gl.arange(0, BC, layout=gl.SliceLayout(0, layout))
    r_reg = gl.arange(0, RREG, layout=rows_l)
    reg_offs = (base + NSMEM * BR + r_reg)[:, None].to(gl.int64) * BC + c_offs[None, :]
    held = gl.load(x_ptr + reg_offs)
    r_blk = gl.arange(0, BR, layout=rows_l)
    blk_offs = (base + r_blk)[:, None].to(gl.int64) * BC + c_offs[None, :]

    # phase 1: per-sub-row running (m, d) in log2 units; reductions along axis 1 stay in a warp
    v = held.to(gl.float32) * 1.4426950408889634
    m_reg = gl.max(v, axis=1)
    d_reg = gl.sum(gl.exp2(v - m_reg[:, None]), axis=1)
    m_r = gl.full([BR], float("-inf"), gl.float32, rows_l)
    d_r = gl.zeros([BR], gl.float32, rows_l)
    for i in gl.static_range(NSMEM):
        mbarrier.wait(bars.index(i), 0)
        if MODE % 2 == 0:
            b = smem.index(i).load(layout).to(gl.float32) * 1.4426950408889634
            m_new = gl.maximum(m_r, gl.max(b, axis=1))
            d_r = d_r * gl.exp2(m_r - m_new) + gl.sum(gl.exp2(b - m_new[:, None]), axis=1)
            m_r = m_new
    if MODE % 2 == 0:
        m = gl.maximum(gl.max(m_r, axis=0), gl.max(m_reg, axis=0))
        d = gl.sum(d_r * gl.exp2(m_r - m), axis=0) + gl.sum(d_reg * gl.exp2(m_reg - m), axis=0)
    else:
        m = gl.max(m_reg, axis=0)
        d = gl.sum(d_reg * gl.exp2(m_reg - m), axis=0)

    if SYNC:
        gl.store(stats_ptr + 2 * pid, m)
        gl.store(stats_ptr + 2 * pid + 1, d)
        gl.atomic_add(count_ptr + row, 1, sem="release")
        seen = gl.atomic_add(count_ptr + row, 0, sem="acquire")
        spins = 0
        while (seen < target) & (spins < spin_limit):
            seen = gl.atomic_add(count_ptr + row, 0, sem="acquire")
            spins += 1
        p_layout: gl.constexpr = gl.BlockedLayout([1], [32], [num_warps], [0])
        p = gl.arange(0, CTAS_PER_ROW, layout=p_layout)
        pm = gl.load(stats_ptr + 2 * (row * CTAS_PER_ROW + p), cache_modifier=".cg")
        pd = gl.load(stats_ptr + 2 * (row * CTAS_PER_ROW + p) + 1, cache_modifier=".cg")
        m_row = gl.max(pm, axis=0)
        d_row = gl.sum(pd * gl.exp2(pm - m_row), axis=0)
    else:
        m_row = m
        d_row = d
    inv = 1.0 / d_row

    # phase 2: normalize from shared memory straight to global memory
    for i in gl.static_range(NSMEM):
        if MODE >= 2:
            gl.store(y_ptr + blk_offs + i * BR * BC, smem.index(i).load(layout))
        else:
            b = smem.index(i).load(layout).to(gl.float32) * 1.4426950408889634
            gl.store(y_ptr + blk_offs + i * BR * BC, (gl.exp2(b - m_row) * inv).to(dtype))
    # the held block is converted again rather than kept in fp32 across the sync (registers)
    v = held.to(gl.float32) * 1.4426950408889634
    gl.store(y_ptr + reg_offs, (gl.exp2(v - m_row) * inv).to(dtype))
    for i in gl.static_range(NSMEM):
        mbarrier.invalidate(bars.index(i))
