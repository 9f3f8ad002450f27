import triton
import triton.language as tl


@triton.jit
def _softmax_vec(
    x_ptr, y_ptr, n_cols, x_row_stride, y_row_stride,
    BLOCK: tl.constexpr, VEC: tl.constexpr,
):
    # Statistics per 16-byte vector: a chunk is viewed as [BLOCK // VEC, VEC], each thread
    # holding whole vectors, so the reductions along axis 1 stay inside a thread.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    NV: tl.constexpr = BLOCK // VEC
    cols = tl.arange(0, NV)[:, None] * VEC + tl.arange(0, VEC)[None, :]
    m_v = tl.full([NV], float("-inf"), tl.float32)
    d_v = tl.zeros([NV], tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=float("-inf"), eviction_policy="evict_last")
        x = x.to(tl.float32)
        m_new = tl.maximum(m_v, tl.max(x, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        d_v = d_v * tl.exp2((m_v - m_safe) * 1.4426950408889634) + tl.sum(tl.exp2((x - m_safe[:, None]) * 1.4426950408889634), axis=1)
        m_v = m_new
    m = tl.max(m_v, axis=0)
    m_safe = tl.where(m == float("-inf"), 0.0, m)
    d = tl.sum(d_v * tl.exp2((m_v - m_safe) * 1.4426950408889634), axis=0)
    inv_d = 1.0 / d
    n_chunks = tl.cdiv(n_cols, BLOCK)
    for i in range(0, n_chunks):
        start = (n_chunks - 1 - i) * BLOCK
        offs = start + cols
        x = tl.load(x_row + offs, mask=offs < n_cols, other=0.0, eviction_policy="evict_first").to(tl.float32)
        y = tl.exp2((x - m) * 1.4426950408889634) * inv_d
        tl.store(y_row + offs, y.to(y_ptr.dtype.element_ty), mask=offs < n_cols, eviction_policy="evict_first")


def launch(x, y, block, warps):
    n_rows, n_cols = x.shape
    _softmax_vec[(n_rows,)](x, y, n_cols, x.stride(0), y.stride(0), BLOCK=block,
                            VEC=16 // x.element_size(), num_warps=warps, num_stages=1)
