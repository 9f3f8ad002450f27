"""``flashtune.attention``: the public flash-attention forward, registered with torch.library.

The op ``flashtune::attention_fwd`` has a fake (meta) implementation, so torch.compile can trace
through it, and an autograd formula whose backward op raises NotImplementedError when it runs:
a backward through it fails loudly instead of producing a wrong (or silently missing) gradient,
while a compiled forward on inputs that require grad still runs (AOTAutograd traces the backward
through the op's fake implementation). torch.func gradient transforms raise it at the call.
Forward-mode AD (``torch.autograd.forward_ad``, ``torch.func.jvp``) would silently drop or zero
the tangent (custom ops have no forward-AD formula), so dual inputs raise NotImplementedError too.

Which kernel variant runs is decided by a chooser hook: by default the dispatcher's
(``flashtune.dispatch.attention.choose``: the tuned winner of this device, exact bucket, else
nearest fitting bucket, else the heuristic ``attention_space.default_config``; a tuned config
that fails to launch falls back to the default with one warning). ``set_config_chooser(fn)``
with ``fn(op, problem, device) -> config mapping`` replaces it; ``set_config_chooser(None)``
restores the dispatcher.
"""

# No "from __future__ import annotations": torch.library.custom_op reads real annotations.

from typing import Optional

import torch
import torch.autograd.forward_ad as _forward_ad

from .dispatch import attention as _dispatch
from .dispatch.call_state import autocast_active as _autocast_active
from .dispatch.call_state import dispatch_modes as _dispatch_modes
from .dispatch.call_state import functorch_active as _functorch_active
from .dispatch.call_state import fx_node as _fx_node
from .dispatch.call_state import has_dual as _has_dual
from .dispatch.call_state import Proxy as _Proxy
from .dispatch.call_state import grad_enabled as _grad_enabled
from .dispatch.call_state import is_compiling as _is_compiling
from .dispatch.call_state import jit_tracing as _jit_tracing
from .dispatch.runtime import RUNTIME as _R
from .dispatch.vmap_dims import batch_first as _batch_first
from .gen import attention_ops

_Tensor = torch.Tensor
_strided = torch.strided
# Plans of repeated inference calls (see _plan_key); cleared in place by flashtune.dispatch.reset().
_PLANS = _R.attention_plans

# What flashtune.attention passes to attention_forward (flashtune.bench reads it too).
_chooser: attention_ops.ConfigChooser = _dispatch.choose


def set_config_chooser(chooser: Optional[attention_ops.ConfigChooser]) -> None:
    """Install ``chooser(op, problem, device) -> config`` (None: back to the dispatcher)."""
    global _chooser
    if chooser is not None and not callable(chooser):
        raise TypeError(f"chooser must be callable or None, got {type(chooser).__name__}")
    # One assignment, atomic as it is (no lock: one would have to be remade after fork).
    _chooser = chooser if chooser is not None else _dispatch.choose


@torch.library.custom_op("flashtune::attention_fwd", mutates_args=())
def attention_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
                  return_lse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse); lse is an empty tensor when return_lse is False."""
    # Below the autograd key a forward_ad dual tensor still carries its tangent: refuse it
    # here too, for callers of torch.ops.flashtune.attention_fwd.
    _refuse_forward_ad(q, k, v)
    chooser = _chooser
    if chooser is _dispatch.choose:
        result = _dispatch.forward(q, k, v, causal, scale, return_lse)
    else:
        result = attention_ops.attention_forward(q, k, v, causal, scale, return_lse, choose=chooser)
    if return_lse:
        return result
    return result, q.new_empty((0,), dtype=torch.float32)


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, return_lse):
    attention_ops.check_inputs(q, k, v)
    # The real kernel refuses a non-finite scale: a traced graph must fail where eager does.
    attention_ops.check_flags(causal, scale, return_lse, q.shape[3])
    lse_shape = tuple(q.shape[:3]) if return_lse else (0,)
    return torch.empty_like(q), q.new_empty(lse_shape, dtype=torch.float32)


_NO_BACKWARD = ("flashtune.attention has no backward yet (forward only); for training use "
                "torch.nn.functional.scaled_dot_product_attention")


@torch.library.custom_op("flashtune::attention_no_backward", mutates_args=())
def _no_backward(grad_out: torch.Tensor, q_shape: list[int],
                 kv_shape: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The backward of attention_fwd: raises when it runs, never returns a gradient."""
    raise NotImplementedError(_NO_BACKWARD)


@_no_backward.register_fake
def _no_backward_fake(grad_out, q_shape, kv_shape):
    # Shapes only: torch.compile traces the backward graph as soon as an input requires grad
    # (before any backward is asked for); raising there would fail a forward that works eagerly.
    return (grad_out.new_empty(q_shape), grad_out.new_empty(kv_shape),
            grad_out.new_empty(kv_shape))


def _setup_context(ctx, inputs, output):
    ctx.q_shape, ctx.kv_shape = list(inputs[0].shape), list(inputs[1].shape)


