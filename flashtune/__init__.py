"""flashtune: auto-tuned Triton softmax and attention kernels.

The public API is deliberately thin and imports its machinery lazily, so ``import flashtune``
costs almost nothing (and never imports optuna).
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["softmax", "log_softmax", "__version__"]


def softmax(x, dim: int = -1):
    """Softmax of ``x`` along ``dim`` with the tuned kernel for this GPU and shape."""
    from .ops import softmax as _softmax

    return _softmax(x, dim)


def log_softmax(x, dim: int = -1):
    """Log-softmax of ``x`` along ``dim`` with the tuned kernel for this GPU and shape."""
    from .ops import log_softmax as _log_softmax

    return _log_softmax(x, dim)
