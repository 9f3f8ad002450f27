"""Softmax and log-softmax on arbitrary tensors through one chosen variant.

The kernels work on a 2-D (rows, cols) view with unit column stride and reduce along the last
axis. Everything else is handled here, in Python:
- ``dim`` other than the last: the axis is moved last; if that leaves a non-unit column stride
  the input is copied to a contiguous buffer first (one extra read and write). The result has
  the input's shape (a view with the axis moved back, not necessarily contiguous).
- 0-d tensors are treated as one row of one element (softmax 1, log_softmax 0, as torch).
- Empty tensors return an empty result of the same shape without a launch.
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Callable, Mapping

import torch

from . import loader
from .softmax_space import OPS, SoftmaxProblem, default_config, problem_misfit
from .space import ConfigError
from .variants import run_variant

SUPPORTED_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}

ConfigChooser = Callable[[str, SoftmaxProblem, torch.device], Mapping[str, Any]]


class DimError(ValueError, IndexError):
    """``dim`` is out of range (an IndexError too, as in torch)."""


def check_tensor(name: str, t: Any) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_nested:  # a strided nested tensor has layout torch.strided but no sizes or strides
        raise TypeError(f"{name} is a nested tensor; flashtune takes strided (dense) tensors")
    if t.layout != torch.strided:
        raise TypeError(f"{name} has layout {t.layout}; flashtune takes strided (dense) tensors")
    if t.dtype not in SUPPORTED_DTYPES:
        expected = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise TypeError(f"{name} has dtype {t.dtype}; flashtune softmax supports {expected}")


def _as_index(dim: Any) -> int:
    """``dim`` as a Python int, accepting what torch.softmax accepts: ints, numpy integers and
    0-d integer tensors; bools, floats and other tensors are TypeErrors (as in torch)."""
    if type(dim) is int:
        return dim
    value = dim
    np = sys.modules.get("numpy")  # not loaded: the caller has no numpy values
    if np is not None and isinstance(dim, np.ndarray):
        if not torch.compiler.is_compiling():
            # A 0-d integer ndarray has __index__, but torch's dim refuses every ndarray.
            raise TypeError(f"dim must be an int, got {type(dim).__name__}")
        # torch.compile sees a numpy integer made inside the compiled code (np.int64(-1))
        # as a 0-d ndarray over a traced tensor, whose __index__ it cannot trace (a graph
        # break); as a tensor, int() of it reads the traced constant (as torch.softmax's
        # own dim does).
        value = torch.as_tensor(dim)
    if isinstance(value, torch.Tensor):
        if value.dim() == 0 and not value.is_floating_point() and not value.is_complex() \
                and value.dtype is not torch.bool:
            return int(value)
    elif not isinstance(value, (bool, float)):
        try:
            return operator.index(value)  # numpy integers and other __index__ types
        except TypeError:
            pass
    raise TypeError(f"dim must be an int, got {type(dim).__name__}")


def normalize_dim(dim: Any, ndim: int) -> int:
    dim = _as_index(dim)
    rank = max(ndim, 1)  # a 0-d tensor accepts dim 0 and -1, as in torch
    if not -rank <= dim < rank:
        raise DimError(f"dim={dim} is out of range for a tensor of {ndim} dimension(s) "
                       f"(expected -{rank} <= dim < {rank})")
    return dim % rank


def kernel_device_ok(t: torch.Tensor) -> bool:
    """Our kernels run on CUDA tensors, or on CPU tensors under TRITON_INTERPRET=1."""
    return t.is_cuda or (t.device.type == "cpu" and loader.interpreter_mode())


def _require_kernel_device(name: str, t: torch.Tensor) -> None:
    if not kernel_device_ok(t):
        raise ValueError(
            f"{name} is on {t.device}; flashtune kernels need a CUDA tensor "
            "(or a CPU tensor with TRITON_INTERPRET=1)"
        )


def _as_rows(t: torch.Tensor, dim: int) -> torch.Tensor:
    """(rows, cols) view with unit column stride, the reduced axis last (copies only if needed)."""
    if t.dim() == 0:
        return t.reshape(1, 1)
    moved = t.movedim(dim, -1)
    if moved.stride(-1) != 1:
        moved = moved.contiguous()
    return moved.reshape(-1, moved.shape[-1])


def _from_rows(rows: torch.Tensor, like: torch.Tensor, dim: int) -> torch.Tensor:
    if like.dim() == 0:
        return rows.reshape(())
    moved_shape = like.movedim(dim, -1).shape
    return rows.reshape(moved_shape).movedim(-1, dim)


def _config_for(op: str, problem: SoftmaxProblem, device: torch.device,
                config: Mapping[str, Any] | None, choose: ConfigChooser | None):
    spec = OPS[op]
    if config is None:
        config = choose(op, problem, device) if choose else default_config(op, problem)
    config = spec.space.validate(config)
    misfit = problem_misfit(config, problem)
    if misfit:
        raise ConfigError(f"{op}: {misfit}")
    return config


def softmax_forward(x: torch.Tensor, dim: int = -1, *, log: bool = False,
                    config: Mapping[str, Any] | None = None,
                    choose: ConfigChooser | None = None) -> torch.Tensor:
    """softmax (or log_softmax) of ``x`` along ``dim`` with one variant of our kernels."""
    check_tensor("x", x)
    dim = normalize_dim(dim, x.dim())
    if x.numel() == 0:
        return torch.empty_like(x)
    _require_kernel_device("x", x)
    op = "log_softmax" if log else "softmax"
    x2 = _as_rows(x, dim)
    problem = SoftmaxProblem(x2.shape[0], x2.shape[1], SUPPORTED_DTYPES[x.dtype])
    cfg = _config_for(op, problem, x.device, config, choose)
    y2 = torch.empty(x2.shape, dtype=x.dtype, device=x.device)
    run_variant(op, cfg, x2, y2)
    return _from_rows(y2, x, dim)


def softmax_backward(y: torch.Tensor, dy: torch.Tensor, dim: int = -1, *, log: bool = False,
                     config: Mapping[str, Any] | None = None,
                     choose: ConfigChooser | None = None) -> torch.Tensor:
    """dx of softmax (or log_softmax) from its output ``y`` and the incoming gradient ``dy``."""
    check_tensor("y", y)
    check_tensor("dy", dy)
    if y.device != dy.device:
        raise ValueError(f"y and dy must be on one device, got y on {y.device} and dy on {dy.device}")
    if y.shape != dy.shape:
        raise ValueError(f"y and dy must have one shape, got {tuple(y.shape)} and {tuple(dy.shape)}")
    if y.dtype != dy.dtype:
        raise TypeError(f"y and dy must have one dtype, got {y.dtype} and {dy.dtype}")
    dim = normalize_dim(dim, y.dim())
    if y.numel() == 0:
        return torch.empty_like(dy)
    _require_kernel_device("y", y)
    op = "log_softmax_backward" if log else "softmax_backward"
    y2 = _as_rows(y, dim)
    dy2 = _as_rows(dy, dim)
    problem = SoftmaxProblem(y2.shape[0], y2.shape[1], SUPPORTED_DTYPES[y.dtype])
    cfg = _config_for(op, problem, y.device, config, choose)
    dx2 = torch.empty(y2.shape, dtype=y.dtype, device=y.device)
    run_variant(op, cfg, y2, dy2, dx2)
    return _from_rows(dx2, y, dim)
