"""What the tuner needs to know about each op family, in one place.

The search, the worker, the precompiler and the session are written once; everything that
differs between softmax and attention (which problems are valid, how they are named and
bucketed, the candidate list and its resource pruning, the heuristic defaults, the launch
arguments' shapes) is a method of the op's family here. Adapters (inputs, oracle, launch) live
in ``adapter`` and ``attention_adapter``; ``family(op).adapter()`` picks the right one.
"""

from __future__ import annotations

from typing import Any

from ..gen import attention_space, softmax_space
from ..gen.problem_keys import ATTENTION_DTYPES, SOFTMAX_DTYPES
from .space import prune


class SoftmaxFamily:
    name = "softmax"
    ops = tuple(softmax_space.OPS)
    dtypes = SOFTMAX_DTYPES

    @staticmethod
    def check(problem) -> None:
        if not isinstance(problem, softmax_space.SoftmaxProblem):
            raise TypeError(f"softmax ops take a SoftmaxProblem, got {type(problem).__name__}")
        _check_ints(problem, rows="n_rows", columns="n_cols")
        if problem.n_rows < 1 or problem.n_cols < 1:
            raise ValueError("problem rows and columns must be >= 1")
        if problem.n_cols > softmax_space.MAX_COLS:  # else "no candidate config fits", unexplained
            raise ValueError(f"rows of {problem.n_cols} columns: the softmax kernels take at most "
                             f"{softmax_space.MAX_COLS} (int32 column offsets)")

    @staticmethod
    def shape_text(problem) -> str:
        return f"{problem.n_rows}x{problem.n_cols}"

    @staticmethod
    def bucket(problem) -> dict:
        return softmax_space.problem_bucket(problem)

    @staticmethod
    def candidates(op: str, problem, device: str, max_shared_bytes: int | None):
        streams = 1 if op in ("softmax", "log_softmax") else 2
        return prune(softmax_space.fitting_configs(op, problem), problem.dtype, max_shared_bytes,
                     streams)

    @staticmethod
    def default_config(op: str, problem, sm_count: int = 132):
        return softmax_space.default_config(op, problem, sm_count)

    @staticmethod
    def seed_twins(op: str, problem, sm_count: int = 132) -> list:
        """Configs worth a trial before the search models anything (besides the default)."""
        return (softmax_space.statistics_twins(op, problem, sm_count)
                + softmax_space.chunk_twins(op, problem, sm_count))

    @staticmethod
    def arg_specs(op: str, problem) -> tuple:
        """Launch arguments as ("t", shape, strides, dtype) or ("v", value), outputs last."""
        n_args = 2 if softmax_space.OPS[op].direction == "fwd" else 3
        spec = ("t", (problem.n_rows, problem.n_cols), (problem.n_cols, 1), problem.dtype)
        return (spec,) * n_args

    @staticmethod
    def adapter():
        from .adapter import SoftmaxAdapter

        return SoftmaxAdapter()


def attention_smem_bytes(config, head_dim: int) -> int:
    """Shared memory estimate: the Q tile plus ``num_stages`` K and V tiles, 2-byte elements."""
    bd = attention_space.block_d(head_dim)
    return 2 * (config["BLOCK_M"] + 2 * config["BLOCK_N"] * max(1, config["num_stages"])) * bd


