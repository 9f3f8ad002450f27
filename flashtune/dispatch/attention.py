"""``flashtune.attention`` through the dispatcher: the chooser hook and its safety net.

``choose`` is the hook ``flashtune.attention_op`` installs by default (``choose`` argument of
``flashtune.gen.attention_ops.attention_forward``): the live dispatcher's pick (exact tuned
bucket, else the nearest tuned bucket with the same head dim and causal flag whose config fits,
else the heuristic default), memoized per problem, so after the first call of a problem no
database work happens. It reads ``RUNTIME.dispatcher`` on each call, so
``flashtune.dispatch.reset()`` takes effect without re-installing the hook.

``forward`` runs a problem with that hook; a tuned config that fails to load or launch here
(a tampered database, a compiler that rejects it) must not break the caller: the decision is
replaced by the default config, with one warning, and the call is repeated.

``FLASHTUNE_DISABLE=1``: no database, the heuristic default config (there is no plain torch
path with the same (out, lse) contract, so attention keeps running our kernel).
"""

from __future__ import annotations

import functools

import torch

from ..gen import attention_ops
from ..gen.attention_space import (HEAD_DIM_MAX, HEAD_DIM_STEP, AttentionProblem, default_config,
                                   head_dim_supported)
from ..gen.space import Config
from .chooser import resolve_device
from .plans import attention_plan
from .runtime import NOT_A_PLAN_FAILURE, RUNTIME

OP = attention_ops.OP


@functools.lru_cache(maxsize=1024)
def _heuristic(problem: AttentionProblem) -> Config:
    return default_config(OP, problem)


def choose(op: str, problem: AttentionProblem, device: torch.device) -> Config:
    """The config hook of attention_forward: the dispatcher's pick for this device."""
    if RUNTIME.disabled:
        return _heuristic(problem)
    return RUNTIME.dispatcher.choose(op, problem, device)


def choice(problem: AttentionProblem, device=None):
    """The dispatcher's ``Choice`` (config, how, buckets) for an attention problem."""
    if not isinstance(problem, AttentionProblem):
        raise TypeError(f"problem must be an AttentionProblem, got {type(problem).__name__}")
    _check_problem(problem)
    return RUNTIME.dispatcher.choice(OP, problem, resolve_device(device, RUNTIME.settings.interpreter))


def _check_problem(p: AttentionProblem) -> None:
    """A problem a flashtune.attention call launches a kernel for, as dispatch.choice checks
    a softmax shape: the dataclass itself takes anything, and the dispatcher would otherwise
    answer a "default" config for one no call can have (head dim 7, float32, ...)."""
    for name in ("batch", "heads", "kv_heads", "nq", "nk"):
        value = getattr(p, name)
        if type(value) is not int or value < 1:
            raise ValueError(f"problem.{name} must be a positive int, got {value!r}")
    if p.heads % p.kv_heads:
        raise ValueError(f"problem.kv_heads must divide problem.heads, got {p.kv_heads} and "
                         f"{p.heads}")
    if type(p.head_dim) is not int or not head_dim_supported(p.head_dim):
        raise ValueError(f"problem.head_dim must be a multiple of {HEAD_DIM_STEP} in "
                         f"[{HEAD_DIM_STEP}, {HEAD_DIM_MAX}], got {p.head_dim!r}")
    if type(p.causal) is not bool:
        raise TypeError(f"problem.causal must be a bool, got {type(p.causal).__name__}")
    dtypes = sorted(attention_ops.SUPPORTED_DTYPES.values())
    if p.dtype not in dtypes:
        raise ValueError(f"problem.dtype must be one of {dtypes}, got {p.dtype!r}")


def remember_plan(plans: dict, key, q, k, v, out, causal: bool, scale: float,
                  return_lse: bool, config: Config | None, generation: int) -> None:
    """After a successful ``forward`` of a non-empty problem, whose output was ``out``: store
    the plan that repeats it under ``key``.

    ``config``: the config that call ran with (``forward(..., ran=...)``), fallbacks included;
    where it recorded none, the config this dispatcher picks now. That is not always the one
    that ran: a ``reset()`` in another thread meanwhile gives a fresh dispatcher that has
    forgotten a failed tuned config, and the plan (never tried before it is stored) would
    raise on every later call of the shape instead of falling back.

    ``generation``: ``RUNTIME.generation`` read before that call's decision; the plan is not
    stored if reset() ran since (see Runtime.store_plan)."""
    if q.numel() == 0 or k.shape[2] == 0:
        return  # answered without a kernel; rare enough to take the full path each time
    problem = attention_ops.problem_of(q, k, causal)
    pick = choose if config is None else (lambda op, problem, device: config)
    config = attention_ops.select_config(problem, (q, k, v, out), None, pick)
    plan = attention_plan(q, config, scale, causal, return_lse)
    RUNTIME.store_plan(plans, generation, plan, key)


def forward(q, k, v, causal: bool, scale, return_lse: bool, ran: list | None = None):
    """attention_forward with the dispatcher's config; a failing tuned config -> the default.

    ``ran``: a list the config that produced the result is appended to (what the chooser hook
    answered, before attention_forward's own fit checks), for ``remember_plan``."""
    # The decision this attempt ran with: asking the dispatcher again after a failure could
    # answer "default" because another thread's reject of the same config came in between, and
    # the caller would get the kernel's error instead of the fallback.
    used = []
    configs = []

    def choose_and_record(op: str, problem: AttentionProblem, device: torch.device) -> Config:
        if RUNTIME.disabled:
            configs.append(_heuristic(problem))
            return configs[-1]
        picked = RUNTIME.dispatcher.choice(op, problem, device)
        used.append(picked)
        configs.append(picked.config)
        return picked.config

    try:
        result = attention_ops.attention_forward(q, k, v, causal, scale, return_lse,
                                                 choose=choose_and_record)
    except NOT_A_PLAN_FAILURE:
        # e.g. "chosen config cannot run" for this call's layout under -W error: the tuned
        # config, which did not fail, is kept for the calls it can run.
        raise
    except Exception as err:
        # A bad input (or one no variant can run) is the caller's error: raise that, and keep
        # the tuned config, which is not to blame.
        attention_ops.check_inputs(q, k, v)
        attention_ops.check_flags(causal, scale, return_lse, q.shape[3])
        attention_ops.check_launchable(q, k, v)
        if RUNTIME.disabled or not used or used[-1].how == "default":
            raise
        fallback = RUNTIME.dispatcher.fall_back(used[-1], q.device, err)
    else:
        if ran is not None and configs:
            ran.append(configs[-1])
        return result
    # The retry runs the fallback itself, not the live dispatcher's pick: after a reset() in
    # another thread (a fresh dispatcher, no failed configs) or a decision of the same problem
    # that another thread stored meanwhile, that pick could be the failing config again.
    result = attention_ops.attention_forward(q, k, v, causal, scale, return_lse,
                                             choose=lambda op, problem, device: fallback)
    if ran is not None:
        ran.append(fallback)
    return result
