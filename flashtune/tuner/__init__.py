"""The tuner: finds the fastest correct variant of each problem on this GPU and caches it.

Modules (one job each): ``problems`` (what to tune), ``space`` (candidates as an Optuna search
space, resource pruning), ``study`` (the search and the winner rule), ``worker`` (compile, gate
and time in a restartable spawn process), ``precompile`` (parallel compilation ahead of timing),
``gate`` (the accuracy rule), ``timing``, ``progress``, ``storage`` (Optuna storage and how
several GPUs share it), ``session`` (many problems, cache writes), ``families`` (what differs
between the softmax and attention families: problems, buckets, candidates, defaults, launch
argument shapes), ``adapter`` / ``attention_adapter`` (the op's inputs, oracle and launch;
tests plant broken variants here).

Nothing here is imported by ``import flashtune`` or the dispatcher; optuna is imported only
inside the search functions.
"""

from __future__ import annotations

__all__ = ["run_session", "SessionOptions", "TuneOptions", "tune_problem"]


def __getattr__(name: str):
    if name in ("run_session", "SessionOptions"):
        from . import session

        return getattr(session, name)
    if name in ("TuneOptions", "tune_problem"):
        from . import study

        return getattr(study, name)
    raise AttributeError(name)
