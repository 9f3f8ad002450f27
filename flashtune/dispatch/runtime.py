"""The process-wide dispatcher state and the eager implementations behind the public ops.

``RUNTIME`` holds the settings (read from the environment once), the ``Dispatcher`` (tables and
decisions) and the plan dicts. ``reset()`` re-reads the environment and forgets everything, in
place, so modules that bound the plan dicts at import keep seeing the live ones.
"""

from __future__ import annotations

import functools
import threading

import torch

from ..forks import after_fork_in_child
from ..gen.notices import DispatchWarning
from ..once import warn_at_user
from ..gen.softmax_ops import SUPPORTED_DTYPES, normalize_dim
from ..gen.softmax_space import MAX_COLS
from .chooser import Dispatcher
from .plans import (MAX_PLANS, backward_plan, forward_plan, kernel_ok, output_like, problem_of,
                    torch_backward, torch_forward)
from .settings import Settings

FORWARD_OPS = ("softmax", "log_softmax")
_TORCH_ONLY = (torch.float64,)  # floating dtypes torch computes for us (see flashtune.ops)
# What the public ops take (and what their `dtype=` may name): the kernels' dtypes, and torch's.
ACCEPTED_DTYPES = frozenset((*SUPPORTED_DTYPES, *_TORCH_ONLY))


