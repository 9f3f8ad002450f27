"""``torch.ops.flashtune.*``: the ops registered with torch.library (imported lazily).

- ``flashtune::softmax(Tensor x, int dim)``, ``flashtune::log_softmax(Tensor x, int dim)``
- ``flashtune::softmax_backward(Tensor y, Tensor dy, int dim)`` and
  ``flashtune::log_softmax_backward(...)``: dx from the forward output and its gradient.

Each has a fake (meta) implementation, so torch.compile (fullgraph) and torch.export trace them
as single graph nodes, and the forward ops have autograd formulas built on the backward ops.
The backward ops are differentiable too (double backward, in plain torch ops: it is rare and
not worth kernels).

Host cost: calling a torch.library custom op costs about 9 us more than calling the Python
function behind it (torch 2.13, measured on this project's CPU box), as much as the whole call
budget, and far more while autograd records it (flashtune.dispatch.eager_autograd). So
``flashtune.softmax`` only goes through these ops when it must: under torch.compile or export
tracing, under torch.jit.trace, for tensor subclasses, while a dispatch mode is active, and for
double backward. Plain inference calls launch the kernel directly, and eager autograd runs the
same plans through a plain autograd.Function (see flashtune.ops).
"""

from __future__ import annotations

import sys

import torch
import torch.autograd.forward_ad as _forward_ad
from torch import Tensor

from ..gen.softmax_ops import normalize_dim
from .call_state import has_dual
from .eager_autograd import forward_ad_backward
from .plans import output_like
from .runtime import RUNTIME, check_backward_pair, check_dtype
from .vmap_dims import batch_first


def _refuse_forward_ad(name: str, *tensors: Tensor) -> None:
    """A dual (forward-AD) input: a custom op has no forward-AD formula, and torch drops the
    tangent without a word when no input requires grad (the kernel reads only the primal).
    Below the autograd key the tangent is still visible, so refuse it here, as
    torch.ops.flashtune.attention_fwd does. flashtune.softmax / log_softmax and their
    autograd give forward-mode AD to torch's ops and never get here with a dual."""
    if has_dual(*tensors):
        raise NotImplementedError(
            f"torch.ops.flashtune.{name} has no forward-mode AD formula (its tangent would be "
            "lost); call flashtune.softmax / flashtune.log_softmax (which compute forward-mode "
            "AD with torch's op) or torch's op")


def _fwd(log: bool):
    def impl(x: Tensor, dim: int) -> Tensor:
        check_dtype("x", x)
        _refuse_forward_ad("log_softmax" if log else "softmax", x)
        return RUNTIME.forward(x, normalize_dim(dim, x.dim()), log)

    def fake(x: Tensor, dim: int) -> Tensor:
        check_dtype("x", x)
        return output_like(x, normalize_dim(dim, x.dim()))
    return impl, fake


def _bwd(log: bool):
    def impl(y: Tensor, dy: Tensor, dim: int) -> Tensor:
        check_dtype("y", y)
        _refuse_forward_ad("log_softmax_backward" if log else "softmax_backward", y, dy)
        return RUNTIME.backward(y, dy, dim, log)

    def fake(y: Tensor, dy: Tensor, dim: int) -> Tensor:
        check_backward_pair(y, dy)
        return output_like(y, normalize_dim(dim, y.dim()))
    return impl, fake


softmax = torch.library.custom_op("flashtune::softmax", _fwd(False)[0], mutates_args=(),
                                  schema="(Tensor x, int dim) -> Tensor")
log_softmax = torch.library.custom_op("flashtune::log_softmax", _fwd(True)[0], mutates_args=(),
                                      schema="(Tensor x, int dim) -> Tensor")
softmax_backward = torch.library.custom_op(
    "flashtune::softmax_backward", _bwd(False)[0], mutates_args=(),
    schema="(Tensor y, Tensor dy, int dim) -> Tensor")
log_softmax_backward = torch.library.custom_op(
    "flashtune::log_softmax_backward", _bwd(True)[0], mutates_args=(),
    schema="(Tensor y, Tensor dy, int dim) -> Tensor")

softmax.register_fake(_fwd(False)[1])
log_softmax.register_fake(_fwd(True)[1])
softmax_backward.register_fake(_bwd(False)[1])
log_softmax_backward.register_fake(_bwd(True)[1])


# -- autograd ---------------------------------------------------------------------------------
def _save_output(ctx, inputs, output) -> None:
    ctx.dim = normalize_dim(inputs[-1], output.dim())
    ctx.save_for_backward(output)


def _input_gradient(y: Tensor, grad: Tensor, dim: int, log: bool) -> Tensor:
    """dx from y and the output's gradient: our backward op, or, inside a forward-AD dual level
    (a dual gradient), torch's (the op has no forward-AD formula; see eager_autograd)."""
    if _forward_ad._current_level >= 0:
        return forward_ad_backward(y, grad, dim, log)
    op = torch.ops.flashtune.log_softmax_backward if log else torch.ops.flashtune.softmax_backward
    return op(y, grad, dim)


def _grad(log: bool):
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return _input_gradient(y, grad, ctx.dim, log), None

    return backward


