"""Shared helpers for the attention tests: inputs in both layouts, peers and accuracy checks."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from flashtune.gen.attention_space import SPACE
from flashtune.reference import attention_ref, check_accuracy


@dataclass(frozen=True)
class Shape:
    batch: int
    heads: int
    kv_heads: int
    nq: int
    nk: int
    head_dim: int
    layout: str = "bhnd"  # "bhnd": (B, H, N, D) storage; "bnhd": (B, N, H, D) seen transposed

    def __str__(self) -> str:
        return (f"B{self.batch}H{self.heads}/{self.kv_heads}-q{self.nq}k{self.nk}"
                f"-d{self.head_dim}-{self.layout}")


def make_tensor(batch: int, heads: int, n: int, dim: int, dtype, device, layout: str,
                gen: torch.Generator) -> torch.Tensor:
    """randn input as a (B, H, N, D) tensor; "bnhd" storage gives a non-contiguous view."""
    if layout == "bhnd":
        t = torch.randn(batch, heads, n, dim, generator=gen)
        return t.to(dtype=dtype, device=device)
    t = torch.randn(batch, n, heads, dim, generator=gen).to(dtype=dtype, device=device)
    return t.transpose(1, 2)


def make_qkv(shape: Shape, dtype, device, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    q = make_tensor(shape.batch, shape.heads, shape.nq, shape.head_dim, dtype, device, shape.layout, gen)
    k = make_tensor(shape.batch, shape.kv_heads, shape.nk, shape.head_dim, dtype, device, shape.layout, gen)
    v = make_tensor(shape.batch, shape.kv_heads, shape.nk, shape.head_dim, dtype, device, shape.layout, gen)
    return q, k, v


def causal_keep(n_q: int, n_k: int, device) -> torch.Tensor:
    """Bottom-right causal mask (True = attend), as torch's causal_lower_right."""
    rows = torch.arange(n_q, device=device)[:, None]
    cols = torch.arange(n_k, device=device)[None, :]
    return cols <= rows + (n_k - n_q)


def sdpa_math(q, k, v, causal: bool, scale: float | None = None) -> torch.Tensor:
    """torch's math SDPA in the inputs' dtype: the peer of the accuracy rule."""
    group = q.shape[1] // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    mask = causal_keep(q.shape[2], k.shape[2], q.device) if causal else None
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def lse_error(lse: torch.Tensor, ref_lse: torch.Tensor) -> tuple[bool, float, float]:
    """LSE must be NaN, +inf and -inf exactly where the reference is, and close (fp32) elsewhere."""
    lse64 = lse.detach().to("cpu", torch.float64)
    ref64 = ref_lse.detach().to("cpu", torch.float64)
    finite = torch.isfinite(ref64)
    inf = torch.isinf(ref64)
    if (not torch.equal(torch.isfinite(lse64), finite)
            or not torch.equal(torch.isnan(lse64), torch.isnan(ref64))
            or not torch.equal(lse64[inf], ref64[inf])):
        return False, float("inf"), 0.0
    if not finite.any():
        return True, 0.0, 0.0
    err = float((lse64[finite] - ref64[finite]).abs().max())
    bound = 2e-5 * max(1.0, float(ref64[finite].abs().max()))
    return err <= bound, err, bound


def check_case(out, lse, q, k, v, causal: bool, scale: float | None = None) -> str | None:
    """None if (out, lse) pass the accuracy rule against the float64 oracle, else a message."""
    ref, ref_lse = attention_ref(q, k, v, causal, scale)
    peer = sdpa_math(q, k, v, causal, scale)
    acc = check_accuracy(out, ref.to(out.device), peer)
    if not acc.ok:
        return f"out {acc}"
    if lse is not None:
        ok, err, bound = lse_error(lse, ref_lse)
        if not ok:
            return f"lse error {err:.3g} > {bound:.3g} (or non-finite positions differ)"
    return None


def config(**knobs) -> dict:
    """A full raw config: the space's defaults overridden by ``knobs`` (interpreter-friendly
    num_warps=1 / num_stages=1 unless given)."""
    raw = {p.name: p.default for p in SPACE.params}
    raw.update(num_warps=1, num_stages=1)
    raw.update(knobs)
    return raw
