"""Public ops: ``softmax`` and ``log_softmax`` with the tuned kernel for this device and shape.

What runs where:
- CUDA tensors of float16, bfloat16 and float32: our Triton kernels, with the config the
  dispatcher picks (tuned exact bucket, else nearest tuned bucket that fits, else the heuristic
  default; see flashtune.dispatch).
- CPU tensors: torch.softmax / torch.log_softmax, unless TRITON_INTERPRET=1, in which case our
  kernels run in Triton's interpreter (how CI exercises the dispatcher).
- float64 (any device): computed by torch; our kernels keep fp32 statistics, which would
  silently lose the precision a float64 user asked for.
- Integer, bool and complex dtypes: TypeError naming the dtype, unless ``dtype=`` names a
  floating dtype: as in torch.softmax, the input is then cast to ``dtype`` before the op (and
  the result has that dtype).
- FLASHTUNE_DISABLE=1: the plain torch ops, nothing else.

The first call with a new (shape, strides, dtype, device, dim) picks a config and binds the
variant's launch function into a plan; later calls look the plan up in a dict and launch it. On
CUDA the plan's kernels skip Triton's per-call argument dispatch once compiled
(flashtune.dispatch.fast_launch; FLASHTUNE_FAST_LAUNCH=0 turns that off).
Inference calls bypass the torch.library op (see flashtune.dispatch.library for why), and so
do eager calls that autograd records: they run the same plans through a plain
torch.autograd.Function (flashtune.dispatch.eager_autograd). Calls that need torch.compile or
torch.jit.trace tracing, tensor subclasses or dispatch modes go through
``torch.ops.flashtune.softmax`` / ``log_softmax``, as does double backward. A tensor subclass
that refuses that op (one that knows only aten ops), or a dispatch mode that does, gets
torch's op (_refusable_call).
Under torch.func transforms (vmap, grad, jacrev, functionalize, ...; jvp and jacfwd are forward
AD, below) the call is torch's own op: functorch's wrapped tensors have no storage a kernel can
read, and torch's op has every transform rule.
"""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad

from .dispatch import library as _library  # noqa: F401 - registers torch.ops.flashtune.* on first use
from .dispatch.call_state import dispatch_modes as _dispatch_modes
from .dispatch.eager_autograd import SoftmaxFunction as _SoftmaxFunction
from .dispatch.call_state import functorch_active as _functorch_active
from .dispatch.call_state import fx_node as _fx_node
from .dispatch.call_state import Proxy as _Proxy
from .dispatch.call_state import grad_enabled as _grad_enabled
from .dispatch.call_state import is_compiling as _is_compiling
from .dispatch.call_state import jit_tracing as _jit_tracing
from .dispatch.call_state import single_vmap as _single_vmap
from .dispatch.runtime import ACCEPTED_DTYPES as _ACCEPTED_DTYPES
from .dispatch.runtime import RUNTIME as _R
from .dispatch.runtime import NOT_A_PLAN_FAILURE as _NOT_A_PLAN_FAILURE
from .dispatch.runtime import plan_failed as _plan_failed
from .dispatch.runtime import check_dtype as _check_dtype
from .gen.notices import DispatchWarning as _DispatchWarning
from .once import warn_once as _warn_once
from .gen.softmax_ops import normalize_dim as _normalize_dim

__all__ = ["softmax", "log_softmax"]

_Tensor = torch.Tensor
# nn.Parameter disables __torch_function__: a plain tensor to us, not a subclass for the op.
_Parameter = torch.nn.Parameter
_dtype = torch.dtype
# _jit_tracing: _call sends traced calls through the registered op. No plan key would match
# while tracing (x.shape holds traced 0-d tensors, hashed by identity), but the hot path must
# not read x.shape then: the tracer records it and names x's value after _plan_key's local
# variable. torch.jit.trace's check traces again under no_grad, where only that run reached
# the hot path, and its graph then differed from the trace's (TracingCheckError).
_SOFTMAX_PLANS = _R.plans["softmax"]  # cleared in place by flashtune.dispatch.reset()
_LOG_SOFTMAX_PLANS = _R.plans["log_softmax"]