softmax.register_autograd(_grad(False), setup_context=_save_output)
log_softmax.register_autograd(_grad(True), setup_context=_save_output)


def _save_inputs(ctx, inputs, output) -> None:
    y, dy, dim = inputs
    ctx.dim = normalize_dim(dim, y.dim())
    ctx.save_for_backward(y, dy)


def _softmax_backward_grad(ctx, g):
    # dx = y * (dy - s), s = sum(y * dy). d/d(dy) is the same map applied to g;
    # d/dy = g * (dy - s) - dy * sum(g * y).
    y, dy = ctx.saved_tensors
    d = ctx.dim
    s = (y * dy).sum(d, keepdim=True)
    g_dy = _input_gradient(y, g, d, False)
    g_y = g * (dy - s) - dy * (g * y).sum(d, keepdim=True)
    return g_y, g_dy, None


def _log_softmax_backward_grad(ctx, g):
    # dx = dy - p * S with p = exp(y), S = sum(dy). d/d(dy) = g - sum(g * p); d/dy = -g * p * S.
    y, dy = ctx.saved_tensors
    d = ctx.dim
    p = y.exp()
    g_dy = g - (g * p).sum(d, keepdim=True)
    g_y = -g * p * dy.sum(d, keepdim=True)
    return g_y, g_dy, None


softmax_backward.register_autograd(_softmax_backward_grad, setup_context=_save_inputs)
log_softmax_backward.register_autograd(_log_softmax_backward_grad, setup_context=_save_inputs)


# -- vmap -------------------------------------------------------------------------------------
# Without a batching rule torch runs the op once per batch element (with a warning). The batch
# dim is just another row dimension to our kernels: move it first and shift ``dim`` past it.
def _physical_dim(dim: int, logical_ndim: int) -> int:
    return normalize_dim(dim, logical_ndim) + 1


def _fwd_vmap(op):
    def rule(info, in_dims, x, dim):
        if in_dims[0] is None:
            return op(x, dim), None
        x = x.movedim(in_dims[0], 0)
        if x.dim() == 1:  # a 0-d logical tensor: one row of one element per batch entry
            return op(x.unsqueeze(1), 1).squeeze(1), 0
        return op(x, _physical_dim(dim, x.dim() - 1)), 0
    return rule


def _bwd_vmap(op):
    def rule(info, in_dims, y, dy, dim):
        if in_dims[0] is None and in_dims[1] is None:
            return op(y, dy, dim), None
        y = batch_first(y, in_dims[0], info.batch_size)
        dy = batch_first(dy, in_dims[1], info.batch_size)
        if y.dim() == 1:
            return op(y.unsqueeze(1), dy.unsqueeze(1), 1).squeeze(1), 0
        return op(y, dy, _physical_dim(dim, y.dim() - 1)), 0
    return rule


if hasattr(softmax, "register_vmap"):  # torch >= 2.4
    softmax.register_vmap(_fwd_vmap(softmax))
    log_softmax.register_vmap(_fwd_vmap(log_softmax))
    softmax_backward.register_vmap(_bwd_vmap(softmax_backward))
    log_softmax_backward.register_vmap(_bwd_vmap(log_softmax_backward))


# -- DTensor ----------------------------------------------------------------------------------
# DTensor (torch.distributed.tensor, tensor parallelism) runs a custom op on its local shards
# only with a sharding strategy registered for it; without one, flashtune.softmax of a DTensor
# raised NotImplementedError where torch.softmax works. Softmax rows are independent: any
# dim but the reduced one may stay sharded (DTensor replicates a reduced dim that is sharded).
# Registered on the first subclass call that finds torch.distributed.tensor imported (a
# DTensor user has imported it): importing it at flashtune's import would cost ~0.4 s.
_dtensor_sharding = False


def _placements(t, dim, n_tensors: int):
    from torch.distributed.tensor import Replicate, Shard

    d = normalize_dim(dim, t.ndim)
    shardings = [([Replicate()], [Replicate()] * n_tensors + [None])]
    shardings += [([Shard(s)], [Shard(s)] * n_tensors + [None]) for s in range(t.ndim) if s != d]
    return shardings


@torch.compiler.assume_constant_result
def register_dtensor_sharding() -> bool:
    """Give DTensor a sharding strategy for our four ops, once, if DTensor is in use.

    Also called while torch.compile traces (the first flashtune call on a DTensor may be a
    compiled one): dynamo cannot trace the registration, but a function marked
    assume_constant_result it runs as plain Python at trace time, with no graph break, and
    bakes the returned bool into the graph (unused there)."""
    global _dtensor_sharding
    if _dtensor_sharding or "torch.distributed.tensor" not in sys.modules:
        return _dtensor_sharding
    try:
        from torch.distributed.tensor.experimental import register_sharding  # torch >= 2.5
    except ImportError:
        return False
    for op in (softmax, log_softmax):
        register_sharding(op._opoverload)(lambda x, dim: _placements(x, dim, 1))
    for op in (softmax_backward, log_softmax_backward):
        register_sharding(op._opoverload)(lambda y, dy, dim: _placements(y, dim, 2))
    _dtensor_sharding = True
    return True
