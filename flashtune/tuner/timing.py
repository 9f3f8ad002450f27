"""Timing of one launch function: median, p20 and p80 in milliseconds.

On a GPU, ``triton.testing.do_bench`` (CUDA events, L2 flushed before every repetition, the
repetition count chosen from a time budget) with quantiles, after scrub_l2 (the lines that
do_bench's flush leaves in L2). Under the Triton interpreter there is
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


# How many times L2's size scrub_l2 streams through it. (Measured on an H100, thirty-third
# session: see scrub_l2.)
SCRUB_L2_TIMES = 8
_FALLBACK_L2_BYTES = 64 << 20  # where torch does not report the L2 size


def scrub_l2(times: int = SCRUB_L2_TIMES) -> None:
    """Push out of L2 the lines that do_bench's flush leaves there: those loaded with an
    evict_last hint (the l2_hint kernels' first pass).

    do_bench flushes L2 by writing zeros to 256 MB before each repetition, and those writes
    do not displace evict_last lines (H100, thirty-third session,
    benchmarks/results/session33_2026-11-24): right after one launch of a split config with
    l2_hint, the default of 4096 x 1000 fp16 read 7.7-8.7 us through ~500 flushes, against
    9.7-10.6 us otherwise. So a config timed after one that left such lines read its input
    partly from L2: the tuner's interleaved re-timing crowned configs that way (a re-timing
    25% faster than the same config's trial), and a bench peer could gain the same way. A copy
    through a buffer of several times L2's size does displace them (as the context's reset of
    persisting lines does); one before each timing is enough, since a kernel's own lines did
    not speed up its own later repetitions (the same times after zero_, after the copy and
    after the reset). Costs about 0.3 ms and 2 x ``times`` x L2 bytes of memory, briefly."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2_bytes = getattr(props, "L2_cache_size", 0) or _FALLBACK_L2_BYTES
    try:
        src = torch.empty(times * l2_bytes, dtype=torch.uint8, device="cuda")
        torch.empty_like(src).copy_(src)
    except torch.cuda.OutOfMemoryError:
        pass  # a problem that fills the GPU: time it with do_bench's flush alone


def bench_gpu(fn: Callable[[], None], warmup_ms: int, rep_ms: int) -> tuple[float, float, float]:
    import triton.testing

    scrub_l2()
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
