"""How the harness times a call, and the copy bandwidth every GB/s is compared with.

GPU: ``triton.testing.do_bench`` (CUDA events, L2 flushed before every repetition) with
quantiles, after a warm-up call that also compiles; the tuner's ``bench_gpu`` does exactly this.
Interpreter: ``time.perf_counter`` medians of a few calls on CPU tensors (the numbers say
nothing about speed; the run exists so the harness cannot rot).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..tuner.timing import bench_cpu, bench_gpu

GPU_COPY_BYTES = 1 << 30  # 1 GiB: far beyond L2, so the copy runs at DRAM bandwidth
CPU_COPY_BYTES = 1 << 24


@dataclass(frozen=True)
class Timer:
    on_gpu: bool
    warmup_ms: int = 25
    rep_ms: int = 100
    cpu_reps: int = 5

    def sync(self) -> None:
        if self.on_gpu:
            import torch

            torch.cuda.synchronize()

    def measure(self, fn: Callable[[], object]) -> tuple[float, float, float]:
        """(median, p20, p80) in ms of ``fn()``, which has been called (and compiled) before."""
        if self.on_gpu:
            return bench_gpu(fn, self.warmup_ms, self.rep_ms)
        fn()  # warm-up: the first interpreted call pays for parsing the kernel
        return bench_cpu(fn, self.cpu_reps)


def copy_bandwidth(timer: Timer, device: str) -> dict:
    """Median bandwidth of a large copy on ``device``: bytes read + bytes written per second."""
    import torch

    nbytes = GPU_COPY_BYTES if timer.on_gpu else CPU_COPY_BYTES
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).random_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    timer.sync()
    ms, p20, p80 = timer.measure(lambda: dst.copy_(src))
    del src, dst
    return {"bytes": nbytes, "ms": ms, "p20_ms": p20, "p80_ms": p80,
            "gbs": 2 * nbytes / (ms * 1e-3) / 1e9}