class AttentionFamily:
    name = "attention"
    ops = tuple(attention_space.OPS)
    dtypes = ATTENTION_DTYPES

    @staticmethod
    def check(problem) -> None:
        if not isinstance(problem, attention_space.AttentionProblem):
            raise TypeError(f"attention ops take an AttentionProblem, got {type(problem).__name__}")
        _check_ints(problem, **{name: name for name in
                                ("batch", "heads", "kv_heads", "nq", "nk", "head_dim")})
        p = problem
        if min(p.batch, p.heads, p.kv_heads, p.nq, p.nk) < 1:
            raise ValueError("attention batch, heads, kv_heads and sequence lengths must be >= 1")
        if p.heads % p.kv_heads:
            raise ValueError(f"attention heads ({p.heads}) must be a multiple of kv_heads ({p.kv_heads})")
        if not attention_space.head_dim_supported(p.head_dim):
            raise ValueError(f"attention head dim {p.head_dim} is not supported: use a multiple of "
                             f"{attention_space.HEAD_DIM_STEP} in [{attention_space.HEAD_DIM_STEP}, "
                             f"{attention_space.HEAD_DIM_MAX}]")
        if type(p.causal) is not bool:
            raise TypeError(f"attention causal must be a bool, got {p.causal!r}")

    @staticmethod
    def shape_text(problem) -> str:
        p = problem
        n = f"{p.nq}" if p.nq == p.nk else f"{p.nq}/{p.nk}"
        h = f"{p.heads}" if p.heads == p.kv_heads else f"{p.heads}/{p.kv_heads}"
        return f"{p.batch}x{h}x{n}x{p.head_dim}" + (":causal" if p.causal else "")

    @staticmethod
    def bucket(problem) -> dict:
        return attention_space.problem_bucket(problem)

    @staticmethod
    def features(device: str) -> frozenset[str]:
        """The Hopper tunables to offer on ``device`` (the interpreter: what Triton can express)."""
        import torch

        from ..gen.attention_ops import device_features

        return device_features(torch.device(device))

    @classmethod
    def candidates(cls, op: str, problem, device: str, max_shared_bytes: int | None):
        configs = attention_space.fitting_configs(op, problem, features=cls.features(device))
        if max_shared_bytes is None:
            return list(configs), []  # fitting_configs already holds them to Hopper's 227 KiB
        kept, pruned = [], []
        for config in configs:
            need = attention_smem_bytes(config, problem.head_dim)
            if need > max_shared_bytes:
                pruned.append((config, f"shared memory estimate {need} B > {max_shared_bytes} B"))
            else:
                kept.append(config)
        return kept, pruned

    @staticmethod
    def default_config(op: str, problem, sm_count: int = 132):
        return attention_space.default_config(op, problem, sm_count)

    @staticmethod
    def seed_twins(op: str, problem, sm_count: int = 132) -> list:
        return []

    @staticmethod
    def arg_specs(op: str, problem) -> tuple:
        p = problem
        q = ("t", (p.batch, p.heads, p.nq, p.head_dim),
             (p.heads * p.nq * p.head_dim, p.nq * p.head_dim, p.head_dim, 1), p.dtype)
        kv = ("t", (p.batch, p.kv_heads, p.nk, p.head_dim),
              (p.kv_heads * p.nk * p.head_dim, p.nk * p.head_dim, p.head_dim, 1), p.dtype)
        # launch(q, k, v, out, lse, sm_scale, causal): the tuner times without the LSE output.
        return (q, kv, kv, q, ("v", None), ("v", p.head_dim ** -0.5), ("v", bool(p.causal)))

    @staticmethod
    def adapter():
        from .attention_adapter import AttentionAdapter

        return AttentionAdapter()


FAMILIES = (SoftmaxFamily, AttentionFamily)
_BY_OP: dict[str, Any] = {op: fam for fam in FAMILIES for op in fam.ops}


def family(op: str):
    try:
        return _BY_OP[op]
    except KeyError:
        raise ValueError(f"unknown op {op!r}; expected one of {sorted(_BY_OP)}") from None


def _check_ints(problem, **fields: str) -> None:
    """The problem's sizes (label -> attribute) are ints: a float or a str failed later, deep
    in the bucket's or the tensors' making ("'float' object has no attribute 'bit_length'"),
    and a bool passed as 1."""
    for label, attribute in fields.items():
        value = getattr(problem, attribute)
        if type(value) is not int:
            raise TypeError(f"problem {label} must be an int, got {value!r}")
