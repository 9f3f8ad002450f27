"""The attention adapter: inputs, oracle and launch of ``attention_fwd`` problems for the worker.

Inputs are randn in the problem's (B, H, N, D) layout (contiguous). A full float64 oracle of a
benchmark problem (2 x 32 heads x 16384^2 scores) would cost more than the whole tune, so the
gate checks a deterministic sample: the query rows of ``flashtune.bench.checks.sample_rows``
(about ``ROWS`` spread over the sequence plus the last 8) of every (b, h) pair, against the
bench's float64 oracle (causal mask per sampled row, bottom-right aligned). Every pair, not a
few: an output wrong in some heads only (batch and head program ids swapped, where B = H leaves
(0, 0) and (B-1, H-1) unchanged; a grouped-query kv-head mapping wrong in middle heads) must
fail. The oracle is built once per problem; each check is one indexing op.
The peer is torch's math SDPA in the problem's dtype on the same rows, and the rule is the
project's (``flashtune.reference.check_accuracy``). The output is filled with NaN before each
launch (by the worker), and the gate also requires a finite output everywhere, so a variant
that leaves tiles outside the sample unwritten fails too.

The tuner times without the LSE output (``lse=None``) and with the default scale 1/sqrt(D).
The runtime runs the same config with ``return_lse=True`` too, another kernel specialization
(STORE_LSE): the finalists' re-check (``Case.recheck``) launches that one as well and checks
its output and LSE (the sampled rows against the float64 logsumexp, no NaN or +inf anywhere).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..gen.attention_space import AttentionProblem
from .adapter import TORCH_DTYPES, Case, Recheck, variant_module
from .gate import WRONG

ROWS = 64  # sampled query rows per checked (b, h) pair (plus the last 8)
# LSE bound: the kernels' LSE is fp32, from fp32 scores; relative to max(1, max |LSE|), as the
# tests' rule (tests/attention_cases.py lse_error).
LSE_RTOL = 2e-5


def _masked_rows(rows: torch.Tensor, n_q: int, n_k: int, causal: bool, device) -> torch.Tensor | None:
    """Boolean keep-mask (rows x keys) of the sampled query rows, bottom-right causal."""
    if not causal:
        return None
    cols = torch.arange(n_k, device=device)[None, :]
    return cols <= rows.to(device)[:, None] + (n_k - n_q)


def math_sdpa_rows(q, k, v, causal: bool, pairs, rows: torch.Tensor) -> torch.Tensor:
    """torch's math SDPA in the inputs' dtype on the sampled rows: (pairs, rows, D)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    group = q.shape[1] // k.shape[1]
    mask = _masked_rows(rows, q.shape[2], k.shape[2], causal, q.device)
    outs = []
    with sdpa_kernel(SDPBackend.MATH):
        for b, h in pairs:
            qs = q[b, h, rows.to(q.device)][None, None]
            ks, vs = k[b, h // group][None, None], v[b, h // group][None, None]
            outs.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask)[0, 0])
    return torch.stack(outs)


def oracle_rows(q, k, v, causal: bool, pairs, rows: torch.Tensor) -> torch.Tensor:
    """float64 output of the sampled rows, (pairs, rows, D), by the benchmark's oracle."""
    from ..bench.checks import attention_oracle

    return attention_oracle(q, k, v, causal, list(pairs), rows.to(q.device))


def oracle_lse_rows(q, k, causal: bool, pairs, rows: torch.Tensor) -> torch.Tensor:
    """float64 logsumexp of the sampled rows' scaled scores, (pairs, rows); -inf for a row
    that sees no key (bottom-right causal with Nq > Nk)."""
    from ..bench.checks import oracle_scores

    return torch.stack([torch.logsumexp(oracle_scores(q, k, causal, b, h, rows), -1)
                        for b, h in pairs])


class AttentionGate:
    """The accuracy rule on the sampled rows of every (b, h) pair (``ref64``, ``peer`` and
    ``ref_lse`` in ``bench.checks.every_pair`` order), plus a finite output everywhere; with
    the LSE output, its sampled rows against ``ref_lse`` and no NaN or +inf anywhere."""

    def __init__(self, ref64: torch.Tensor, peer: torch.Tensor, rows: torch.Tensor,
                 ref_lse: torch.Tensor | None = None):
        self.ref, self.peer, self.rows = ref64, peer, rows
        self.ref_lse = ref_lse

    def check_with_lse(self, out: torch.Tensor, lse: torch.Tensor) -> str | None:
        from ..bench.checks import pick_every

        wrong = self.check(out)
        if wrong:
            return wrong
        # -inf is right for rows that see no key (causal, Nq > Nk); NaN or +inf never is here.
        if bool((torch.isnan(lse) | torch.isposinf(lse)).any()):
            return f"{WRONG}: NaN or +inf in the LSE (rows left unwritten or overflow)"
        got = pick_every(lse, self.rows).double()
        ref = self.ref_lse
        if not torch.equal(torch.isneginf(got), torch.isneginf(ref)):
            return f"{WRONG}: LSE -inf (rows that see no key) where the float64 reference differs"
        finite = torch.isfinite(ref)
        if not bool(finite.any()):
            return None
        err = float((got[finite] - ref[finite]).abs().max())
        bound = LSE_RTOL * max(1.0, float(ref[finite].abs().max()))
        if not err <= bound:
            return f"{WRONG}: LSE max abs error {err:.3g} > bound {bound:.3g} on sampled rows"
        return None

    def check(self, out: torch.Tensor) -> str | None:
        from ..bench.checks import pick_every
        from ..reference import check_accuracy

        if not bool(torch.isfinite(out).all()):
            return f"{WRONG}: NaN or inf in the output (rows left unwritten or overflow)"
        acc = check_accuracy(pick_every(out, self.rows), self.ref, self.peer)
        if not acc.ok:
            return (f"{WRONG}: max abs error {acc.err:.3g} > bound {acc.bound:.3g} on sampled "
                    f"rows (torch math SDPA error {acc.peer_err:.3g})")
        return None


class AttentionAdapter:
    """``attention_fwd``: q, k, v -> out (no LSE), default scale."""

    def make_case(self, op: str, problem: AttentionProblem, device: str, seed: int) -> Case:
        from ..bench.checks import every_pair, sample_rows

        dtype = TORCH_DTYPES[problem.dtype]
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        p = problem

        def randn(heads: int, n: int) -> torch.Tensor:
            shape = (p.batch, heads, n, p.head_dim)
            return torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

        q, k, v = randn(p.heads, p.nq), randn(p.kv_heads, p.nk), randn(p.kv_heads, p.nk)
        out = torch.empty_like(q)
        lse = torch.empty((p.batch, p.heads, p.nq), dtype=torch.float32, device=device)
        pairs = every_pair(p.batch, p.heads)
        rows = sample_rows(p.nq, ROWS).to(device)
        gate = AttentionGate(oracle_rows(q, k, v, p.causal, pairs, rows),
                             math_sdpa_rows(q, k, v, p.causal, pairs, rows), rows,
                             oracle_lse_rows(q, k, p.causal, pairs, rows))
        scale = p.head_dim ** -0.5
        recheck = Recheck((q, k, v, out, lse, scale, bool(p.causal)), (out, lse),
                          lambda: gate.check_with_lse(out, lse))
        return Case((q, k, v, out, None, scale, bool(p.causal)), gate, output=out,
                    recheck=recheck)

    def launch(self, op: str, config: Mapping[str, Any], case: Case) -> None:
        variant_module(self, op, config).launch(*case.args)
