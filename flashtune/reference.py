"""Eager float64 oracles and the project's accuracy rule, shared by tests, tuner and benchmarks.

Accuracy rule: our max abs error against the float64 oracle must be at most 1.1 x the error of
the torch eager op in the same dtype, plus a small slack of two ulps at the output's scale
(2 * eps(dtype) * max|ref|; for a backward, at the scale of its row-sum term, whose summation
order differs from torch's). Non-finite values must sit where the oracle has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


def softmax_ref(x: torch.Tensor, dim: int = -1, log: bool = False) -> torch.Tensor:
    fn = torch.log_softmax if log else torch.softmax
    return fn(x.to(torch.float64), dim)


def softmax_backward_ref(y: torch.Tensor, dy: torch.Tensor, dim: int = -1,
                         log: bool = False) -> torch.Tensor:
    """dx from the op's output y and incoming gradient dy, in float64 (background.md)."""
    y64, dy64 = y.to(torch.float64), dy.to(torch.float64)
    if log:
        return dy64 - torch.exp(y64) * dy64.sum(dim, keepdim=True)
    return y64 * (dy64 - (dy64 * y64).sum(dim, keepdim=True))


def softmax_backward_scale(y: torch.Tensor, dy: torch.Tensor, dim: int = -1,
                           log: bool = False) -> float:
    """Magnitude of the backward's row-sum term: summation error scales with it, not with dx.

    softmax: max over rows of max|y| * sum|dy * y|; log_softmax: max exp(y) * sum|dy|.
    """
    y64, dy64 = y.to(torch.float64), dy.to(torch.float64)
    if log:
        term = torch.exp(y64).amax(dim) * dy64.abs().sum(dim)
    else:
        term = y64.abs().amax(dim) * (dy64 * y64).abs().sum(dim)
    finite = term[torch.isfinite(term)]
    return float(finite.max()) if finite.numel() else 0.0


@dataclass(frozen=True)
class Accuracy:
    ok: bool
    err: float
    peer_err: float
    bound: float
    reason: str

    def __str__(self) -> str:
        return (f"{'ok' if self.ok else 'FAIL'}: err {self.err:.3g} vs peer {self.peer_err:.3g} "
                f"(bound {self.bound:.3g}){': ' + self.reason if self.reason else ''}")


def _max_abs(a: torch.Tensor) -> float:
    return float(a.abs().max()) if a.numel() else 0.0


def oracle_in(ref64: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The float64 oracle an output in ``dtype`` is judged by: unchanged, except that a value
    past the dtype's range is the infinity every result in that dtype has there. log_softmax
    of fp16 [65504, -65504] is -131008 at the second element, -inf in fp16 in torch's result
    and ours alike; compared with the unrounded oracle both were refused."""
    held = ref64.to(dtype).to(torch.float64)
    return torch.where(torch.isfinite(held), ref64, held)


def check_accuracy(out: torch.Tensor, ref: torch.Tensor, peer: torch.Tensor,
                   factor: float = 1.1, slack_ulps: float = 2.0, scale: float = 0.0) -> Accuracy:
    """Compare ``out`` with the float64 ``ref``; ``peer`` is torch's result in out's dtype.

    The slack is ``slack_ulps`` ulps of the larger of max|ref| and ``scale`` (the magnitude of
    an intermediate whose rounding reaches the output, e.g. a backward's row sum).
    """
    if out.shape != ref.shape:
        return Accuracy(False, float("inf"), 0.0, 0.0, f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != peer.dtype:
        # An output in a wider dtype would pass the error bound of the narrower one.
        return Accuracy(False, float("inf"), 0.0, 0.0,
                        f"dtype {out.dtype} != {peer.dtype} (torch's result)")
    # On out's device: large GPU checks stay on the GPU (moving 1e8+ elements to the CPU is slow).
    out64, ref64, peer64 = (t.detach().to(out.device, torch.float64) for t in (out, ref, peer))
    ref64 = oracle_in(ref64, out.dtype)
    finite = torch.isfinite(ref64)
    # NaN where the oracle has NaN, and +-inf exactly where it has +-inf (in out's dtype).
    if not torch.equal(torch.isnan(out64), torch.isnan(ref64)):
        return Accuracy(False, float("nan"), 0.0, 0.0, "NaN positions differ from the reference")
    inf = torch.isinf(ref64)
    if not torch.equal(torch.isinf(out64), inf) or not torch.equal(out64[inf], ref64[inf]):
        return Accuracy(False, float("inf"), 0.0, 0.0, "infinite values differ from the reference")
    err = _max_abs(out64[finite] - ref64[finite])
    peer_finite = finite & torch.isfinite(peer64)
    peer_err = _max_abs(peer64[peer_finite] - ref64[peer_finite])
    eps = torch.finfo(out.dtype).eps
    bound = factor * peer_err + slack_ulps * eps * max(_max_abs(ref64[finite]), scale)
    return Accuracy(err <= bound, err, peer_err, bound, "" if err <= bound else "error above bound")


def attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                  scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Float64 attention oracle: (out, lse) for q (B, H, Nq, D), k/v (B, Hkv, Nk, D).

    Causal is bottom-right aligned (key c masked for query r when c > r + Nk - Nq, as
    torch.nn.attention.bias.causal_lower_right); a row that sees no key gets out 0, lse -inf.
    lse is the natural-log logsumexp of the scaled, masked scores: +inf for a row with a +inf
    score (whose out is NaN, as in SDPA), NaN for one with a NaN score.
    """
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    group = q.shape[1] // max(k.shape[1], 1)
    if group > 1:
        k64, v64 = k64.repeat_interleave(group, 1), v64.repeat_interleave(group, 1)
    if scale is None:
        scale = q.shape[-1] ** -0.5
    scores = (q64 @ k64.transpose(-1, -2)) * scale
    n_q, n_k = scores.shape[-2:]
    if causal:
        rows = torch.arange(n_q, device=scores.device)[:, None]
        cols = torch.arange(n_k, device=scores.device)[None, :]
        scores = scores.masked_fill(cols > rows + (n_k - n_q), float("-inf"))
    lse = torch.logsumexp(scores, -1)
    # softmax subtracts the row max, not the lse: at scores near 2**60, s - lse rounds log(n)
    # away and every key would weigh 1. Only rows that see no key (all -inf, whose softmax is
    # NaN) get probabilities 0; a NaN from NaN/inf inputs stays, as in torch's SDPA.
    probs = torch.softmax(scores, -1).masked_fill(torch.isneginf(lse)[..., None], 0.0)
    return probs @ v64, lse
