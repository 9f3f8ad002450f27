"""What the public ops read, on every call, to tell a plain eager inference call (which may
launch a kernel directly, or a stored plan) from one that must go through the registered
``torch.ops.flashtune.*`` op: each is a cheap attribute read or C call."""

from __future__ import annotations

import torch
import torch.autograd.forward_ad as _forward_ad

is_compiling = torch.compiler.is_compiling
grad_enabled = torch.is_grad_enabled
# Number of active torch dispatch modes (FakeTensorMode, FlopCounterMode, ...).
dispatch_modes = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)
# True inside torch.func.vmap / grad / jacrev / functionalize (about 60 ns per call).
functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)
# Not None while torch.jit.trace records: a direct kernel launch would be missing from the trace
# (its output frozen as a constant).
jit_tracing = getattr(torch._C, "_get_tracing_state", lambda: None)
# True while torch.autocast is on for any device type (about 80 ns per call).
autocast_active = getattr(torch._C, "_is_any_autocast_enabled", lambda: True)
# torch.fx.symbolic_trace's stand-in for a tensor (see fx_node).
Proxy = torch.fx.Proxy


def has_dual(*tensors: torch.Tensor) -> bool:
    """Whether any of ``tensors`` carries a forward-mode AD tangent (inside a dual level): a
    custom op has no forward-AD formula, and the kernel reads only the primal."""
    return _forward_ad._current_level >= 0 and any(
        _forward_ad.unpack_dual(t).tangent is not None for t in tensors)


def fx_node(fn, *args):
    """The torch.fx.symbolic_trace graph node of a call ``fn(*args)`` (some args are Proxies):
    the traced module calls ``fn`` with real values, so its checks and dispatch run then. A
    Proxy has no shape, dtype or memory to check or launch on.

    Made here, not by torch.fx.wrap(fn): the trace patches only functions registered before it
    began, and flashtune's ops are imported on their first access (``import flashtune`` before
    ``import torch``), which may come inside the trace. The unpatched ``fn``, called with a
    Proxy, then came back here through the op and called itself until RecursionError."""
    proxy = next(arg for arg in args if isinstance(arg, Proxy))
    return proxy.tracer.create_proxy("call_function", fn, args, {})


def single_vmap() -> bool:
    """While functorch_active(): whether the only transform is one torch.func.vmap (traceable
    by torch.compile, unlike the tensors' wrapper types). torch.ops.flashtune.* have vmap
    rules, but their autograd fails inside grad, jacrev, jvp (pytorch#168393): any other
    transform below or above the vmap needs torch's op."""
    from torch._C._functorch import TransformType
    from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

    top = retrieve_current_functorch_interpreter()
    return top.key() == TransformType.Vmap and top.level() == 1