class _NoInput:
    """``input``'s default: unlike None, a value no caller passes, so softmax(None, x=t) is
    told from softmax(x=t) (torch rejects the None)."""

    def __repr__(self) -> str:
        return "<required>"


_NO_INPUT = _NoInput()


class _NoX:
    """``x``'s default: unlike None, a value no caller passes, so a fourth positional argument
    (softmax(t, -1, None, None)) is told from ``x`` left out and refused, as torch.softmax
    refuses it; ``x`` itself stays positional-capable for speed (see the comment below)."""

    def __repr__(self) -> str:
        return "<not given>"


_NO_X = _NoX()


# The signature is torch.softmax's, (input, dim, dtype=None), with dim defaulting to the last
# axis. ``x``: the first argument's former name, which torch.softmax also accepts (its
# numpy-style alias of ``input``), still taken by keyword. Hence ``input`` has a default: a call
# that names only ``x`` leaves ``input`` unset (_NO_INPUT); that is no tensor, so such a call
# misses the hot path and _call sorts the arguments out. ``x is _NO_X`` on the hot path: a call
# that gives both must not launch ``input``'s plan and ignore ``x`` (_call refuses it), and a
# fourth positional argument, None included, lands in ``x`` and is refused there. ``x``
# is not keyword-only: CPython (3.11+) does not specialize calls of functions with
# keyword-only parameters, about 20 ns more per call on the CPU box (the positional one and
# the check cost about 3 ns).
def softmax(input: torch.Tensor = _NO_INPUT, dim: int = -1,
            dtype: torch.dtype | None = None, x: torch.Tensor = _NO_X) -> torch.Tensor:
    """Softmax of ``input`` along ``dim`` (like torch.softmax) with the tuned kernel.

    ``dtype``: as in torch.softmax, ``input`` is cast to it before the op (a floating dtype).
    ``x``: the former name of ``input`` (pass it by keyword)."""
    plan = _hot_plan(_SOFTMAX_PLANS, input, dim, dtype)
    if plan is not None and x is _NO_X:
        try:
            return plan(input)
        except _NOT_A_PLAN_FAILURE:
            raise  # the device full, a notice under -W error (runtime.NOT_A_PLAN_FAILURE)
        except Exception:  # noqa: BLE001 - the full path decides afresh (runtime.plan_failed)
            _plan_failed(_SOFTMAX_PLANS, _plan_key(input, dim))
    return _call(input, dim, False, dtype, x)


def log_softmax(input: torch.Tensor = _NO_INPUT, dim: int = -1,
                dtype: torch.dtype | None = None, x: torch.Tensor = _NO_X) -> torch.Tensor:
    """Log-softmax of ``input`` along ``dim`` (like torch.log_softmax) with the tuned kernel.

    ``dtype``: as in torch.log_softmax, ``input`` is cast to it before the op (a floating
    dtype). ``x``: the former name of ``input`` (pass it by keyword)."""
    plan = _hot_plan(_LOG_SOFTMAX_PLANS, input, dim, dtype)
    if plan is not None and x is _NO_X:
        try:
            return plan(input)
        except _NOT_A_PLAN_FAILURE:
            raise  # the device full, a notice under -W error (runtime.NOT_A_PLAN_FAILURE)
        except Exception:  # noqa: BLE001 - the full path decides afresh (runtime.plan_failed)
            _plan_failed(_LOG_SOFTMAX_PLANS, _plan_key(input, dim))
    return _call(input, dim, True, dtype, x)