def check_dtype(name: str, t: torch.Tensor) -> None:
    """Floating dtypes are accepted (fp64 goes to torch); anything else is a TypeError."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_nested:  # a strided nested tensor has layout torch.strided but no sizes or strides
        raise TypeError(f"{name} is a nested tensor; flashtune softmax and log_softmax take "
                        "strided (dense) tensors (call .to_padded_tensor(...) first)")
    if t.layout != torch.strided:
        raise TypeError(f"{name} has layout {t.layout}; flashtune softmax and log_softmax take "
                        "strided (dense) tensors (call .to_dense() first)")
    if t.dtype in ACCEPTED_DTYPES:
        return
    raise TypeError(
        f"{name} has dtype {t.dtype}; flashtune softmax and log_softmax take float16, bfloat16 "
        "and float32 (float64 is computed by torch)")


def check_backward_pair(y: torch.Tensor, dy: torch.Tensor) -> None:
    """The backward ops' input rules, shared with their fake implementations (a call mixing a
    meta and a CPU tensor dispatches to the fake, which must refuse it as eager does)."""
    check_dtype("y", y)
    check_dtype("dy", dy)
    if y.shape != dy.shape:
        raise ValueError(f"y and dy must have one shape, got {tuple(y.shape)} and {tuple(dy.shape)}")
    if y.device != dy.device:
        raise ValueError(f"y and dy must be on one device, got {y.device} and {dy.device}")


# What a plan, or a config being tried, raises that is not its failure, and so raises as it
# is: the device full (not the config's fault; no config would help), and a notice the
# user's filters made an error (python -W error; see plan_failed). Taken for a failure, a
# tuned config that did not fail would be dropped, or the notice lost.
NOT_A_PLAN_FAILURE = (torch.OutOfMemoryError, Warning)


class Runtime:
    def __init__(self) -> None:
        # op -> {plan key: plan}; the dict objects live as long as the process (see reset).
        self.plans: dict[str, dict] = {op: {} for op in FORWARD_OPS}
        self.backward_plans: dict[str, dict] = {op: {} for op in FORWARD_OPS}
        self.attention_plans: dict = {}  # flashtune.attention_op's hot path
        # Bumped by reset(); a first call stores its plan only if no reset came in between
        # (store_plan), under _store_lock, which reset() holds too: a plan built by a call
        # that overlapped a reset came from the old settings and dispatcher (say, before
        # FLASHTUNE_DISABLE=1 or a new FLASHTUNE_DB), and the hot path would serve it forever.
        # First calls only: the hot path reads the plan dicts without a lock.
        # Re-entrant: a signal handler runs in the thread it interrupts, whatever that thread
        # holds, and one that calls flashtune (a first call stores a plan) or reset() would
        # wait forever on a plain lock held by the call it interrupted. Both are safe to run
        # inside: store_plan checks the generation again after storing; a reset() inside
        # reset() may leave the outer one's settings, read from the environment a moment before.
        self._store_lock = threading.RLock()
        self.generation = 0
        self.reset(importing=True)

    def reset(self, importing: bool = False) -> None:
        # At import (RUNTIME below), a notice about a switch's value that the user's filters
        # make an error (python -W error) must not fail the import: that import is also how
        # the README's recipe gets DispatchWarning to let it through (with torch imported
        # first, `import flashtune` builds this runtime). Such a notice waits for the first
        # call, which says it where the database's own notices are said (Dispatcher.defer).
        notices: list[str] | None = [] if importing else None
        settings = Settings.from_env(notices)
        dispatcher = Dispatcher(settings)
        for message in notices or ():
            try:
                warn_at_user(message, DispatchWarning)
            except DispatchWarning:
                dispatcher.defer(message)
        with self._store_lock:
            self._install(settings, dispatcher)

    def _install(self, settings: Settings, dispatcher: Dispatcher) -> None:
        """reset()'s work under the store lock: the new settings and dispatcher, a new
        generation, no plans. The new generation last: a first call in another thread (no
        lock) that reads it then finds the new settings and dispatcher too. Bumped first, a
        call could pair the new generation with the old dispatcher, and store that plan after
        the clear."""
        self.settings = settings
        self.disabled = settings.disabled
        self.dispatcher = dispatcher
        self.generation += 1
        for d in (*self.plans.values(), *self.backward_plans.values(), self.attention_plans):
            d.clear()

    def remake_locks(self) -> None:
        """In a forked child (flashtune.forks): the runtime's and its dispatcher's locks.

        A store lock that another thread of the parent held at the fork (it does not exist
        here) may have been inside reset(), which the child then finishes: settings, disabled
        and dispatcher made to agree, a new generation and no plans. Otherwise the child could
        serve the old settings' plans (our kernels after FLASHTUNE_DISABLE=1, say) for good.
        Inside store_plan instead, this only costs the child its plans. (Held by the thread
        that forked, the lock is left as it is: that thread goes on in the child.)"""
        lock = self._store_lock
        held_elsewhere = not lock.acquire(blocking=False)
        if held_elsewhere:
            settings = self.settings
            dispatcher = self.dispatcher
            self._install(settings, dispatcher if dispatcher.settings is settings
                          else Dispatcher(settings))
            self._store_lock = threading.RLock()
        else:
            lock.release()
        self.dispatcher.remake_lock()

    def store_plan(self, plans: dict, generation: int, plan, *keys) -> None:
        """Store ``plan`` under each of ``keys`` unless reset() ran since ``generation`` (the
        value read before the plan's decision was made); clears ``plans`` when full."""
        with self._store_lock:
            if generation != self.generation:
                return
            if len(plans) + len(keys) > MAX_PLANS:
                plans.clear()
            for key in keys:
                plans[key] = plan
            if generation != self.generation:
                # reset() ran after the check above, inside this block: a signal handler of
                # this thread (the lock is re-entrant). Its clear() may have come first.
                for key in keys:
                    plans.pop(key, None)

    # -- forward ---------------------------------------------------------------------------
    def forward(self, x: torch.Tensor, dim: int, log: bool, alias_dim: int | None = None):
        """softmax/log_softmax of ``x`` (eager, no autograd); ``dim`` normalized.

        ``alias_dim``: the caller's spelling of dim (e.g. -1); the plan is stored under it too,
        so the public fast path finds it without normalizing.
        """
        if x._is_zerotensor():
            # torch's storage-less zeros (torch._efficientzerotensor, as autograd makes them):
            # data_ptr() is 0, which Triton's launcher passes as a valid null pointer. torch
            # computes it (a uniform result), and no plan is stored for it.
            return torch_forward(x, dim, log)
        if x.numel() == 0:
            return output_like(x, dim)
        # A 0-d tensor's softmax is 1 (log: 0): no kernel, and no plan, whose key () would
        # also match under torch.jit.trace, where sizes are traced values.
        if x.dim() == 0 or not kernel_ok(x, self.settings.interpreter) or x.shape[dim] > MAX_COLS:
            return torch_forward(x, dim, log)
        op = "log_softmax" if log else "softmax"
        plans = self.plans[op]
        base = (x.shape, x.stride(), x.dtype, x.device)
        generation = self.generation  # before the plan is read or decided (see store_plan)
        if self.disabled:
            # FLASHTUNE_DISABLE=1 came with a reset() in another thread after the caller's own
            # check: a plan built now would carry on with our kernels for good.
            return torch_forward(x, dim, log)
        plan = plans.get(base + (dim,))
        keys: tuple = ()
        if plan is not None:
            try:
                out = plan(x)
            except NOT_A_PLAN_FAILURE:
                raise
            except Exception:  # noqa: BLE001 - decided afresh below (see plan_failed)
                plan = plan_failed(plans, base + (dim,))
        if plan is None:
            plan, out = self._first_run(op, x, dim, forward_plan, (x,))
            keys = (base + (dim,),)
        if alias_dim is not None and alias_dim != dim:
            keys += (base + (alias_dim,),)
        if keys:
            self.store_plan(plans, generation, plan, *keys)
        return out

    # -- backward --------------------------------------------------------------------------
    def backward(self, y: torch.Tensor, dy: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
        """dx of softmax/log_softmax from its output y and gradient dy (eager; dim normalized)."""
        check_backward_pair(y, dy)
        # A negative-bit view (e.g. y.backward(torch._neg_view(g)), or the imag of a
        # conjugated complex gradient) holds -t in memory: the kernels read memory. (The
        # registered backward ops get it resolved by the dispatcher; eager autograd does not.)
        # The saved y too: a saved_tensors_hooks unpack may return such a view.
        if dy.is_neg():
            dy = dy.resolve_neg()
        if y.is_neg():
            y = y.resolve_neg()
        if y.dtype != dy.dtype:
            dy = dy.to(y.dtype)  # autograd may hand a gradient of another float dtype
        if dy._is_zerotensor():
            # torch's storage-less zero gradient (torch._efficientzerotensor): nothing to read.
            return torch_backward(y, dy, normalize_dim(dim, y.dim()), log)
        dim = normalize_dim(dim, y.dim())
        if y.numel() == 0:
            return output_like(y, dim)
        if y.dim() == 0 or not kernel_ok(y, self.settings.interpreter) or y.shape[dim] > MAX_COLS:
            return torch_backward(y, dy, dim, log)
        plans = self.backward_plans["log_softmax" if log else "softmax"]
        key = (y.shape, y.stride(), dy.stride(), y.dtype, y.device, dim)
        generation = self.generation  # before the plan is read or decided (see store_plan)
        if self.disabled:
            # FLASHTUNE_DISABLE=1: torch's backward, as the forward is torch's. The registered
            # op's autograd (torch.compile) and `flashtune bench --ops backward` come here.
            # Checked after the generation is read, as in forward (a reset in another thread).
            return torch_backward(y, dy, dim, log)
        plan = plans.get(key)
        if plan is not None:
            try:
                return plan(y, dy)
            except NOT_A_PLAN_FAILURE:
                raise
            except Exception:  # noqa: BLE001 - decided afresh below (see plan_failed)
                plan_failed(plans, key)
        op = "log_softmax_backward" if log else "softmax_backward"
        plan, out = self._first_run(op, y, dim, functools.partial(backward_plan, dy=dy), (y, dy))
        self.store_plan(plans, generation, plan, key)
        return out

    def _first_run(self, op: str, t: torch.Tensor, dim: int, make_plan, args: tuple):
        """Decide, build the plan and run it once. A tuned config that fails to load or launch
        (e.g. a tampered database, a compiler that rejects it) must not break the caller:
        warn and use the default config instead."""
        problem = problem_of(t, dim)
        picked = self.dispatcher.choice(op, problem, t.device)
        try:
            plan = make_plan(t, dim, op, picked.config)
            return plan, plan(*args)
        except NOT_A_PLAN_FAILURE:
            raise  # e.g. "cannot write generated kernels to ..." under -W error: config kept
        except Exception as err:
            if picked.how == "default":
                raise
            fallback = self.dispatcher.fall_back(picked, t.device, err)
            plan = make_plan(t, dim, op, fallback)
            return plan, plan(*args)


RUNTIME = Runtime()
after_fork_in_child(RUNTIME.remake_locks)


def plan_failed(plans: dict, key) -> None:
    """A stored plan raised: forget it (the caller then decides afresh, as on a first call).

    A plan key holds no pointer alignment, so a later input of the same layout at another
    alignment compiles a new specialization of the plan's kernel inside the plan. Where that
    fails (a tuned config that does not fit the new specialization), the error reached the
    user's model; a first call falls back from a failing tuned config to the default and says
    so once, or raises what the default raises too (a real error).

    A Warning a plan raises is not a failure of the plan: it is a notice the user's filters
    made an error (python -W error), e.g. the fast launch's "the fast kernel launch failed
    ...", said once per process. It raises as itself and the plan is kept: taken for a
    failure, the call was decided afresh and ran without a word, and the notice was lost."""
    plans.pop(key, None)


def reset() -> None:
    """Re-read FLASHTUNE_* / TRITON_INTERPRET and forget loaded tables, decisions and plans.

    TRITON_INTERPRET must keep the value it had when Triton was imported (Triton decides then
    whether its own functions are interpreted); kernels loaded after a change fail in Triton."""
    RUNTIME.reset()
