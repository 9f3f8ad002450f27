"""The correctness gate: a candidate's time counts only if its output passes the accuracy rule.

The rule is the project's (``flashtune.reference.check_accuracy``): max abs error against the
float64 oracle <= 1.1 x the error of torch eager in the same dtype + 2 * eps(dtype) * max|ref|,
with NaN and +-inf exactly where the oracle has them (past the dtype's range: +-inf).
``check_accuracy`` copies everything to the CPU, which costs seconds per check on the large
problems; the gate computes the bound once per problem and checks each candidate on the device
it ran on.
"""

from __future__ import annotations

import torch

from ..reference import oracle_in

FACTOR = 1.1
SLACK_ULPS = 2.0


WRONG = "wrong result"  # how every refusal of Gate.check starts


def _max_abs(t: torch.Tensor) -> float:
    return float(t.abs().max()) if t.numel() else 0.0


class Gate:
    """Holds the float64 oracle and the error bound of one problem."""

    def __init__(self, ref64: torch.Tensor, peer: torch.Tensor, dtype: torch.dtype):
        if ref64.dtype != torch.float64:
            raise TypeError(f"ref64 must be float64, got {ref64.dtype}")
        ref64 = oracle_in(ref64, dtype)  # past the dtype's range: the infinity an output has
        self.ref = ref64
        self.finite = torch.isfinite(ref64)
        self.nan = torch.isnan(ref64)
        self.inf = torch.isinf(ref64)
        peer64 = peer.to(torch.float64)
        both = self.finite & torch.isfinite(peer64)
        self.peer_err = _max_abs(torch.where(both, peer64 - ref64, 0.0))
        scale = _max_abs(torch.where(self.finite, ref64, 0.0))
        self.bound = FACTOR * self.peer_err + SLACK_ULPS * torch.finfo(dtype).eps * scale

    def check(self, out: torch.Tensor) -> str | None:
        """None if ``out`` passes, else why it fails (goes into the failed trial's error)."""
        if out.shape != self.ref.shape:
            return f"{WRONG}: shape {tuple(out.shape)} != {tuple(self.ref.shape)}"
        out64 = out.to(torch.float64)
        if not torch.equal(torch.isnan(out64), self.nan):
            return f"{WRONG}: NaN positions differ from the float64 reference"
        if not torch.equal(torch.isinf(out64), self.inf) or not torch.equal(out64[self.inf], self.ref[self.inf]):
            return f"{WRONG}: infinite values differ from the float64 reference"
        err = _max_abs(torch.where(self.finite, out64 - self.ref, 0.0))
        if err > self.bound:
            return (f"{WRONG}: max abs error {err:.3g} > bound {self.bound:.3g} "
                    f"(torch eager error {self.peer_err:.3g})")
        return None
