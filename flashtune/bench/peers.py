"""What runs in each benchmark case: flashtune's public ops and the peers it is measured against.

An implementation's ``prepare(inputs)`` returns ``(fn, context)``: ``fn()`` computes the output
and is what gets timed; ``context()`` is entered around both the correctness check and the
timing (SDPA's forced backend), so entering it is not part of the measured call. ``prepare``
raises ``Unavailable`` when the peer cannot run here (interpreter mode, a backend this build or
GPU lacks); any other exception is recorded as a failure by the case runner.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Callable

# The plain two-pass online kernel, BLOCK 1024, one program per row (background.md): the
# online regime's baseline config, also used by benchmarks/bench_softmax.py. Tunables not named
# here (added to the space later) take their space defaults: see online_1024_config().
ONLINE_1024 = {"regime": "online", "block": 1024, "rows_per_program": 1, "splits": 1,
               "num_warps": 4, "num_stages": 1, "lane_stats": False, "l2_hint": False,
               "exp2": False}

FLASHTUNE = "flashtune"


def online_1024_config():
    """ONLINE_1024 as a validated softmax Config."""
    from ..gen.softmax_space import OPS

    return OPS["softmax"].space.complete(ONLINE_1024)

SOFTMAX_PEERS = ("torch.softmax", "torch.compile", "online-1024")
BACKWARD_PEERS = ("torch",)
ATTENTION_PEERS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "flex")
SDPA_BACKEND_NAMES = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_cudnn": "CUDNN_ATTENTION",
                      "sdpa_efficient": "EFFICIENT_ATTENTION"}


UNAVAILABLE_MESSAGES = ("No available kernel", "No viable backend")


class Unavailable(Exception):
    """The peer cannot run in this environment (recorded as "unavailable", not a failure)."""


@dataclass
class Impl:
    name: str
    prepare: Callable  # inputs -> (fn, context factory)


def _plain(fn):
    return fn, contextlib.nullcontext


# -- softmax ---------------------------------------------------------------------------------

def softmax_impls(interpret: bool) -> list[Impl]:
    import torch

    import flashtune
    from ..gen.softmax_ops import softmax_forward

    compiled: dict = {}

    def online_peer(x):
        config = online_1024_config()
        return _plain(lambda: softmax_forward(x, -1, config=config))

    def compile_peer(x):
        if interpret:
            raise Unavailable("torch.compile is not run in interpret mode (CPU smoke run)")
        if "fn" not in compiled:
            allow_recompiles()
            compiled["fn"] = torch.compile(lambda t: torch.softmax(t, -1), dynamic=False)
        fn = compiled["fn"]
        return _plain(lambda: fn(x))

    return [
        Impl(FLASHTUNE, lambda x: _plain(lambda: flashtune.softmax(x, -1))),
        Impl("torch.softmax", lambda x: _plain(lambda: torch.softmax(x, -1))),
        Impl("torch.compile", compile_peer),
        Impl("online-1024", online_peer),
    ]


# -- softmax backward ------------------------------------------------------------------------

def backward_impls(log: bool) -> list[Impl]:
    """flashtune's eager backward (what its autograd.Function calls) and torch's (what
    torch.softmax's autograd calls); inputs are (y, dy), dim -1."""
    from ..dispatch.plans import aten_backward
    from ..dispatch.runtime import RUNTIME

    torch_backward = aten_backward(log)

    def ours(inputs):
        y, dy = inputs
        return _plain(lambda: RUNTIME.backward(y, dy, -1, log))

    def theirs(inputs):
        y, dy = inputs
        return _plain(lambda: torch_backward(dy, y, -1, y.dtype))

    return [Impl(FLASHTUNE, ours), Impl("torch", theirs)]


# -- attention -------------------------------------------------------------------------------

def sdpa_reference(q, k, v, causal: bool):
    """SDPA with torch's own backend choice: the peer output every attention output is compared with."""
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _sdpa_impl(name: str) -> Impl:
    def prepare(inputs):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, SDPA_BACKEND_NAMES[name], None)
        if backend is None:
            raise Unavailable(f"this torch has no SDPBackend.{SDPA_BACKEND_NAMES[name]}")
        q, k, v, causal = inputs
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                lambda: sdpa_kernel([backend]))
    return Impl(name, prepare)


def sdpa_unavailable(err: BaseException, caught: list) -> str | None:
    """The reason a forced SDPA backend refused the inputs, or None for a genuine failure."""
    # CUDA builds say "No available kernel", CPU builds "No viable backend".
    if isinstance(err, RuntimeError) and any(m in str(err) for m in UNAVAILABLE_MESSAGES):
        reasons = "; ".join(str(w.message) for w in caught)[:400]
        return f"backend not available for these inputs{': ' + reasons if reasons else ''}"
    return None


def allow_recompiles(limit: int = 256) -> None:
    """Compiled peers get one graph per shape and dtype (dynamic=False). Past Dynamo's default
    limit of 8 recompiles it would silently run the function eagerly, and the "compiled" peer
    would measure eager torch: raise the limit above the number of cases."""
    import torch._dynamo

    config = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(config, name):
            setattr(config, name, max(getattr(config, name), limit))


def make_flex() -> Callable:
    """``factory(q, k, v, causal) -> fn`` running compiled FlexAttention (causal: a block mask,
    built once per (Nq, Nk))."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    allow_recompiles()
    compiled = torch.compile(flex_attention, dynamic=False)
    masks: dict = {}

    def factory(q, k, v, causal):
        mask = None
        if causal:
            key = (q.shape[2], k.shape[2], q.device)
            if key not in masks:
                masks[key] = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None,
                                               q.shape[2], k.shape[2], device=q.device)
            mask = masks[key]
        return lambda: compiled(q, k, v, block_mask=mask)

    return factory


def attention_impls(interpret: bool) -> list[Impl]:
    import flashtune

    flex: dict = {}

    def flex_peer(inputs):
        if interpret:
            raise Unavailable("compiled FlexAttention needs CUDA (not run in interpret mode)")
        if "factory" not in flex:
            try:
                flex["factory"] = make_flex()
            except ImportError as err:
                flex["factory"] = err
        if isinstance(flex["factory"], Exception):
            raise Unavailable(f"FlexAttention unavailable: {flex['factory']}")
        return _plain(flex["factory"](*inputs))

    def ours(inputs):
        q, k, v, causal = inputs
        return _plain(lambda: flashtune.attention(q, k, v, causal=causal))

    return [Impl(FLASHTUNE, ours)] + [_sdpa_impl(n) for n in SDPA_BACKEND_NAMES] + \
        [Impl("flex", flex_peer)]


def quiet_warnings():
    """Record (not print) warnings raised while a peer runs: SDPA explains refusals this way."""
    return warnings.catch_warnings(record=True)
