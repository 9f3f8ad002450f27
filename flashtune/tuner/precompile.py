"""Compile upcoming candidates in parallel so the timing worker finds them in Triton's cache.

Compiling a variant costs far more than timing it, and the GPU can only time one candidate at a
time, but compilation needs no GPU time. A pool of spawn processes "launches" each candidate
with ``warmup=True`` (Triton's own compile-only path: the kernel is compiled and written to
Triton's disk cache, nothing runs on the GPU) on shape-only stand-ins that carry the real
problem's shapes, strides and dtypes, so the specialization (and so the cache key) is the one
the timing worker will ask for. The timing worker then loads the binary instead of compiling.

This is only an optimization: any failure here (a compile error, a crash, a timeout, a Triton
version whose internals differ) is ignored and the timing worker compiles the config itself,
recording the error properly. Used on CUDA only (the interpreter compiles nothing).
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any, Mapping

from .worker import Task, die_with_parent, wait_limit


class _ShapeOnly:
    """Stands in for a tensor argument at compile time: shape, strides, dtype, an aligned pointer."""

    def __init__(self, shape, strides, dtype, device):
        import torch

        self.shape = torch.Size(shape)
        self._strides = tuple(strides)
        self.dtype = dtype
        self.device = device

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def dim(self):
        return len(self.shape)

    def element_size(self):
        return self.dtype.itemsize  # launch helpers size vectors with it (the aligned walk)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"  # the split's one-launch check reads it

    @staticmethod
    def data_ptr():
        return 0  # torch's allocator aligns real buffers to >= 16 bytes as well


_COMPILE_ONLY = False  # set in pool processes once the compile-only launch is in place


def _init_child(device: str, parent_pid: int | None = None) -> None:
    # Never raise here: a failing Pool initializer makes the pool respawn processes forever.
    global _COMPILE_ONLY
    import signal

    if parent_pid is not None:
        die_with_parent(parent_pid)  # a compile that never ends must not outlive a killed tune
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it terminates the pool
    try:
        import torch
        from triton.runtime.jit import KernelInterface

        torch.cuda.set_device(torch.device(device))

        def compile_only(self, grid):
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=True, **kwargs)

        KernelInterface.__getitem__ = compile_only  # this process never runs a kernel
        _COMPILE_ONLY = True
    except Exception:  # noqa: BLE001 - then _compile does nothing and the worker compiles
        _COMPILE_ONLY = False


def _compile(op: str, raw_config: dict, arg_specs: tuple, device: str) -> str | None:
    if not _COMPILE_ONLY:
        return "compile-only launch unavailable in this Triton version"
    try:
        import torch

        from ..gen import load_variant

        dev = torch.device(device)
        fakes = [_ShapeOnly(spec[1], spec[2], getattr(torch, spec[3]), dev) if spec[0] == "t"
                 else spec[1] for spec in arg_specs]
        load_variant(op, raw_config).launch(*fakes)
        return None
    except Exception as err:  # noqa: BLE001 - the timing worker will record the real error
        return f"{type(err).__name__}: {err}"


def arg_specs(task: Task) -> tuple:
    """The launch arguments as the worker passes them (contiguous tensors): ("t", shape,
    strides, dtype name) for a tensor, ("v", value) for anything else."""
    from .families import family

    return family(task.op).arg_specs(task.op, task.problem)


class Precompiler:
    def __init__(self, workers: int, device: str, timeout_s: float = 120.0):
        if workers < 1:
            raise ValueError("precompile workers must be >= 1")
        self.workers = workers
        self.device = device
        self.timeout_s = timeout_s
        self._pool = None
        self._pending: dict[tuple, Any] = {}

    def _ensure_pool(self):
        if self._pool is None:
            ctx = multiprocessing.get_context("spawn")
            self._pool = ctx.Pool(self.workers, initializer=_init_child,
                                  initargs=(self.device, os.getpid()))
        return self._pool

    @staticmethod
    def _key(task: Task, config: Mapping[str, Any]) -> tuple:
        return task.op, task.problem, tuple(sorted(dict(config).items()))

    def submit(self, task: Task, configs) -> None:
        pool = self._ensure_pool()
        specs = arg_specs(task)
        for config in configs:
            key = self._key(task, config)
            if key not in self._pending:
                self._pending[key] = pool.apply_async(_compile, (task.op, dict(config), specs, self.device))

    def wait(self, task: Task, config: Mapping[str, Any]) -> None:
        """Block until ``config`` is compiled (or failed, or timed out: then just go on)."""
        result = self._pending.pop(self._key(task, config), None)
        if result is None:
            return
        try:
            result.get(timeout=wait_limit(self.timeout_s))  # inf would overflow inside get()
        except multiprocessing.TimeoutError:
            # A hung or crashed compile process: start a fresh pool, the worker compiles this one.
            self.close()
        except Exception:  # noqa: BLE001 - only an optimization
            pass

    def forget(self) -> None:
        self._pending.clear()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        self._pending.clear()
