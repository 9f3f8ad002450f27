"""Flash-attention forward on user tensors through one chosen variant.

Input rules (each broken rule raises a TypeError or ValueError naming the argument):
- q: (B, H, Nq, D); k, v: (B, Hkv, Nk, D); H a multiple of Hkv (grouped-query attention);
  float16 or bfloat16, one dtype and one device for all three; D a multiple of 8 in [8, 256]
  (dims that are not powers of two are padded inside the kernel).
- Any strides: (B, H, N, D) tensors and (B, N, H, D) tensors seen through ``transpose(1, 2)``
  both run without a copy. The output is torch.empty_like(q): q's strides when q is dense,
  else dense in q's dimension order (a slice of packed qkv gives (B, N, H, D) storage).
- Empty problems: B, H or Nq == 0 gives an empty output; Nk == 0 gives zeros (as torch SDPA)
  and LSE -inf, without a launch.
- Strided dense tensors only: sparse and nested tensors are TypeErrors. ``scale`` (a real
  number or, as SDPA takes it, a 0-d real tensor) must be finite in float32 (the kernels
  scale the scores in fp32; a larger one would turn every score to inf).

This module does no autograd: ``flashtune.attention`` (``flashtune.attention_op``) wraps it in
a torch.library op whose backward raises NotImplementedError.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, Callable, Mapping

import torch

from . import loader
from ..once import warn_once
from .notices import DispatchWarning
from .attention_space import (
    HEAD_DIM_MAX,
    HEAD_DIM_STEP,
    HOPPER_FEATURES,
    OPS,
    AttentionProblem,
    default_config,
    head_dim_supported,
    hopper_features,
    problem_misfit,
    triton_features,
)
from .space import Config, ConfigError
from .variants import run_variant

OP = "attention_fwd"
SUPPORTED_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}

_LOG2E = 1.4426950408889634
_FP32_MAX = 3.4028234663852886e38

ConfigChooser = Callable[[str, AttentionProblem, torch.device], Mapping[str, Any]]

def check_inputs(q: Any, k: Any, v: Any) -> None:
    """Raise a TypeError/ValueError naming the argument for any unsupported input."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        # Checked first: a sparse or nested tensor fails on .shape/.stride() with an internal error.
        if t.is_nested or t.layout != torch.strided:
            raise TypeError(f"{name} must be a dense strided tensor, got "
                            f"{'a nested tensor' if t.is_nested else f'layout {t.layout}'}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"{name} must be 4-D (batch, heads, seq_len, head_dim), "
                             f"got shape {tuple(t.shape)}")
        if t.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{name} has dtype {t.dtype}; flashtune attention supports "
                            "torch.float16 and torch.bfloat16")
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but q has {q.dtype}; all must match")
        if t.device != q.device:
            raise ValueError(f"{name} is on {t.device} but q is on {q.device}; all must match")
    bq, hq, _, dq = q.shape
    for name, t in (("k", k), ("v", v)):
        if t.shape[0] != bq:
            raise ValueError(f"{name} has batch {t.shape[0]} but q has batch {bq}")
        if t.shape[3] != dq:
            raise ValueError(f"{name} has head dim {t.shape[3]} but q has head dim {dq}")
    if v.shape[1] != k.shape[1]:
        raise ValueError(f"v has {v.shape[1]} heads but k has {k.shape[1]}")
    if v.shape[2] != k.shape[2]:
        raise ValueError(f"v has sequence length {v.shape[2]} but k has {k.shape[2]}")
    hkv = k.shape[1]
    if hkv == 0 and hq != 0 or hkv != 0 and hq % hkv != 0:
        raise ValueError(f"q has {hq} heads, not a multiple of the {hkv} heads of k and v")
    if not head_dim_supported(dq):
        raise ValueError(f"head dim {dq} (last dim of q) is not supported: use a multiple of "
                         f"{HEAD_DIM_STEP} between {HEAD_DIM_STEP} and {HEAD_DIM_MAX}")


