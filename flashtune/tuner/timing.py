"""Timing of one launch function: median, p20 and p80 in milliseconds.

On a GPU, ``triton.testing.do_bench`` (CUDA events, L2 flushed before every repetition, the
repetition count chosen from a time budget) with quantiles. Under the Triton interpreter there is
no GPU: ``time.perf_counter`` around a few calls, median of those.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class TimingOptions:
    warmup_ms: int = 10        # do_bench warm-up time (the gate's launch has already compiled)
    rep_ms: int = 50           # do_bench measuring time per trial
    retime_rep_ms: int = 40    # per config and round in the interleaved re-time
    cpu_reps: int = 3          # perf_counter calls per trial under the interpreter

    def __post_init__(self) -> None:
        for name in ("warmup_ms", "rep_ms", "retime_rep_ms", "cpu_reps"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"TimingOptions.{name} must be an int >= 1, got {value!r}")


def bench_gpu(fn: Callable[[], None], warmup_ms: int, rep_ms: int) -> tuple[float, float, float]:
    import triton.testing

    med, p20, p80 = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.2, 0.8])
    return float(med), float(p20), float(p80)


def bench_cpu(fn: Callable[[], None], reps: int) -> tuple[float, float, float]:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return statistics.median(times), _quantile(times, 0.2), _quantile(times, 0.8)


def _quantile(sorted_times: list[float], q: float) -> float:
    # Linear interpolation, as torch.quantile does in do_bench.
    pos = q * (len(sorted_times) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


def bench(fn: Callable[[], None], on_gpu: bool, options: TimingOptions, retime: bool = False):
    if on_gpu:
        return bench_gpu(fn, options.warmup_ms, options.retime_rep_ms if retime else options.rep_ms)
    return bench_cpu(fn, options.cpu_reps)
