"""The op adapter: how the worker builds a problem's inputs, oracle and launches a config.

The worker only talks to this interface (``make_case``, ``launch``), so tests can plant broken
variants (a launch that raises, an output that is corrupted, a kernel that faults) by
subclassing ``SoftmaxAdapter`` or ``AttentionAdapter`` without touching the templates.
``OpAdapter`` (the runners' default) hands each op to its family's adapter. Adapters cross
into the worker process by pickling, so they must be importable top-level classes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import torch

from ..gen.softmax_space import OPS, SoftmaxProblem
from .gate import Gate

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


@dataclass
class Recheck:
    """A further launch of a config that the finalists' re-check gates but nobody times: the
    runtime also runs the config another way (attention: with the LSE output on, a kernel
    specialization of its own), and a stored winner must be right that way too."""

    args: tuple[Any, ...]  # the launch arguments
    outputs: tuple[torch.Tensor, ...]  # filled with NaN before the launch
    check: Callable[[], str | None]  # None, or why those outputs are wrong


@dataclass
class Case:
    """One problem's tensors in the worker: launch args, the gate, and the output it checks
    (``output``; the last launch argument when not given)."""

    args: tuple[Any, ...]
    gate: Any  # .check(out) -> None or why the output is wrong
    output: torch.Tensor | None = None
    recheck: Recheck | None = None

    @property
    def out(self) -> torch.Tensor:
        return self.output if self.output is not None else self.args[-1]


class LastVariant:
    """The loaded module of the config launched last, looked up by identity.

    do_bench launches one config many times in a row. Looking its module up by value each time
    (validate, render key, hash) cost 15-25 us of host time per launch on a CPU like CI's, more
    on a slow GPU host; with the launch's own host time that outran do_bench's L2 flush, and
    trials of kernels under about 50 us were timed host-bound (H100, sixth session: the tuner
    timed a 38 us one-launch split at 65-87 us and picked a slower winner).
    """

    def __init__(self):
        self._key: tuple[str, Any] | None = None
        self._module: Any = None

    def module(self, op: str, config: Mapping[str, Any]):
        if self._key is None or self._key[0] != op or self._key[1] is not config:
            from ..gen import load_variant

            self._module = load_variant(op, config)
            self._key = (op, config)
        return self._module

    def __getstate__(self):
        return {"_key": None, "_module": None}  # adapters cross into the worker by pickling


def variant_module(adapter: Any, op: str, config: Mapping[str, Any]):
    """The adapter's LastVariant lookup (made on first use: subclasses in tests plant faults
    and need not call ``__init__``)."""
    last = adapter.__dict__.get("_last_variant")
    if last is None:
        last = adapter._last_variant = LastVariant()
    return last.module(op, config)


class SoftmaxAdapter:
    """Softmax-family ops: forward (x -> y) and backward (y, dy -> dx)."""

    def make_case(self, op: str, problem: SoftmaxProblem, device: str, seed: int) -> Case:
        from ..reference import softmax_backward_ref, softmax_ref

        spec = OPS[op]
        dtype = TORCH_DTYPES[problem.dtype]
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        shape = (problem.n_rows, problem.n_cols)
        x = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
        fn = torch.log_softmax if spec.log else torch.softmax
        if spec.direction == "fwd":
            ref = softmax_ref(x, -1, log=spec.log)
            peer = fn(x, -1)
            args = (x, torch.empty_like(x))
        else:
            y = fn(x, -1)  # a realistic y: the forward's own output in the dtype
            dy = torch.randn(shape, generator=gen, device=device, dtype=torch.float32).to(dtype)
            ref = softmax_backward_ref(y, dy, -1, log=spec.log)
            from ..dispatch.plans import aten_backward  # the runtime's own fallback

            peer = aten_backward(spec.log)(dy, y, -1, dtype)
            args = (y, dy, torch.empty_like(y))
        gate = Gate(ref, peer, dtype)
        del peer
        return Case(args, gate)

    def launch(self, op: str, config: Mapping[str, Any], case: Case) -> None:
        variant_module(self, op, config).launch(*case.args)


class OpAdapter:
    """The default adapter: each op goes to its family's adapter (softmax, attention)."""

    def __init__(self):
        self._by_family: dict[str, Any] = {}

    def _for(self, op: str):
        from .families import family

        fam = family(op)
        adapter = self._by_family.get(fam.name)
        if adapter is None:
            adapter = self._by_family[fam.name] = fam.adapter()
        return adapter

    def make_case(self, op: str, problem, device: str, seed: int) -> Case:
        return self._for(op).make_case(op, problem, device, seed)

    def launch(self, op: str, config: Mapping[str, Any], case: Case) -> None:
        self._for(op).launch(op, config, case)
