"""Every semantics-distinct attention variant against the float64 oracle (interpreter on CPU).

Code paths (exp form, persistent grid, tensor descriptors, warp-specialized loops) x dtype,
each over shapes that cover: lengths that are and are not tile multiples, causal with
Nq == Nk, Nq < Nk and Nq > Nk (rows that see no key), both memory layouts, GQA, head dims
16/32/64 and padded 48 (->64) and 80 (->128), several tile sizes. num_warps and num_stages
do not change what is computed; the GPU tests (test_attention_gpu.py) cover them. (The P.V
accumulator has one value, fp32, since pv_acc='fp16' left the space.)
"""

from __future__ import annotations

import pytest
import torch

from attention_cases import Shape, check_case, config, make_qkv
from flashtune.gen.attention_ops import attention_forward, triton_features

# (shape, BLOCK_M, BLOCK_N): each shape with the tiles it is run with.
CASES = [
    (Shape(1, 2, 2, 32, 32, 16, "bhnd"), 16, 16),   # even lengths: no boundary masks
    (Shape(1, 2, 2, 37, 53, 32, "bnhd"), 16, 32),   # ragged, Nq < Nk
    (Shape(2, 2, 1, 53, 29, 64, "bhnd"), 32, 16),   # ragged, Nq > Nk (empty rows), GQA
    (Shape(1, 1, 1, 48, 48, 80, "bnhd"), 16, 16),   # head dim 80 padded to 128
    (Shape(1, 2, 2, 64, 32, 48, "bhnd"), 32, 32),   # head dim 48 padded to 64, Nq > Nk even
    (Shape(1, 2, 1, 5, 70, 64, "bnhd"), 16, 32),    # a single short query tile
]

# Code paths that compute differently. Hopper paths run in the interpreter too: descriptor
# loads are emulated there and warp specialization is a no-op, so this checks their logic.
PATHS = {
    "base": {},
    "exp": {"exp2": False},
    "persistent": {"persistent": True},
    "persistent-exp": {"persistent": True, "exp2": False},
    "tma": {"tma": True},
    "tma-persistent": {"tma": True, "persistent": True},
    "tma-ws": {"tma": True, "warp_specialize": True},
    "ws-persistent": {"warp_specialize": True, "persistent": True},
}

DTYPES = (torch.float16, torch.bfloat16)


def _params():
    for name, knobs in PATHS.items():
        for dtype in DTYPES:
            yield pytest.param(name, knobs, dtype, id=f"{name}-{str(dtype)[6:]}")


@pytest.mark.parametrize("name,knobs,dtype", list(_params()))
def test_variant_matches_float64(name, knobs, dtype, device, record_variant):
    needed = {k for k in ("tma", "warp_specialize") if knobs.get(k)}
    if not needed <= triton_features():
        pytest.skip(f"this Triton lacks {needed - triton_features()}")
    failures = []
    for shape, block_m, block_n in CASES:
        raw = config(BLOCK_M=block_m, BLOCK_N=block_n, **knobs)
        q, k, v = make_qkv(shape, dtype, device)
        for causal in (False, True):
            out, lse = attention_forward(q, k, v, causal, None, True, config=raw)
            assert out.shape == q.shape and out.dtype == dtype
            assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
            problem = check_case(out, lse, q, k, v, causal)
            if problem:
                failures.append(f"{shape} {block_m}x{block_n} causal={causal}: {problem}")
            else:
                record_variant("attention_fwd", dtype, raw)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_empty_rows_are_zero_with_lse_minus_inf(dtype, device):
    """Causal with Nq > Nk: the first Nq - Nk query rows see no key (as causal_lower_right)."""
    shape = Shape(1, 1, 1, 40, 8, 32)
    q, k, v = make_qkv(shape, dtype, device)
    out, lse = attention_forward(q, k, v, True, None, True, config=config(BLOCK_M=16, BLOCK_N=16))
    assert torch.equal(out[:, :, :32].float().cpu(), torch.zeros(1, 1, 32, 32))
    assert torch.isneginf(lse[:, :, :32]).all()
    assert torch.isfinite(lse[:, :, 32:]).all()
    assert check_case(out, lse, q, k, v, True) is None


def test_bnhd_output_keeps_layout_and_needs_no_copy(device):
    shape = Shape(1, 3, 3, 33, 33, 32, "bnhd")
    q, k, v = make_qkv(shape, torch.float16, device)
    out = attention_forward(q, k, v, config=config(BLOCK_M=16, BLOCK_N=16))
    assert out.stride() == q.stride()  # same (B, N, H, D) storage order as q
    assert check_case(out, None, q, k, v, False) is None


def test_custom_scale_and_large_logits(device):
    """A large scale makes peaked softmaxes; exp stays safe through the running max."""
    shape = Shape(1, 2, 2, 24, 40, 32)
    q, k, v = make_qkv(shape, torch.float16, device, seed=3)
    for scale in (2.0, -0.5):
        for exp2 in (True, False):
            out, lse = attention_forward(q, k, v, True, scale, True,
                                         config=config(BLOCK_M=16, BLOCK_N=16, exp2=exp2))
            assert torch.isfinite(out.float()).all()
            assert check_case(out, lse, q, k, v, True, scale) is None


@pytest.mark.parametrize("head_dim", [8, 96, 192, 256])
def test_more_head_dims(head_dim, device, record_variant):
    """Padded (8 -> 16, 96 -> 128, 192 -> 256) and the largest head dim, both layouts."""
    for shape, causal in ((Shape(1, 1, 1, 30, 50, head_dim, "bnhd"), False),
                          (Shape(1, 1, 1, 50, 30, head_dim, "bhnd"), True)):
        for dtype in DTYPES:
            q, k, v = make_qkv(shape, dtype, device)
            raw = config(BLOCK_M=16, BLOCK_N=16)
            out, lse = attention_forward(q, k, v, causal, None, True, config=raw)
            assert check_case(out, lse, q, k, v, causal) is None, f"{shape} {dtype} causal={causal}"
            record_variant("attention_fwd", dtype, raw)


@pytest.mark.parametrize("nq,nk", [(1, 1), (1, 17), (17, 1), (2, 3)])
def test_single_rows_and_keys(nq, nk, device):
    """Lengths of 1 (Triton specializes the integer 1 on GPU) and Nq > Nk = 1 causal."""
    shape = Shape(1, 1, 1, nq, nk, 16)
    q, k, v = make_qkv(shape, torch.float16, device)
    for causal in (False, True):
        out, lse = attention_forward(q, k, v, causal, None, True, config=config(BLOCK_M=16, BLOCK_N=16))
        assert check_case(out, lse, q, k, v, causal) is None, f"causal={causal}"
