"""Pre-bound launch plans: what one call does once its problem has been seen.

A plan is a small closure with the chosen variant's ``launch`` function bound in, so a repeated
call does no rendering, hashing, validation or database work: one dict lookup, one output
allocation, one launch. On CUDA the bound launch function is the fast-launch copy
(flashtune.dispatch.fast_launch.accelerate): after a kernel's first launch for an argument
signature, its later launches call Triton's launcher directly. Plans are keyed by everything that changes what the closure does:
shape, strides, dtype, device index and dim (finer than the decision key, which has no
strides; several plan keys share one decision).

The output layout of every path is ``output_like(x, dim)`` (the reduced axis' rows contiguous),
which is also what the fake (meta) implementation of the registered ops returns.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch

from ..gen.softmax_ops import SUPPORTED_DTYPES, _as_rows
from ..gen.softmax_space import SoftmaxProblem
from ..gen.variants import load_variant
from .fast_launch import accelerate

Plan = Callable[..., torch.Tensor]
MAX_PLANS = 4096  # per op; a workload with ever-new shapes must not grow memory without bound

_aten = torch.ops.aten


def output_strides(shape, dim: int) -> tuple:
    """The strides the kernels write: ``dim`` innermost, the other dims outside it in order,
    packed as torch packs a contiguous tensor (a dim of size 0 or 1 counts as size 1)."""
    if not len(shape):
        return ()
    dim %= len(shape)
    strides = [1] * len(shape)
    step = 1
    for d in (dim, *range(len(shape) - 1, dim, -1), *range(dim - 1, -1, -1)):
        strides[d] = step
        step = step * torch.sym_max(shape[d], 1)
    return tuple(strides)


def output_like(t: torch.Tensor, dim: int) -> torch.Tensor:
    """An uninitialized result with the layout the kernels produce (dim normalized).

    Not a view (empty_strided, not a movedim of a buffer): autograd forbids in-place ops on a
    view a custom Function returns, where torch.softmax's result takes them."""
    return torch.empty_strided(t.shape, output_strides(t.shape, dim), dtype=t.dtype,
                               device=t.device)


def _as_output_rows(out: torch.Tensor, dim: int) -> torch.Tensor:
    """The (rows, cols) view of an output_like result the kernels write (a view, never a copy)."""
    if out.dim() == 0:
        return out.view(1, 1)
    return out.movedim(dim, -1).view(-1, out.shape[dim])


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


def aten_backward(log: bool):
    """torch's own backward of softmax (log False) or log_softmax, called (dy, y, dim, dtype):
    what torch.softmax's autograd runs."""
    return _aten._log_softmax_backward_data if log else _aten._softmax_backward_data


def torch_backward(y: torch.Tensor, dy: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    return _into_layout(aten_backward(log)(dy, y, dim, y.dtype), y, dim)


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


def _launcher(op: str, config, t: torch.Tensor, fast: bool):
    """The variant's launch function; on CUDA its kernels skip Triton's per-call dispatch after
    their first launch (see flashtune.dispatch.fast_launch)."""
    launch = load_variant(op, config).launch
    return accelerate(launch) if fast and t.is_cuda else launch


def forward_plan(x: torch.Tensor, dim: int, op: str, config, fast: bool = True) -> Plan:
    """A plan for tensors laid out like ``x`` (dim normalized; numel > 0; kernel_ok).

    ``fast=False``: launch through Triton's normal path (benchmarks compare the two)."""
    launch = _launcher(op, config, x, fast)
    if dim == x.dim() - 1 and x.is_contiguous():
        empty = _empty_like_output(x, dim)
        if x.dim() == 2:
            def plan(x):
                y = empty(x)
                launch(x, y)
                return y
        else:
            problem = problem_of(x, dim)
            rows, cols = problem.n_rows, problem.n_cols

            def plan(x):
                y = empty(x)
                launch(x.view(rows, cols), y.view(rows, cols))
                return y
    else:
        shape, strides = x.shape, output_strides(x.shape, dim)

        def plan(x):
            y = torch.empty_strided(shape, strides, dtype=x.dtype, device=x.device)
            launch(_as_rows(x, dim), _as_output_rows(y, dim))
            return y
    return _guarded(plan, x, launch)


def _empty_like_output(t: torch.Tensor, dim: int):
    """For contiguous ``t`` reduced along its last dim: the cheapest call that allocates a
    result with output_like's strides. empty_like copies the strides of size-1 dims, which
    is_contiguous ignores (e.g. a (4, 1, 8) view with strides (8, 99, 1)). Plans are per stride,
    so this is decided once per plan."""
    if torch.empty_like(t).stride() == output_like(t, dim).stride():
        return torch.empty_like
    return functools.partial(torch.empty_like, memory_format=torch.contiguous_format)


def backward_plan(y: torch.Tensor, dim: int, op: str, config, fast: bool = True,
                  dy: torch.Tensor | None = None) -> Plan:
    """A plan for (y, dy) pairs laid out like the first ones (dim normalized; numel > 0).

    ``dy``: the first gradient (its strides are part of the plan key). When y and dy are both
    contiguous and reduced along their last dim (the usual training case), the plan hands them
    to the kernel as they are: the general path's movedim/reshape views cost about 20 us of
    host time per call on an H200 host (fifteenth session), twice the launch itself."""
    launch = _launcher(op, config, y, fast)
    if dy is not None and dim == y.dim() - 1 and y.is_contiguous() and dy.is_contiguous():
        empty = _empty_like_output(y, dim)
        if y.dim() == 2:
            def plan(y, dy):
                dx = empty(y)
                launch(y, dy, dx)
                return dx
        else:
            problem = problem_of(y, dim)
            rows, cols = problem.n_rows, problem.n_cols

            def plan(y, dy):
                dx = empty(y)
                launch(y.view(rows, cols), dy.view(rows, cols), dx.view(rows, cols))
                return dx
        return _guarded(plan, y, launch)

    shape, strides = y.shape, output_strides(y.shape, dim)

    def plan(y, dy):
        dx = torch.empty_strided(shape, strides, dtype=y.dtype, device=y.device)
        launch(_as_rows(y, dim), _as_rows(dy, dim), _as_output_rows(dx, dim))
        return dx
    return _guarded(plan, y, launch)


def _guarded(plan: Plan, t: torch.Tensor, launch) -> Plan:
    if t.is_cuda and torch.cuda.device_count() > 1:
        plan = _device_guard(plan, t.device.index)
    plan.launch = launch  # what the plan calls (tests check it is the fast one)
    return plan


def attention_plan(q: torch.Tensor, config, scale: float, causal: bool, return_lse: bool,
                   fast: bool = True) -> Plan:
    """A plan for flashtune.attention calls laid out like this one (q, k, v strides, dtypes,
    devices, pointer alignment, causal, scale and return_lse all fixed by the plan key; inputs
    checked and the problem non-empty on the call that made it)."""
    from ..gen.attention_ops import OP

    launch = _launcher(OP, config, q, fast)
    batch, heads, n_q, _ = q.shape
    if return_lse:
        def plan(q, k, v):
            out = torch.empty_like(q)
            lse = torch.empty((batch, heads, n_q), dtype=torch.float32, device=q.device)
            launch(q, k, v, out, lse, scale, causal)
            return out, lse
    else:
        def plan(q, k, v):
            out = torch.empty_like(q)
            launch(q, k, v, out, None, scale, causal)
            return out
    return _guarded(plan, q, launch)
