"""Pre-bound launch plans: what one call does once its problem has been seen.

A plan is a small closure with the chosen variant's ``launch`` function bound in, so a repeated
call does no rendering, hashing, validation or database work: one dict lookup, one output
allocation, one launch. Plans are keyed by everything that changes what the closure does:
shape, strides, dtype, device index and dim (finer than the decision key, which has no
strides; several plan keys share one decision).

The output layout of every path is ``output_like(x, dim)`` (the reduced axis' rows contiguous),
which is also what the fake (meta) implementation of the registered ops returns.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..gen.softmax_ops import SUPPORTED_DTYPES, _as_rows, _from_rows
from ..gen.softmax_space import SoftmaxProblem
from ..gen.variants import load_variant

Plan = Callable[..., torch.Tensor]
MAX_PLANS = 4096  # per op; a workload with ever-new shapes must not grow memory without bound

_aten = torch.ops.aten


def output_like(t: torch.Tensor, dim: int) -> torch.Tensor:
    """An uninitialized result with the layout the kernels produce (dim normalized)."""
    if t.dim() == 0:
        return torch.empty((), dtype=t.dtype, device=t.device)
    moved = t.movedim(dim, -1).shape
    return torch.empty(moved, dtype=t.dtype, device=t.device).movedim(-1, dim)


def _into_layout(result: torch.Tensor, like: torch.Tensor, dim: int) -> torch.Tensor:
    out = output_like(like, dim)
    if out.stride() == result.stride():
        return result
    return out.copy_(result)


def kernel_ok(t: torch.Tensor, interpreter: bool) -> bool:
    """Can our kernels compute this tensor? Otherwise torch does (see flashtune.ops)."""
    if t.dtype not in SUPPORTED_DTYPES:
        return False
    return t.is_cuda or (interpreter and t.device.type == "cpu")


def torch_forward(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    y = (torch.log_softmax if log else torch.softmax)(x, dim)
    return _into_layout(y, x, dim)


def torch_backward(y: torch.Tensor, dy: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    fn = _aten._log_softmax_backward_data if log else _aten._softmax_backward_data
    return _into_layout(fn(dy, y, dim, y.dtype), y, dim)


def _device_guard(plan: Plan, index: int) -> Plan:
    """Triton launches on the *current* device: make it the tensor's (multi-GPU hosts only)."""
    def run(*tensors):
        if torch.cuda.current_device() == index:
            return plan(*tensors)
        with torch.cuda.device(index):
            return plan(*tensors)
    return run


def problem_of(t: torch.Tensor, dim: int) -> SoftmaxProblem:
    """The (rows, cols, dtype) problem the kernels see for ``t`` reduced along ``dim``."""
    cols = t.shape[dim] if t.dim() else 1
    rows = t.numel() // cols if cols else 0
    return SoftmaxProblem(rows, cols, SUPPORTED_DTYPES[t.dtype])


def forward_plan(x: torch.Tensor, dim: int, op: str, config) -> Plan:
    """A plan for tensors laid out like ``x`` (dim normalized; numel > 0; kernel_ok)."""
    launch = load_variant(op, config).launch
    if dim == x.dim() - 1 and x.is_contiguous():
        if x.dim() == 2:
            def plan(x):
                y = torch.empty_like(x)
                launch(x, y)
                return y
        else:
            problem = problem_of(x, dim)
            rows, cols = problem.n_rows, problem.n_cols

            def plan(x):
                y = torch.empty_like(x)
                launch(x.view(rows, cols), y.view(rows, cols))
                return y
    else:
        def plan(x):
            x2 = _as_rows(x, dim)
            y2 = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
            launch(x2, y2)
            return _from_rows(y2, x, dim)
    return _guarded(plan, x)


def backward_plan(y: torch.Tensor, dim: int, op: str, config) -> Plan:
    """A plan for (y, dy) pairs laid out like the first ones (dim normalized; numel > 0)."""
    launch = load_variant(op, config).launch

    def plan(y, dy):
        y2 = _as_rows(y, dim)
        dy2 = _as_rows(dy, dim)
        dx2 = torch.empty(y2.shape, dtype=y.dtype, device=y.device)
        launch(y2, dy2, dx2)
        return _from_rows(dx2, y, dim)
    return _guarded(plan, y)


def _guarded(plan: Plan, t: torch.Tensor) -> Plan:
    if t.is_cuda and torch.cuda.device_count() > 1:
        return _device_guard(plan, t.device.index)
    return plan