def _hot_plan(plans, x, dim, dtype):
    """The plan cached for exactly this call, or None (then _call runs the full checks).

    Hot path: every check is a plain attribute read; a plan exists only for inputs that already
    passed the full checks of _call with this exact layout. A negative-bit view and a
    storage-less zero tensor (torch._efficientzerotensor, data_ptr() 0) have a plain tensor's
    plan key but not its memory: they take _call."""
    if (dtype is None and not _is_compiling() and (type(x) is _Tensor or type(x) is _Parameter)
            and not x.is_neg() and not x._is_zerotensor()
            and not (x.requires_grad and _grad_enabled()) and not _dispatch_modes()
            and _forward_ad._current_level < 0 and type(dim) is int and not _functorch_active()
            and _jit_tracing() is None):
        try:
            key = _plan_key(x, dim)
        except RuntimeError:
            # Sparse compressed (CSR/CSC/BSR/BSC) and nested tensors have no strides (nested:
            # no sizes either); _call rejects them with a TypeError naming the layout. The try
            # is free on the hot path from Python 3.11 (zero-cost exceptions), a few ns before.
            return None
        return plans.get(key)
    return None


def _plan_key(x, dim):
    """What a softmax plan is stored under (with RUNTIME.forward's keys, dim as given)."""
    return (x.shape, x.stride(), x.dtype, x.device, dim)


def _input_argument(input, x, log: bool):
    """The input tensor of a call that named it ``x`` (the former keyword) or gave none."""
    name = "log_softmax" if log else "softmax"
    if x is not _NO_X and input is not _NO_INPUT:
        # softmax(t, x=u), softmax(None, x=t), or a fourth positional argument (which fills
        # ``x``; Python cannot tell the two apart): torch.softmax refuses both.
        raise TypeError(f"{name}() takes at most 3 positional arguments (input, dim, dtype) "
                        "and the input once; got a fourth argument, or the input twice: as "
                        "'input' and as 'x' (the former name of 'input'); pass it once")
    if x is None or x is _NO_X:
        # softmax(), softmax(None) or softmax(x=None) (one message for all)
        raise TypeError(f"{name}() missing required argument 'input': a torch.Tensor, got "
                        "none (or None)")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    return x


# torch's argument parser takes Python's scalar types as dtypes (torch.softmax(x, -1, float)
# is float64, whatever the default dtype); exactly these types, not numpy's.
_PYTHON_DTYPES = {float: torch.float64, int: torch.int64, bool: torch.bool,
                  complex: torch.complex128}