def _type_name(value: Any) -> str:
    """``bool``, but ``numpy.bool`` for numpy's (whose bare name is "bool" too), as torch says."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


# What a bad scale's TypeError says it expected (a real number, or a 0-d tensor as SDPA takes).
_SCALE_EXPECTED = "scale must be a real number, a 0-d tensor or None"


def _tensor_scale(scale: torch.Tensor) -> float:
    """A 0-d real tensor ``scale`` as a float, as SDPA takes it (float() of its value)."""
    if scale.dim() != 0:
        raise TypeError(f"{_SCALE_EXPECTED}, got a {scale.dim()}-d tensor")
    if scale.dtype is torch.bool or scale.is_complex():  # as a bool / complex scale is refused
        raise TypeError(f"{_SCALE_EXPECTED}, got a 0-d {scale.dtype} tensor")
    if scale.is_meta:  # no value to read: float() would raise torch's RuntimeError, unnamed
        raise TypeError(f"{_SCALE_EXPECTED}, got a 0-d meta tensor, which holds no value "
                        "(pass the scale as a float)")
    if scale.requires_grad:  # its gradient would be lost (SDPA refuses it too)
        raise TypeError(f"{_SCALE_EXPECTED}, got a 0-d tensor that requires grad (attention "
                        "has no backward)")
    return float(scale)


def check_flags(causal: Any, scale: Any, return_lse: Any, head_dim: int) -> float:
    """Validate the scalar arguments; return the softmax scale (default 1/sqrt(head_dim))."""
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be a bool, got {_type_name(causal)}")
    if not isinstance(return_lse, bool):
        raise TypeError(f"return_lse must be a bool, got {_type_name(return_lse)}")
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    if isinstance(scale, torch.Tensor):
        scale = _tensor_scale(scale)  # its value; then the float scale's checks below
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{_SCALE_EXPECTED}, got {_type_name(scale)}")
    try:
        scale = float(scale)
    except OverflowError:  # e.g. an int or Fraction beyond the float range
        raise ValueError(f"scale must be finite, got a {type(scale).__name__} too large for "
                         "a float") from None
    # Comparisons, not math.isfinite: under torch.compile a scale argument can be a symbolic
    # float, which dynamo can guard on but not pass to math.isfinite (a graph break).
    if scale != scale or abs(scale) == math.inf:
        raise ValueError(f"scale must be finite, got {scale}")
    # The kernels take scale * log2(e) as an fp32 argument: past this it is inf and all scores
    # become inf/NaN, whatever the inputs.
    if abs(scale) * _LOG2E > _FP32_MAX:
        raise ValueError(f"scale must be finite in float32 (|scale| <= {_FP32_MAX / _LOG2E:.3g}), "
                         f"got {scale}")
    return scale


def check_launchable(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Raise ValueError for valid inputs that no variant can run (device, index range)."""
    if not (q.is_cuda or (q.device.type == "cpu" and loader.interpreter_mode())):
        raise ValueError(f"q is on {q.device}; flashtune kernels need CUDA tensors "
                         "(or CPU tensors with TRITON_INTERPRET=1)")
    # The output's layout, without allocating it: q's strides when q is dense, else a dense
    # layout of q's shape, which a q whose rows repeat (expand along N) does not bound.
    out = torch.empty_like(q, device="meta")
    for name, t in (("q", q), ("k", k), ("v", v), ("output", out)):
        # Kernels add 32-bit offsets inside one head to a 64-bit head base pointer.
        if (t.shape[2] - 1) * t.stride(2) + (t.shape[3] - 1) * t.stride(3) >= 2**31:
            raise ValueError(f"{name}: offsets inside one head pass 2**31 elements "
                             f"(shape {tuple(t.shape)}, strides {t.stride()}); not supported")


def problem_of(q: torch.Tensor, k: torch.Tensor, causal: bool) -> AttentionProblem:
    return AttentionProblem(batch=q.shape[0], heads=q.shape[1], kv_heads=k.shape[1],
                            nq=q.shape[2], nk=k.shape[2], head_dim=q.shape[3],
                            causal=bool(causal), dtype=SUPPORTED_DTYPES[q.dtype])


def device_features(device: torch.device) -> frozenset[str]:
    """Hopper tunables usable for tensors on ``device``.

    The interpreter runs descriptor loads and ignores warp specialization, so there every
    feature the installed Triton knows is allowed (that is how the tests cover those paths).
    """
    if device.type == "cpu" and loader.interpreter_mode():
        return triton_features()
    return _cuda_features(device.type, device.index)


@functools.lru_cache(maxsize=None)
def _cuda_features(device_type: str, index: int | None) -> frozenset[str]:
    return hopper_features(torch.device(device_type, index) if index is not None else device_type)


@functools.lru_cache(maxsize=1024)
def _default(problem: AttentionProblem) -> Config:
    return default_config(OP, problem)