def _backward(ctx, grad_out, grad_lse):
    if grad_out is None:
        raise NotImplementedError(_NO_BACKWARD)
    return (*torch.ops.flashtune.attention_no_backward(grad_out, ctx.q_shape, ctx.kv_shape),
            None, None, None)


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


# -- vmap --------------------------------------------------------------------------------------
# Without a batching rule torch runs the op once per batch entry (and warns). The vmapped dim
# is one more batch dim to the kernel: fold it into B, run once, unfold the results.
def _attention_fwd_vmap(info, in_dims, q, k, v, causal, scale, return_lse):
    size = info.batch_size
    q, k, v = (_batch_first(t, d, size) for t, d in zip((q, k, v), in_dims[:3]))
    batch = q.shape[1]
    # reshape, not view: an expanded (shared) k or v is copied here, once per entry
    out, lse = torch.ops.flashtune.attention_fwd(
        q.reshape(size * batch, *q.shape[2:]), k.reshape(size * batch, *k.shape[2:]),
        v.reshape(size * batch, *v.shape[2:]), causal, scale, return_lse)
    out = out.unflatten(0, (size, batch))
    if not return_lse:  # the placeholder (0,) tensor is not batched
        return (out, lse), (0, None)
    return (out, lse.unflatten(0, (size, batch))), (0, 0)


if hasattr(attention_fwd, "register_vmap"):  # torch >= 2.4
    attention_fwd.register_vmap(_attention_fwd_vmap)


def _refuse_forward_ad(*tensors: torch.Tensor) -> None:
    if _has_dual(*tensors):
        raise NotImplementedError(
            "flashtune.attention has no forward-mode AD formula (its tangent would be lost); "
            "use torch.nn.functional.scaled_dot_product_attention under forward_ad / torch.func.jvp"
        )


def _functorch_grad_tracked(t: torch.Tensor) -> bool:
    """Is ``t`` differentiated by a torch.func transform (grad, vjp, jacrev), under any vmap?"""
    from torch._C import _functorch as _ft  # private: only reached under a torch.func transform

    while True:
        if _ft.is_gradtrackingtensor(t):
            if t.requires_grad:
                return True
        elif not _ft.is_batchedtensor(t):
            return False
        t = _ft.get_unwrapped(t)


def _refuse_functorch_grad(*tensors: torch.Tensor) -> None:
    # A custom op's autograd does not run under torch.func transforms: torch would raise a
    # RuntimeError about autograd.Function.setup_context, which names nothing of ours.
    if _grad_enabled() and any(_functorch_grad_tracked(t) for t in tensors):
        raise NotImplementedError(
            _NO_BACKWARD + " (torch.func.grad / vjp / jacrev included)")


def _attention_node(q, k, v, causal, scale, return_lse):
    """What a torch.fx.symbolic_trace graph records for an attention call (see fx_node): the
    traced module calls flashtune.attention here with real tensors, and so runs its checks,
    autocast and dispatch then (scale's default, 1/sqrt(D), needs the real head dim)."""
    return attention(q, k, v, causal, scale, return_lse)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              scale: Optional[float] = None, return_lse: bool = False):
    """Flash-attention forward: softmax(scale * q k^T [causal]) v.

    q: (B, H, Nq, D); k, v: (B, Hkv, Nk, D) with H a multiple of Hkv (grouped-query / multi-
    query attention: query head h uses k/v head h // (H // Hkv)); 4-D only, no implicit batch.
    float16 or bfloat16, one dtype and one device for all three (another dtype: TypeError,
    no silent cast; another device: ValueError). Under ``torch.autocast`` for their device
    type, floating inputs other than float64 are first cast to the autocast dtype, as SDPA does
    (so fp32 q/k/v run in that dtype, and the output has it). D a multiple of 8 in [8, 256]
    (else ValueError). Any strides, including
    (B, N, H, D) tensors viewed with ``transpose(1, 2)``, stride-0 ``expand`` views and slices.
    ``scale`` (a real number, or a 0-d real tensor as SDPA takes it; finite in float32)
    defaults to 1/sqrt(D); scores are computed in float32, in log2 units in the exp2 configs
    (the default): a finite score q.k x scale beyond float32's max / log2(e), about 2.36e38
    in magnitude, overflows there, and its row comes back NaN (lse +inf) where SDPA's is
    finite. NaN/inf inputs propagate as in torch SDPA's math path to every query that sees
    the key (a key scoring -inf just drops out). One difference: torch's math path also
    spreads a NaN in k or v to queries for which that key is causally masked (a masked NaN
    score stays NaN; 0 * NaN); here a NaN in k reaches only the queries that see its key
    (as SDPA's CPU flash path), and one in v at most the queries of the same tile besides.

    ``causal`` is bottom-right aligned when Nq != Nk (key c is masked for query r when
    c > r + Nk - Nq, as ``torch.nn.attention.bias.causal_lower_right``). This differs from
    SDPA's ``is_causal=True``, which is top-left aligned; both agree when Nq == Nk. A query
    row that sees no key (causal with Nq > Nk, or every score -inf) gets output 0 and lse -inf;
    a row with a +inf score (an inf input) gets output NaN, as in SDPA, and lse +inf (NaN if
    it also has a NaN score). Nk == 0 gives zeros; B, H or Nq == 0 gives an empty output.

    Returns out (q's dtype and shape; q's memory layout when q is dense), or (out, lse) with
    lse (B, H, Nq) float32 in natural-log units.

    Forward only: a backward through the result, torch.func.grad / vjp / jacrev, or forward-
    mode AD (dual inputs) raises NotImplementedError rather than give a wrong or missing
    gradient. torch.compile (fullgraph=True) traces it as the custom op
    ``torch.ops.flashtune.attention_fwd``.
    """
    if _autocast_active():
        q, k, v = _autocast_inputs(q, k, v)
    key = _plan_key(q, k, v, causal, scale, return_lse)
    if key is not None:
        plan = _PLANS.get(key)
        if plan is not None:
            return plan(q, k, v)
    if isinstance(q, _Proxy) or isinstance(k, _Proxy) or isinstance(v, _Proxy):
        return _fx_node(_attention_node, q, k, v, causal, scale, return_lse)
    attention_ops.check_inputs(q, k, v)
    _refuse_forward_ad(q, k, v)
    if _functorch_active():
        _refuse_functorch_grad(q, k, v)
    scale_f = attention_ops.check_flags(causal, scale, return_lse, q.shape[3])
    if key is None:
        out, lse = torch.ops.flashtune.attention_fwd(q, k, v, causal, scale_f, return_lse)
        return (out, lse) if return_lse else out
    ran = []
    generation = _R.generation
    result = _dispatch.forward(q, k, v, causal, scale_f, return_lse, ran)
    out = result[0] if return_lse else result
    _dispatch.remember_plan(_PLANS, key, q, k, v, out, causal, scale_f, return_lse,
                            ran[-1] if ran else None, generation)
    return result