def _cast(x, dtype):
    """torch.softmax's ``dtype=``: cast the input first (autograd sees the cast)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"input must be a torch.Tensor, got {type(x).__name__}")
    if type(dtype) is type:
        dtype = _PYTHON_DTYPES.get(dtype, dtype)
    if not isinstance(dtype, _dtype):
        raise TypeError(f"dtype must be a torch.dtype or None, got {type(dtype).__name__}")
    if dtype not in _ACCEPTED_DTYPES:  # e.g. an integer or a float8 dtype
        raise TypeError(f"dtype={dtype} is not supported; flashtune softmax and log_softmax "
                        "compute in float16, bfloat16, float32 (float64 by torch)")
    return x.to(dtype)


def _call(x, dim, log: bool, dtype=None, x_keyword=_NO_X) -> torch.Tensor:
    if x is None or x is _NO_INPUT or x_keyword is not _NO_X:
        # Called as softmax(x=t) (the former keyword), or with no input: once sorted out, the
        # call goes round again, so x= callers reach the stored plans too.
        x = _input_argument(x, x_keyword, log)
        return (log_softmax if log else softmax)(x, dim, dtype)
    if isinstance(x, _Proxy):
        return _fx_node(_softmax_node, x, dim, dtype, log)
    if dtype is not None:
        x = _cast(x, dtype)
    if _R.disabled:
        return (torch.log_softmax if log else torch.softmax)(x, dim)
    _check_dtype("input", x)
    if not _is_compiling() and x.is_neg():
        # A negative-bit view (torch._neg_view) holds -x in memory: the kernels read memory.
        # (Traced calls go through the op, whose dispatch resolves it; dynamo cannot trace
        # is_neg.)
        x = x.resolve_neg()
    d = _normalize_dim(dim, x.dim())
    if _forward_ad._current_level >= 0 or (
            _functorch_active() and not (_is_compiling() and _single_vmap())):
        # Forward-mode AD is on (torch.func.jvp too): our ops have no forward-AD formula, and a
        # dual tensor looks like a plain one to the kernel (its tangent would be dropped).
        # Other torch.func transforms wrap tensors in storage-less wrappers our kernels cannot
        # read and that the custom op's autograd does not support. torch computes both.
        # Under torch.compile, a lone vmap keeps our kernels (the op's vmap rule); inside
        # torch.func.grad or jacrev the traced op would fail (see call_state.single_vmap).
        return (torch.log_softmax if log else torch.softmax)(x, d)
    if (_is_compiling() or (type(x) is not _Tensor and type(x) is not _Parameter)
            or _dispatch_modes()
            or _jit_tracing() is not None):
        _library.register_dtensor_sharding()  # a DTensor input needs it (library.py)
        op = torch.ops.flashtune.log_softmax if log else torch.ops.flashtune.softmax
        # (is_compiling first: dynamo cannot trace the dispatch-mode count)
        if (type(x) is _Tensor or type(x) is _Parameter) and (
                _is_compiling() or _jit_tracing() is not None or not _dispatch_modes()):
            return op(x, d)
        return _refusable_call(op, x, d, log)
    if x.requires_grad and _grad_enabled():
        # Eager autograd: a plain autograd.Function, not the registered op (its host cost,
        # see flashtune.dispatch.eager_autograd).
        return _SoftmaxFunction.apply(x, d, log)
    # The plan is stored under the caller's spelling of dim too (e.g. -1), for the hot path.
    return _R.forward(x, d, log, alias_dim=dim if type(dim) is int else None)


def _softmax_node(x, dim, dtype, log: bool) -> torch.Tensor:
    """What a torch.fx.symbolic_trace graph records for a softmax call (see fx_node): the
    traced module calls flashtune.softmax / log_softmax here with real values, so it runs as
    the model does (torch.func transforms, forward AD, subclasses and dispatch modes included:
    a node of torch.ops.flashtune.* failed under torch.func.grad). dim may be a Proxy too
    (z.dim() - 1)."""
    return (log_softmax if log else softmax)(x, dim, dtype)


def _refusable_call(op, x, d: int, log: bool) -> torch.Tensor:
    """A call on a tensor subclass, or under a torch dispatch mode: our op, which the
    subclass's __torch_dispatch__ (or __torch_function__) or the mode sees, else torch's op.

    A subclass that unwraps any op (DTensor with its sharding strategy, a plain wrapper) runs
    our kernel on its inner tensors, and a mode that passes any op on (FakeTensorMode, through
    our fake kernel; FlopCounterMode) runs it too. One that knows only aten ops refuses ours:
    torch raises a TypeError when every handler returned NotImplemented
    (torch.masked.MaskedTensor), or the subclass or mode raises NotImplementedError itself.
    torch.softmax works there, so ours gives torch's result, and says so once per subclass or
    mode and op (after torch's op ran: where torch's op fails too, its error is what the caller
    gets, with no word about a fallback). Not cached per type: a subclass may refuse some calls
    only (DTensor, for a placement its strategy lacks), and a refusal comes before any kernel.
    Under torch.compile, dynamo traces a traceable subclass (DTensor) through the op, and
    graph-breaks on another, which then runs this eagerly; a refusal while tracing cannot be
    caught (dynamo's error, fullgraph or not: README)."""
    try:
        return op(x, d)
    except (TypeError, NotImplementedError) as err:
        refusal = err
    out = (torch.log_softmax if log else torch.softmax)(x, d)
    plain = type(x) is _Tensor or type(x) is _Parameter
    who = type(_current_dispatch_mode()) if plain else type(x)
    name = "log_softmax" if log else "softmax"
    # The first line: torch's NotImplemented message goes on with a list of types.
    reason = str(refusal).strip().split("\n")[0].rstrip(":") or type(refusal).__name__
    kind = "torch dispatch mode" if plain else "tensor subclass"
    _warn_once(("refused", who, name), _DispatchWarning,
               f"flashtune.{name}: {kind} {who.__module__}.{who.__qualname__} does not support "
               f"flashtune's op ({reason}); torch.{name} computes it instead")
    return out


def _current_dispatch_mode():
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return _get_current_dispatch_mode()
