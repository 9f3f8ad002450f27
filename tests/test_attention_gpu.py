"""Attention on a CUDA GPU: warps x stages x tiles, Hopper paths, head dims up to 256, the
benchmark shapes at reduced batch, torch.compile. Run: pytest -m gpu tests/test_attention_gpu.py
"""

from __future__ import annotations

import itertools

import pytest
import torch

import flashtune
from attention_cases import Shape, check_case, config, lse_error, make_qkv
from flashtune.gen.attention_ops import attention_forward
from flashtune.gen.attention_space import (
    SPACE,
    AttentionProblem,
    default_config,
    hopper_features,
    problem_misfit,
)
from flashtune.gen.space import ConfigError
from flashtune.reference import attention_ref

pytestmark = pytest.mark.gpu

DTYPES = (torch.float16, torch.bfloat16)


def _fits(raw: dict, shape: Shape, dtype, causal: bool) -> bool:
    try:
        cfg = SPACE.validate(raw)
    except ConfigError:
        return False
    problem = AttentionProblem(shape.batch, shape.heads, shape.kv_heads, shape.nq, shape.nk,
                               shape.head_dim, causal, str(dtype)[6:])
    return problem_misfit(cfg, problem) is None


def _run_all(shape: Shape, dtype, raws, causals=(False, True), record=None):
    q, k, v = make_qkv(shape, dtype, "cuda")
    failures = []
    for raw in raws:
        for causal in causals:
            if not _fits(raw, shape, dtype, causal):
                continue
            try:
                out, lse = attention_forward(q, k, v, causal, None, True, config=raw)
                torch.cuda.synchronize()
            except Exception as err:  # a compile failure is a finding: report all, then fail
                failures.append(f"{shape} causal={causal} {raw}: {type(err).__name__}: {err}"[:400])
                continue
            problem = check_case(out, lse, q, k, v, causal)
            if problem:
                failures.append(f"{shape} causal={causal} {raw}: {problem}")
            elif record is not None:
                record("attention_fwd", dtype, raw)
    assert not failures, "\n".join(failures)


TILES = [(64, 32), (64, 64), (128, 32), (128, 64), (128, 128)]


@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_warps_stages_tiles(head_dim, dtype, record_variant):
    """Tiles x warps at 3 stages, then stages 1/2/4 on one tile, plus the other code paths.
    bf16 runs a subset: the code differs from fp16 only in the dot operand type."""
    shape = Shape(1, 4, 4, 1000, 1000, head_dim)  # ragged: boundary masks on
    raws = [config(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=3)
            for (bm, bn), w in itertools.product(TILES, (4, 8))]
    raws += [config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=s) for s in (1, 2, 4)]
    raws += [config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=2, exp2=False),
             config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, persistent=True),
             config(BLOCK_M=256, BLOCK_N=64, num_warps=16, num_stages=2)]
    if dtype == torch.bfloat16:
        raws = raws[1::4]
    _run_all(shape, dtype, raws, record=record_variant)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_hopper_paths(dtype, record_variant):
    """Every combination of tma / warp_specialize / persistent (bf16: two of them), on a
    (B, H, N, D) GQA shape and a (B, N, H, D) shape with Nq < Nk."""
    features = hopper_features()
    if not features:
        pytest.skip("needs compute capability >= 9.0 and a Triton with tensor descriptors")
    combos = [c for c in itertools.product((False, True), repeat=3)
              if (not c[0] or "tma" in features) and (not c[1] or "warp_specialize" in features)]
    if dtype == torch.bfloat16:
        combos = [c for c in combos if c in ((True, False, False), (True, True, True))]
    for shape, (bm, bn, w) in ((Shape(2, 4, 2, 1000, 1000, 128, "bhnd"), (128, 64, 8)),
                               (Shape(1, 2, 2, 1000, 2048, 64, "bnhd"), (64, 64, 4))):
        raws = [config(BLOCK_M=bm, BLOCK_N=bn, num_warps=w, num_stages=3, tma=tma,
                       warp_specialize=ws, persistent=persistent)
                for tma, ws, persistent in combos]
        _run_all(shape, dtype, raws, record=record_variant)


