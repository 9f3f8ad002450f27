"""The benchmark harness behind ``flashtune bench`` and ``flashtune report``.

Modules, one job each: ``shapes`` (the case sets of benchmarks.md), ``timing`` (do_bench /
perf_counter medians, copy bandwidth), ``peers`` (flashtune's public ops and the peers),
``checks`` (correctness vs the peer and float64), ``cases`` (one case: check, time, record),
``softmax`` / ``attention`` (their case loops and metrics), ``budget``, ``overhead`` (per-call
host cost), ``tuning`` (history from the tuner's records), ``report`` (Markdown, summary),
``plots`` (matplotlib), ``runner`` (the whole run and its files).

Nothing here is imported by ``import flashtune``.
"""

from __future__ import annotations

__all__ = ["BenchOptions", "run_bench", "render", "load_result"]


def __getattr__(name: str):
    if name in ("BenchOptions", "run_bench", "render"):
        from . import runner

        return getattr(runner, name)
    if name == "load_result":
        from .report import load_result

        return load_result
    raise AttributeError(f"module 'flashtune.bench' has no attribute {name!r}")
