"""Shared by the vmap rules of torch.ops.flashtune.* (softmax ops and attention)."""

from __future__ import annotations

import torch


def batch_first(t: torch.Tensor, bdim: int | None, size: int) -> torch.Tensor:
    """``t`` with its vmap batch dim first; an unbatched ``t`` (bdim None), shared by every
    vmap entry, is expanded to one copy per entry (a view)."""
    if bdim is None:
        return t.unsqueeze(0).expand(size, *t.shape)
    return t.movedim(bdim, 0)