def test_huge_fp16_scores_on_every_code_path():
    """fp16 q and k near 8000 (scores of 2**29 in exp2 units) take the key loop's rescue
    (unfused scaling through PTX mul.rn): without it the folded scale made NaN rows. Every
    Hopper path and pipelining depth compiles it; rows of ordinary scores share the tiles."""
    features = hopper_features()
    raws = [config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=s) for s in (1, 3)]
    raws += [config(BLOCK_M=64, BLOCK_N=32, num_warps=4, num_stages=2, exp2=False)]
    for tma, ws, persistent in itertools.product((False, True), repeat=3):
        if (tma and "tma" not in features) or (ws and "warp_specialize" not in features):
            continue
        raws.append(config(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3, tma=tma,
                           warp_specialize=ws, persistent=persistent))
    gen = torch.Generator().manual_seed(5)
    failures = []
    for head_dim, nq, nk in ((64, 300, 500), (128, 500, 300)):
        q = (torch.rand(1, 2, nq, head_dim, generator=gen) * 4000 + 5000).half().cuda()
        k = (torch.rand(1, 2, nk, head_dim, generator=gen) * 4000 + 5000).half().cuda()
        v = torch.randn(1, 2, nk, head_dim, generator=gen).half().cuda()
        q[:, :, ::7] = torch.randn(1, 2, len(range(0, nq, 7)), head_dim, generator=gen).half().cuda()
        shape = Shape(1, 2, 2, nq, nk, head_dim)
        for raw in raws:
            for causal in (False, True):
                if not _fits(raw, shape, torch.float16, causal):
                    continue
                out, lse = attention_forward(q, k, v, causal, None, True, config=raw)
                ref, ref_lse = attention_ref(q, k, v, causal)
                err = (out.double() - ref.to(out.device)).abs().nan_to_num(float("inf")).max()
                lse_ok, _, _ = lse_error(lse, ref_lse)
                if not (err <= 2e-3 and lse_ok):  # fp16 rounding of outputs of |v| < 5
                    failures.append(f"d={head_dim} causal={causal} {raw}: max error {err}, "
                                    f"lse ok {lse_ok}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("head_dim", [16, 32, 64, 80, 96, 128, 192, 256])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_head_dims_default_config(head_dim, dtype, record_variant):
    for nq, nk, causal in ((300, 500, False), (500, 300, True)):
        shape = Shape(1, 2, 2, nq, nk, head_dim, "bnhd" if causal else "bhnd")
        problem = AttentionProblem(1, 2, 2, nq, nk, head_dim, causal, str(dtype)[6:])
        raw = default_config("attention_fwd", problem).as_dict()
        _run_all(shape, dtype, [raw], causals=(causal,), record=record_variant)


@pytest.mark.parametrize("nq,nk,heads", [(1, 1, 1), (1, 17, 1), (17, 1, 2), (2, 3, 1)])
def test_lengths_and_heads_of_one(nq, nk, heads):
    """Triton specializes integer arguments equal to 1 as constants: compile those paths."""
    raws = [config(BLOCK_M=16, BLOCK_N=16)]
    if "tma" in hopper_features():
        raws.append(config(BLOCK_M=64, BLOCK_N=64, num_warps=4, tma=True))
    raws.append(config(BLOCK_M=64, BLOCK_N=64, num_warps=4, persistent=True))
    _run_all(Shape(1, heads, heads, nq, nk, 64), torch.float16, raws)


BENCH = [  # benchmarks.md shapes (B, H, N, D) at batch 1 and at most 4 heads
    (32, 1024, 64), (32, 4096, 64), (32, 16384, 64),
    (16, 1024, 128), (16, 4096, 128), (16, 16384, 128),
    (16, 4096, 256), (32, 1000, 128),
]


@pytest.mark.parametrize("heads,n,head_dim", BENCH)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d)[6:])
def test_benchmark_shapes_public_api(heads, n, head_dim, dtype):
    shape = Shape(1, min(heads, 4) if n < 16384 else 2, min(heads, 4) if n < 16384 else 2,
                  n, n, head_dim)
    q, k, v = make_qkv(shape, dtype, "cuda")
    for causal in (False, True):
        out, lse = flashtune.attention(q, k, v, causal=causal, return_lse=True)
        problem = check_case(out, lse, q, k, v, causal)
        assert problem is None, f"{shape} causal={causal}: {problem}"


def test_torch_compile_traces_the_op():
    q, k, v = make_qkv(Shape(2, 4, 4, 256, 256, 64), torch.float16, "cuda")

    @torch.compile(fullgraph=True)
    def block(q, k, v):
        return flashtune.attention(q * 1.0, k, v, causal=True) + 1.0

    out = block(q, k, v)
    assert torch.allclose(out, flashtune.attention(q, k, v, causal=True) + 1.0, atol=1e-3)
