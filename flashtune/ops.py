"""Public ops: ``softmax`` and ``log_softmax`` with the tuned kernel for this device and shape.

What runs where:
- CUDA tensors of float16, bfloat16 and float32: our Triton kernels, with the config the
  dispatcher picks (tuned exact bucket, else nearest tuned bucket that fits, else the heuristic
  default; see flashtune.dispatch).
- CPU tensors: torch.softmax / torch.log_softmax, unless TRITON_INTERPRET=1, in which case our
  kernels run in Triton's interpreter (how CI exercises the dispatcher).
- float64 (any device): computed by torch; our kernels keep fp32 statistics, which would
  silently lose the precision a float64 user asked for.
- Integer, bool and complex dtypes: TypeError naming the dtype (torch.softmax would accept
  integers only with an explicit ``dtype=``; we do not guess one).
- FLASHTUNE_DISABLE=1: the plain torch ops, nothing else.

The first call with a new (shape, strides, dtype, device, dim) picks a config and binds the
variant's launch function into a plan; later calls look the plan up in a dict and launch it. On
CUDA the plan's kernels skip Triton's per-call argument dispatch once compiled
(flashtune.dispatch.fast_launch; FLASHTUNE_FAST_LAUNCH=0 turns that off).
Inference calls bypass the torch.library op (see flashtune.dispatch.library for why); calls
that need autograd, torch.compile tracing, tensor subclasses or dispatch modes go through
``torch.ops.flashtune.softmax`` / ``log_softmax``. vmap is not supported.
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad

from .dispatch import library as _library  # noqa: F401 - registers torch.ops.flashtune.* on first use
from .dispatch.runtime import RUNTIME as _R
from .dispatch.runtime import check_dtype as _check_dtype
from .gen.softmax_ops import normalize_dim as _normalize_dim

__all__ = ["softmax", "log_softmax"]

_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
_SOFTMAX_PLANS = _R.plans["softmax"]  # cleared in place by flashtune.dispatch.reset()
_LOG_SOFTMAX_PLANS = _R.plans["log_softmax"]


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of ``x`` along ``dim`` (like torch.softmax) with the tuned kernel."""
    # Hot path: every check below is a plain attribute read; a plan exists only for inputs
    # that already passed the full checks of _call with this exact layout.
    if (not _is_compiling() and type(x) is _Tensor and not (x.requires_grad and _grad_enabled())
            and not _dispatch_modes() and _forward_ad._current_level < 0 and type(dim) is int):
        plan = _SOFTMAX_PLANS.get((x.shape, x.stride(), x.dtype, x.device, dim))
        if plan is not None:
            return plan(x)
    return _call(x, dim, False)


def log_softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Log-softmax of ``x`` along ``dim`` (like torch.log_softmax) with the tuned kernel."""
    if (not _is_compiling() and type(x) is _Tensor and not (x.requires_grad and _grad_enabled())
            and not _dispatch_modes() and _forward_ad._current_level < 0 and type(dim) is int):
        plan = _LOG_SOFTMAX_PLANS.get((x.shape, x.stride(), x.dtype, x.device, dim))
        if plan is not None:
            return plan(x)
    return _call(x, dim, True)


def _call(x, dim, log: bool) -> torch.Tensor:
    if _R.disabled:
        return (torch.log_softmax if log else torch.softmax)(x, dim)
    if _forward_ad._current_level >= 0:
        # Forward-mode AD is on: our ops have no forward-AD formula, and a dual tensor looks
        # like a plain one to the kernel (its tangent would be dropped). torch computes both.
        _check_dtype("x", x)
        return (torch.log_softmax if log else torch.softmax)(x, _normalize_dim(dim, x.dim()))
    _check_dtype("x", x)
    d = _normalize_dim(dim, x.dim())
    if (_is_compiling() or type(x) is not _Tensor or (x.requires_grad and _grad_enabled())
            or _dispatch_modes()):
        op = torch.ops.flashtune.log_softmax if log else torch.ops.flashtune.softmax
        return op(x, d)
    return _R.forward(x, d, log, alias_dim=dim)
