"""Experiment: software-pipelined ("rotated") key loops for the flash-attention forward.

Standalone kernels modelled on the unmasked key loop of flashtune's attention template
(templates/_attention_common.py.jinja: exp2 with log2(e) folded into qk_scale, the FOLD_SCALE
path: scale applied to the row max and fused into the exponent's FMA, fp32 m / l / acc).
Restricted on purpose: (B, H, N, D) contiguous q/k/v/o, Nq == Nk == N, N a multiple of both
BLOCK_M and BLOCK_N, D a power of two >= 16, non-causal, scale > 0. No masks anywhere.

Kinds (the order of work inside one key-loop iteration; Triton decides which dots stay async,
so only measurement says which order its Hopper pipeliner turns into real overlap):
  base     template order: S_j = Q K_j^T; softmax(S_j); acc = acc*alpha; acc += P_j V_j
  rot      the brief's order: S_{j+1} = Q K_{j+1}^T issued first, then softmax(S_j), rescale,
           acc += P_j V_j (S carried across iterations: softmax of tile j overlaps QK of j+1)
  rot_pv   FA3 intra-warpgroup order: S_{j+1} = Q K_{j+1}^T; acc += P_j V_j (P carried, in
           the input dtype); softmax(S_{j+1}); acc *= alpha_{j+1} (the PV dot of tile j
           overlaps the softmax of tile j+1; the rescale is the only wait on it)
  rot_pv2  as rot_pv, but the rescale is folded into the PV dot's accumulator input:
           acc = P_j V_j + acc * alpha_j (alpha carried), so nothing in the iteration after
           the PV dot reads acc (its wait can move to the next iteration's top)
"""
import os

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634
_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

KINDS = ("base", "rot", "rot_pv", "rot_pv2")


@triton.jit
def _dot(a, b, UPCAST: tl.constexpr):
    # UPCAST: interpreter only (its bf16 tl.dot is wrong); GPU dots stay native.
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    else:
        return tl.dot(a, b)


@triton.jit
def _dot_acc(a, b, acc, UPCAST: tl.constexpr):
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    else:
        return tl.dot(a, b, acc)


@triton.jit
def _softmax_step(qk, m_i, l_i, qk_scale):
    """Online-softmax statistics of one tile of raw scores (the template's FOLD_SCALE path).

    Returns p (fp32, relative to the new max), alpha (rescale of the old acc/l), m_new, l_new.
    """
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    # A row with no finite score keeps m = -inf: exponentiate against 0 (no NaN), as the template.
    m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(qk * qk_scale - m_use[:, None])
    alpha = tl.exp2(m_i - m_use)
    l_i = l_i * alpha + tl.sum(p, 1)
    return p, alpha, m_new, l_i


@triton.jit
def _prologue(Q, K, V, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    start_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = bh * N * HEAD_DIM  # (B, H, N, D) contiguous: one head is N*D elements
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :])
    # Pointers of key tile 0; tile j is + j * BLOCK_N * HEAD_DIM.
    k_ptrs = K + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    v_ptrs = V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    o_ptrs = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    return q, k_ptrs, v_ptrs, o_ptrs


@triton.jit
def _finish(O, o_ptrs, acc, l_i):
    # Non-causal, no masks: every row sees N >= 1 keys, so l_i > 0.
    tl.store(O + o_ptrs, (acc / l_i[:, None]).to(O.dtype.element_ty))


@triton.jit
def _attn_base(Q, K, V, O, qk_scale, N,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               UPCAST: tl.constexpr):
    q, k_ptrs, v_ptrs, o_ptrs = _prologue(Q, K, V, N, HEAD_DIM, BLOCK_M, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * HEAD_DIM)
        qk = _dot(q, tl.trans(k), UPCAST)
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs + start_n * HEAD_DIM)
        acc = _dot_acc(p.to(v.dtype), v, acc, UPCAST)
    _finish(O, o_ptrs, acc, l_i)


