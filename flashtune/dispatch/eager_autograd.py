"""Eager autograd for ``flashtune.softmax`` / ``log_softmax``, without the torch.library op.

A call of a torch.library custom op costs tens of microseconds of host time, and more while
autograd records it: on an H100 host (torch 2.11, fourteenth session) the forward + backward of
a 64 x 128 fp16 softmax took 785 us per step through the registered ops, against 123 us for
torch.softmax, so training small and medium problems got slower, not faster. A plain
``torch.autograd.Function`` runs the same plans (flashtune.dispatch.runtime) with the engine's
own bookkeeping only.

The registered ops (flashtune.dispatch.library) stay for what needs them: torch.compile and
export tracing, torch.jit.trace, tensor subclasses and dispatch modes (flashtune.ops routes
those there), double backward (with create_graph the backward calls the registered backward
op, which has its own autograd formula) and compiled autograd (dynamo traces the backward).
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad

from .call_state import functorch_active, is_compiling
from .plans import aten_backward
from .runtime import RUNTIME

# torch.autograd.grad(is_grads_batched=True) and jacobian/hessian(vectorize=True) batch the
# gradient with torch's legacy vmap, which functorch_active() does not see.
_legacy_batched = getattr(torch._C._functorch, "is_legacy_batchedtensor", lambda t: False)


class SoftmaxFunction(torch.autograd.Function):
    """softmax (log=False) or log_softmax (log=True) of x along dim (normalized)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
        y = RUNTIME.forward(x, dim, log)
        ctx.save_for_backward(y)  # the backward needs only the output (background.md)
        ctx.dim = dim
        ctx.log = log
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (y,) = ctx.saved_tensors
        if _forward_ad._current_level >= 0:
            return forward_ad_backward(y, grad, ctx.dim, ctx.log), None, None
        if (torch.is_grad_enabled() or type(grad) is not torch.Tensor or functorch_active()
                or _legacy_batched(grad) or is_compiling()):
            # create_graph (double backward), a gradient of a tensor subclass, batched
            # gradients (torch.autograd.grad(is_grads_batched=True), jacobian/hessian with
            # vectorize=True run this backward under vmap: the gradient is a storage-less
            # wrapper no kernel can read), or compiled autograd (dynamo traces this backward
            # with fake tensors: a direct launch would trace into the launcher and fail): the
            # registered op has the autograd formula, the dispatch rules, the vmap rule and
            # the fake implementation for all four.
            from . import library

            op = library.log_softmax_backward if ctx.log else library.softmax_backward
            return op(y, grad, ctx.dim), None, None
        return RUNTIME.backward(y, grad, ctx.dim, ctx.log), None, None


def forward_ad_backward(y: torch.Tensor, grad: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    """dx by torch's own backward op, for a backward run inside a forward-AD dual level.

    Forward-over-reverse (torch.autograd.grad(y, x, dual_gradient) in a dual_level) hands the
    backward a dual gradient. Our kernel reads only its primal, so dx lost the tangent without
    a word, and the registered backward op has no forward-AD formula either (torch raises
    about a custom Function's jvp). torch's backward op has both a forward-AD formula and a
    double backward; its result is the same dx. (The public ops give forward AD to torch too.)"""
    return aten_backward(log)(grad.to(y.dtype), y, dim, y.dtype)