def _autocast_inputs(q, k, v):
    """q, k, v as SDPA sees them under torch.autocast: floating tensors other than float64 on
    q's device type are cast to that device type's autocast dtype (autocast does not cast
    float64). Anything else is left for check_inputs to judge."""
    if not isinstance(q, torch.Tensor):
        return q, k, v
    device_type = q.device.type
    # A device type autocast does not know (meta: shape inference) is never cast, and
    # torch.is_autocast_enabled raises a RuntimeError for it.
    if not (torch.amp.is_autocast_available(device_type)
            and torch.is_autocast_enabled(device_type)):
        return q, k, v
    dtype = torch.get_autocast_dtype(device_type)
    # Inputs already in the autocast dtype (the usual case: layers autocast ran made them) make
    # no .to call: a no-op one costs about 1 us of host time.
    if (q.dtype is dtype and getattr(k, "dtype", None) is dtype
            and getattr(v, "dtype", None) is dtype):
        return q, k, v
    return tuple(t.to(dtype) if (isinstance(t, torch.Tensor) and t.device.type == device_type
                                 and t.is_floating_point() and t.dtype is not torch.float64)
                 else t for t in (q, k, v))


def _plan_key(q, k, v, causal, scale, return_lse):
    """The plan key of a call that may skip the torch.library op, or None.

    Plain inference calls (no autograd, torch.compile, jit tracing, dispatch modes, torch.func
    transforms or forward AD; plain tensors; the dispatcher's chooser) run the kernel directly:
    the op's dispatch costs more host time than a small problem's kernel, and a repeated call
    then finds a plan (config and fast launch bound in: no checks, no dispatcher). The key
    holds everything the checks and the config choice read: shapes, strides, dtypes, devices,
    each base pointer's offset from a 16-byte boundary (TMA needs aligned ones), the flags.
    """
    # not _is_compiling() first: dynamo cannot trace is_neg() (and traced calls take the op).
    if (not _is_compiling()
            and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
            and q.layout is _strided and k.layout is _strided and v.layout is _strided
            and not (q.is_nested or k.is_nested or v.is_nested)
            and (q.is_cuda or q.is_cpu)  # meta (shape inference) takes the op's fake kernel
            # a negative-bit view's memory holds -x: the op's Negative fallback resolves it
            and not (q.is_neg() or k.is_neg() or v.is_neg())
            # a storage-less zero tensor (torch._efficientzerotensor) has data_ptr() 0, which
            # the launcher passes on as a valid pointer: the op's ZeroTensor fallback fills it
            and not (q._is_zerotensor() or k._is_zerotensor() or v._is_zerotensor())
            and type(causal) is bool and type(return_lse) is bool
            # int as well: scale=1 is as common as 1.0 (equal values share a plan, rightly)
            and (scale is None or type(scale) is float or type(scale) is int)
            and _chooser is _dispatch.choose
            and not _dispatch_modes()
            and not (_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))
            and _forward_ad._current_level < 0 and not _functorch_active()
            and _jit_tracing() is None):
        return (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(),
                q.dtype, k.dtype, v.dtype, q.device, k.device, v.device,
                q.data_ptr() % 16, k.data_ptr() % 16, v.data_ptr() % 16,
                causal, scale, return_lse)
    return None