@triton.jit
def _attn_rot(Q, K, V, O, qk_scale, N,
              HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              UPCAST: tl.constexpr):
    q, k_ptrs, v_ptrs, o_ptrs = _prologue(Q, K, V, N, HEAD_DIM, BLOCK_M, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    k = tl.load(k_ptrs)
    qk = _dot(q, tl.trans(k), UPCAST)  # scores of tile 0
    for start_n in range(BLOCK_N, N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * HEAD_DIM)
        # Issued before the softmax below, which does not read it.
        qk_next = _dot(q, tl.trans(k), UPCAST)
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
        acc = acc * alpha[:, None]
        v = tl.load(v_ptrs + (start_n - BLOCK_N) * HEAD_DIM)
        acc = _dot_acc(p.to(v.dtype), v, acc, UPCAST)
        qk = qk_next
    p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
    acc = acc * alpha[:, None]
    v = tl.load(v_ptrs + (N - BLOCK_N) * HEAD_DIM)
    acc = _dot_acc(p.to(v.dtype), v, acc, UPCAST)
    _finish(O, o_ptrs, acc, l_i)


@triton.jit
def _attn_rot_pv(Q, K, V, O, qk_scale, N,
                 HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 UPCAST: tl.constexpr):
    q, k_ptrs, v_ptrs, o_ptrs = _prologue(Q, K, V, N, HEAD_DIM, BLOCK_M, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    k = tl.load(k_ptrs)
    qk = _dot(q, tl.trans(k), UPCAST)
    # Tile 0's softmax; acc is 0, so its alpha is not needed.
    p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
    p = p.to(Q.dtype.element_ty)  # carried in the input dtype: half the registers of fp32
    for start_n in range(BLOCK_N, N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * HEAD_DIM)
        qk = _dot(q, tl.trans(k), UPCAST)  # tile j+1
        v = tl.load(v_ptrs + (start_n - BLOCK_N) * HEAD_DIM)
        acc = _dot_acc(p, v, acc, UPCAST)  # tile j, relative to m of tile j
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
        p = p.to(Q.dtype.element_ty)
        acc = acc * alpha[:, None]  # now relative to m of tile j+1, like p
    v = tl.load(v_ptrs + (N - BLOCK_N) * HEAD_DIM)
    acc = _dot_acc(p, v, acc, UPCAST)
    _finish(O, o_ptrs, acc, l_i)


@triton.jit
def _attn_rot_pv2(Q, K, V, O, qk_scale, N,
                  HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  UPCAST: tl.constexpr):
    q, k_ptrs, v_ptrs, o_ptrs = _prologue(Q, K, V, N, HEAD_DIM, BLOCK_M, BLOCK_N)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    k = tl.load(k_ptrs)
    qk = _dot(q, tl.trans(k), UPCAST)
    p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
    p = p.to(Q.dtype.element_ty)
    # Invariant at the loop top: acc is relative to the max before tile j, p and l to the max
    # after it; alpha converts the former to the latter.
    for start_n in range(BLOCK_N, N, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(k_ptrs + start_n * HEAD_DIM)
        qk = _dot(q, tl.trans(k), UPCAST)
        v = tl.load(v_ptrs + (start_n - BLOCK_N) * HEAD_DIM)
        acc = _dot_acc(p, v, acc * alpha[:, None], UPCAST)
        p, alpha, m_i, l_i = _softmax_step(qk, m_i, l_i, qk_scale)
        p = p.to(Q.dtype.element_ty)
    v = tl.load(v_ptrs + (N - BLOCK_N) * HEAD_DIM)
    acc = _dot_acc(p, v, acc * alpha[:, None], UPCAST)
    _finish(O, o_ptrs, acc, l_i)


_KERNELS = {"base": _attn_base, "rot": _attn_rot, "rot_pv": _attn_rot_pv,
            "rot_pv2": _attn_rot_pv2}


def check_inputs(q, k, v, BLOCK_M, BLOCK_N):
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"q: float16 or bfloat16 expected, got {q.dtype}")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype or t.shape != q.shape or t.device != q.device:
            raise ValueError(f"{name}: must match q's dtype, shape and device")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4 or not t.is_contiguous():
            raise ValueError(f"{name}: a contiguous (B, H, N, D) tensor expected")
    n, d = q.shape[2], q.shape[3]
    if d < 16 or d & (d - 1):
        raise ValueError(f"q: head dim {d} must be a power of two >= 16")
    if n == 0 or n % BLOCK_M or n % BLOCK_N:
        raise ValueError(f"q: N={n} must be a positive multiple of BLOCK_M={BLOCK_M} "
                         f"and BLOCK_N={BLOCK_N}")


def launch(kind, q, k, v, BLOCK_M, BLOCK_N, num_warps, num_stages, sm_scale=None):
    """run() that also returns the compiled kernel's resources: (o, {"n_regs", "n_spills",
    "shared"}); values are None where this Triton (or the interpreter) does not expose them."""
    if kind not in _KERNELS:
        raise ValueError(f"kind: one of {KINDS} expected, got {kind!r}")
    check_inputs(q, k, v, BLOCK_M, BLOCK_N)
    batch, heads, n, d = q.shape
    scale = d ** -0.5 if sm_scale is None else float(sm_scale)
    if not scale > 0.0:
        raise ValueError(f"sm_scale: must be > 0 (the folded-scale max needs it), got {scale}")
    o = torch.empty_like(q)
    compiled = _KERNELS[kind][(n // BLOCK_M, batch * heads)](
        q, k, v, o, scale * _LOG2E, n,
        HEAD_DIM=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        UPCAST=_INTERPRET and q.dtype == torch.bfloat16,
        num_warps=num_warps, num_stages=num_stages,
    )
    info = {"n_regs": getattr(compiled, "n_regs", None),
            "n_spills": getattr(compiled, "n_spills", None),
            "shared": getattr(getattr(compiled, "metadata", None), "shared", None)}
    return o, info


def run(kind, q, k, v, BLOCK_M, BLOCK_N, num_warps, num_stages, sm_scale=None):
    """softmax(sm_scale * q k^T) v with the kernel `kind` (one of KINDS); returns o."""
    return launch(kind, q, k, v, BLOCK_M, BLOCK_N, num_warps, num_stages, sm_scale)[0]