def tma_misfit(*tensors: torch.Tensor) -> str | None:
    """Why tensor descriptors cannot address these tensors, or None: TMA needs a unit last
    stride, 16-byte aligned other strides and a 16-byte aligned base address. The kernels'
    descriptors are 2-D per head, (N, D) with strides (stride(-2), 1): rows that repeat or
    overlap (a stride of 0 from expand along N, or less than D from as_strided) are no
    tensor a descriptor can describe, so those go through pointer loads too."""
    for t in tensors:
        size = t.element_size()
        if t.stride(-1) != 1:
            return "the last dim is not contiguous"
        if t.shape[-2] > 1 and t.stride(-2) < t.shape[-1]:
            return f"rows overlap (row stride {t.stride(-2)} < head dim {t.shape[-1]})"
        if any((s * size) % 16 for s in t.stride()[:-1]):
            return f"strides {tuple(t.stride())} are not multiples of 16 bytes"
        if t.data_ptr() % 16:
            return "a base address is not 16-byte aligned"
    return None


def _without_hopper(config: Config) -> Config:
    raw = config.as_dict()
    raw.update({name: False for name in HOPPER_FEATURES})
    return OPS[OP].space.validate(raw)


def select_config(problem: AttentionProblem, tensors: tuple[torch.Tensor, ...],
                  config: Mapping[str, Any] | None, choose: ConfigChooser | None) -> Config:
    """The config to run. An explicit ``config`` that cannot run raises ConfigError; a chosen
    one (``choose`` hook or heuristic) that cannot run falls back, with a warning once."""
    space = OPS[OP].space
    device = tensors[0].device
    explicit = config is not None
    if explicit:
        cfg = space.validate(config)
    elif choose is not None:
        cfg = space.validate(choose(OP, problem, device))
    else:
        cfg = _default(problem)
    misfit = problem_misfit(cfg, problem)
    missing = [n for n in HOPPER_FEATURES if cfg[n] and n not in device_features(device)]
    if missing:
        misfit = misfit or f"{'/'.join(missing)} not supported on {device} with this Triton"
    if not misfit and cfg["tma"]:
        reason = tma_misfit(*tensors)
        if reason:
            misfit = f"tma: {reason}"
    if misfit is None:
        return cfg
    if explicit:
        raise ConfigError(f"{OP}: {misfit}")
    fallback = _without_hopper(cfg)
    if problem_misfit(fallback, problem) is not None:
        fallback = default_config(OP, problem)
    # Once per config: the misfit text can name the call's strides, which vary with the layout.
    # The dispatcher's category (README): users let these fallback notices through by it where
    # warnings are errors; a plain RuntimeWarning raised there, and the dispatcher then
    # rejected the whole config for the device, calls it could serve included.
    warn_once(("attention config cannot run", str(cfg)), DispatchWarning,
              f"flashtune attention: chosen config cannot run ({misfit}); using {fallback} "
              "instead")
    return fallback


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                      scale: float | None = None, return_lse: bool = False, *,
                      config: Mapping[str, Any] | None = None,
                      choose: ConfigChooser | None = None):
    """softmax(scale * q k^T [causal, bottom-right]) v -> out, or (out, lse) with return_lse.

    lse: (B, H, Nq) float32, natural log; -inf for rows that see no key (their out is 0), +inf
    for rows with a +inf score (their out is NaN).
    """
    check_inputs(q, k, v)
    scale = check_flags(causal, scale, return_lse, q.shape[3])
    batch, heads, n_q, _ = q.shape
    n_k = k.shape[2]
    # Before the empty answer too: CPU tensors outside the interpreter are refused whatever
    # their size (an empty batch must not pass where the next call would not); and before
    # allocating an output it would refuse.
    check_launchable(q, k, v)
    if q.numel() == 0 or n_k == 0:
        out = torch.zeros_like(q)
        if not return_lse:
            return out
        return out, torch.full((batch, heads, n_q), float("-inf"), dtype=torch.float32,
                               device=q.device)
    out = torch.empty_like(q)
    # The kernel writes lse only when asked: no buffer otherwise (the plans do the same).
    lse = (torch.empty((batch, heads, n_q), dtype=torch.float32, device=q.device)
           if return_lse else None)
    problem = problem_of(q, k, causal)
    cfg = select_config(problem, (q, k, v, out), config, choose)
    if q.is_cuda:
        with torch.cuda.device(q.device):
            run_variant(OP, cfg, q, k, v, out, lse, scale, causal)
    else:
        run_variant(OP, cfg, q, k, v, out, lse, scale, causal)
    return (out, lse) if return_lse else out
