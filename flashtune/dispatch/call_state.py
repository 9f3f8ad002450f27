"""What the public ops read, on every call, to tell a plain eager inference call (which may
launch a kernel directly, or a stored plan) from one that must go through the registered
``torch.ops.flashtune.*`` op: each is a cheap attribute read or C call."""

from __future__ import annotations

import torch

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
