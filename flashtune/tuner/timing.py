"""Timing of one launch function: median, p20 and p80 in milliseconds.

On a GPU, ``triton.testing.do_bench`` (CUDA events, L2 flushed before every repetition, the
repetition count chosen from a time budget) with quantiles, after scrub_l2 (the lines that
do_bench's flush leaves in L2). Under the Triton interpreter there is
no GPU: ``time.perf_counter`` around a few calls, median of those.
"""

from __future__ import annotations

import ctypes
import functools
import statistics
import sys
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


def scrub_l2() -> None:
    """Return to normal the L2 lines that kernels loaded with an evict_last hint (the l2_hint
    kernels' first pass): do_bench's flush leaves them in L2.

    do_bench flushes L2 by writing zeros to 256 MB before each repetition, and those writes do
    not displace evict_last lines; a copy of 400 MB did not either, a copy of 1 GiB mostly did
    (H100, thirty-third session, benchmarks/results/session33_2026-11-24). Right after one
    launch of a split config with l2_hint, the default of 4096 x 1000 fp16 read 7.7-8.7 us
    through ~500 flushes, against 9.7-10.6 us otherwise: a config timed after one that left
    such lines read its input partly from L2, so the tuner's interleaved re-timing could crown
    it (a re-timing 25% faster than the same config's trial), and a bench peer could gain the
    same way. The context's reset of persisting lines (cudaCtxResetPersistingL2Cache) clears
    them: done once before each timing, since a kernel's own lines did not speed up its own
    later repetitions (the same times after zero_, after the 1 GiB copy and after the reset).
    Through the CUDA runtime loaded as a shared library, else the driver; where neither can be
    reached, nothing."""
    import torch

    reset = _persisting_l2_reset()
    if reset is not None:
        torch.cuda.synchronize()  # the lines of kernels still queued would come after it
        reset()


@functools.lru_cache(maxsize=1)
def _persisting_l2_reset():
    """The reset of persisting L2 lines as a function of no arguments, or None: the CUDA
    runtime's that this process has loaded (torch's, the one measured), else the driver's."""
    return _runtime_l2_reset() or _driver_l2_reset()


def _runtime_l2_reset():
    """cudaCtxResetPersistingL2Cache of the CUDA runtime this process has loaded (torch's), as a
    function that takes back the error of a failed reset, or None (not Linux, or a runtime
    linked statically)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            # address, perms, offset, dev, inode, then the path, which may hold spaces
            fields = (line.rstrip("\n").split(maxsplit=5) for line in maps if "libcudart" in line)
            paths = sorted({f[5] for f in fields if len(f) == 6})
    except OSError:
        return None
    for path in paths:
        try:
            runtime = ctypes.CDLL(path)
            reset, last_error = runtime.cudaCtxResetPersistingL2Cache, runtime.cudaGetLastError
        except (OSError, AttributeError):
            continue
        for function in (reset, last_error):  # cudaError_t f(void)
            function.restype, function.argtypes = ctypes.c_int, []

        def reset_persisting_l2() -> None:
            if reset() != 0:
                # A failed runtime call is also the thread's pending error, which torch reads
                # after its next kernel launch (do_bench's flush) and raises as that launch's
                # failure. The reset only makes timings fairer: take the error back.
                last_error()

        return reset_persisting_l2
    return None


# The driver library by the name every CUDA install gives it (torch's runtime loads it so).
_DRIVER_NAMES = {"win32": "nvcuda.dll"}


def _driver_l2_reset():
    """cuCtxResetPersistingL2Cache of the CUDA driver, for a process with no shared CUDA runtime
    to find (Windows, where there is no /proc/self/maps; a runtime linked statically), or None.
    It acts on the thread's current context, the primary one that torch's runtime made current
    (scrub_l2 synchronizes first). A failed driver call leaves no pending error behind: the
    runtime keeps its own; its result is ignored, as the runtime's is."""
    name = _DRIVER_NAMES.get(sys.platform, "libcuda.so.1")
    try:
        reset = ctypes.CDLL(name).cuCtxResetPersistingL2Cache
    except (OSError, AttributeError):
        return None
    reset.restype, reset.argtypes = ctypes.c_int, []  # CUresult f(void)

    def reset_persisting_l2() -> None:
        reset()

    return reset_persisting_l2


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
