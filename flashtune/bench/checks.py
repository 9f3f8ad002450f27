"""Correctness of every measured output: against the reference peer's output (same dtype) and
against a float64 oracle, with the project's accuracy rule (flashtune.reference.check_accuracy:
error vs float64 at most 1.1 x the peer's, plus two ulps)."""

from __future__ import annotations

import torch

from ..reference import (check_accuracy, softmax_backward_ref, softmax_backward_scale,
                         softmax_ref)


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0


def _summary(acc, diff: float, peer: str) -> dict:
    return {"ok": bool(acc.ok), "err_f64": acc.err, "peer_err_f64": acc.peer_err,
            "bound": acc.bound, "max_diff_vs_peer": diff, "peer": peer, "detail": str(acc)}


class SoftmaxCheck:
    """Full float64 oracle (cheap next to the benchmark) and torch.softmax as the peer."""

    PEER = "torch.softmax"

    def __init__(self, x: torch.Tensor):
        self.ref = softmax_ref(x, -1)
        self.peer = torch.softmax(x, -1)

    def __call__(self, out: torch.Tensor) -> dict:
        return _summary(check_accuracy(out, self.ref, self.peer), _max_diff(out, self.peer), self.PEER)


class BackwardCheck:
    """dx against the float64 backward of (y, dy) (background.md), with torch's backward in the
    same dtype as the peer; the slack is at the scale of the row-sum term (the rule's backward
    form, flashtune.reference)."""

    PEER = "torch backward"

    def __init__(self, y: torch.Tensor, dy: torch.Tensor, log: bool):
        from ..dispatch.plans import aten_backward

        self.ref = softmax_backward_ref(y, dy, -1, log)
        self.peer = aten_backward(log)(dy, y, -1, y.dtype)
        self.scale = softmax_backward_scale(y, dy, -1, log)

    def __call__(self, out: torch.Tensor) -> dict:
        acc = check_accuracy(out, self.ref, self.peer, scale=self.scale)
        return _summary(acc, _max_diff(out, self.peer), self.PEER)


def sample_rows(n: int, count: int = 192) -> torch.Tensor:
    """About ``count`` query rows spread over [0, n), plus the last 8 (ragged tails)."""
    step = max(1, n // count)
    rows = torch.cat([torch.arange(0, n, step), torch.arange(max(0, n - 8), n)])
    return torch.unique(rows)


def oracle_scores(q, k, causal: bool, b: int, h: int, rows) -> torch.Tensor:
    """float64 scaled scores (rows x keys) of query ``rows`` of the pair (b, h), -inf where the
    bottom-right causal mask hides a key. k may have fewer heads than q (grouped-query
    attention): head h reads kv head h // (H / Hkv), as flashtune.attention does."""
    n_q, n_k = q.shape[2], k.shape[2]
    group = q.shape[1] // k.shape[1]
    rows = rows.to(q.device)
    s = (q[b, h, rows].double() @ k[b, h // group].double().T) * q.shape[-1] ** -0.5
    if causal:
        cols = torch.arange(n_k, device=q.device)[None, :]
        s = s.masked_fill(cols > rows[:, None] + (n_k - n_q), float("-inf"))
    return s


def attention_oracle(q, k, v, causal: bool, heads, rows) -> torch.Tensor:
    """float64 output for query ``rows`` of the (b, h) pairs in ``heads`` (scores by
    oracle_scores: bottom-right causal, grouped-query attention)."""
    group = q.shape[1] // k.shape[1]
    outs = []
    for b, h in heads:
        s = oracle_scores(q, k, causal, b, h, rows)
        # Rows that see no key get 0 (softmax of all -inf is NaN); NaN from the inputs stays.
        p = torch.softmax(s, -1).masked_fill(torch.isneginf(s).all(-1, keepdim=True), 0.0)
        outs.append(p @ v[b, h // group].double())
    return torch.stack(outs)


def pick(out: torch.Tensor, heads, rows) -> torch.Tensor:
    return torch.stack([out[b, h, rows] for b, h in heads])


def every_pair(batch: int, heads: int) -> list[tuple[int, int]]:
    """Every (b, h) pair, b-major: the order of ``pick_every``."""
    return [(b, h) for b in range(batch) for h in range(heads)]


def pick_every(out: torch.Tensor, rows) -> torch.Tensor:
    """``pick(out, every_pair(B, H), rows)`` in one indexing op instead of B * H."""
    return out[:, :, rows].flatten(0, 1)


class AttentionCheck:
    """float64 oracle on sampled query rows of every (b, h) pair (all rows would cost more than
    the benchmark); SDPA with torch's own backend choice as the peer.

    Every pair, not a few: an output wrong in some heads only (batch and head program ids
    swapped, where B = H leaves (0, 0) and (B-1, H-1) unchanged; a schedule that skips a middle
    head's tiles) must fail. The sampled rows of all pairs cost about as much float64 work as
    one attention call on ~200 query rows, far less than timing it."""

    PEER = "sdpa (default backend)"

    def __init__(self, q, k, v, causal: bool, peer_out: torch.Tensor):
        self.heads = every_pair(q.shape[0], q.shape[1])
        self.rows = sample_rows(q.shape[2]).to(q.device)
        self.ref = attention_oracle(q, k, v, causal, self.heads, self.rows)
        self.peer = peer_out

    def __call__(self, out: torch.Tensor) -> dict:
        acc = check_accuracy(pick_every(out, self.rows), self.ref,
                             pick_every(self.peer, self.rows))
        return _summary(acc, _max_diff(out, self.peer), self.PEER)
