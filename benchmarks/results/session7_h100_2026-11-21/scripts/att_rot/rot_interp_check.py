"""Interpreter (CPU) correctness of every kind in rot_kernels against a float64 reference.

Run: cd /work/main && TRITON_INTERPRET=1 /work/venv/bin/python -m pytest -q \
         scratch/att_rot/test_rot_interp.py -p no:cacheprovider
(tests/conftest.py is not loaded here, so the env var is also set below before triton loads.)
"""
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rot_kernels  # noqa: E402

# (B, H, N, D, BLOCK_M, BLOCK_N): N / BLOCK_N from 1 key tile (rotated loops never enter
# their loop body: prologue + epilogue only) to 8 tiles.
SHAPES = [
    (1, 2, 256, 64, 64, 32),
    (1, 2, 256, 128, 64, 64),
    (1, 1, 128, 64, 64, 128),   # one key tile
    (1, 1, 128, 32, 32, 64),    # two key tiles: one loop iteration
    (2, 1, 128, 16, 16, 16),
]


def reference(q, k, v, scale):
    q64, k64, v64 = q.double(), k.double(), v.double()
    s = torch.matmul(q64, k64.transpose(-1, -2)) * scale
    return torch.matmul(torch.softmax(s, dim=-1), v64)


def _inputs(shape, dtype, seed, spread=1.0):
    b, h, n, d = shape
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(b, h, n, d, generator=g) * spread).to(dtype) for _ in range(3)]


@pytest.mark.parametrize("kind", rot_kernels.KINDS)
@pytest.mark.parametrize("b,h,n,d,bm,bn", SHAPES)
def test_matches_float64(kind, b, h, n, d, bm, bn):
    q, k, v = _inputs((b, h, n, d), torch.float16, seed=n + d + bm + bn)
    out = rot_kernels.run(kind, q, k, v, bm, bn, num_warps=4, num_stages=2)
    assert out.shape == q.shape and out.dtype == q.dtype
    ref = reference(q, k, v, d ** -0.5)
    err = (out.double() - ref).abs().max().item()
    assert err < 2e-3, f"{kind}: max abs err {err}"


@pytest.mark.parametrize("kind", rot_kernels.KINDS)
def test_growing_scores_rescale(kind):
    # Scores that rise along the key axis make every tile raise the running max, so a wrong
    # alpha (applied to the wrong tile, or twice) shows up; large spread makes it visible.
    b, h, n, d = 1, 1, 256, 32
    q, k, v = _inputs((b, h, n, d), torch.float16, seed=7, spread=1.0)
    ramp = torch.linspace(0.0, 4.0, n).to(torch.float16)[None, None, :, None]
    k = (k * 2 + ramp).to(torch.float16)
    q = (q.abs() + 0.5).to(torch.float16)  # positive q: scores grow with the ramp
    out = rot_kernels.run(kind, q, k, v, 32, 32, num_warps=4, num_stages=2, sm_scale=0.5)
    ref = reference(q, k, v, 0.5)
    err = (out.double() - ref).abs().max().item()
    assert err < 4e-3, f"{kind}: max abs err {err}"


@pytest.mark.parametrize("kind", rot_kernels.KINDS)
def test_bf16(kind):
    q, k, v = _inputs((1, 2, 128, 64), torch.bfloat16, seed=3)
    out = rot_kernels.run(kind, q, k, v, 32, 32, num_warps=4, num_stages=2)
    ref = reference(q, k, v, 64 ** -0.5)
    err = (out.double() - ref).abs().max().item()
    assert err < 2e-2, f"{kind}: max abs err {err}"


def test_bad_inputs():
    q, k, v = _inputs((1, 1, 96, 32), torch.float16, seed=1)
    with pytest.raises(ValueError, match="N=96"):
        rot_kernels.run("base", q, k, v, 64, 32, 4, 2)
    with pytest.raises(ValueError, match="kind"):
        rot_kernels.run("nope", q, k, v, 32, 32, 4, 2)
    with pytest.raises(TypeError, match="q"):
        rot_kernels.run("base", q.float(), k.float(), v.float(), 32, 32, 4, 2)
