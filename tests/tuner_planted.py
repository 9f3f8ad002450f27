"""Adapters with planted broken variants, for the tuner tests (importable by worker processes)."""

from __future__ import annotations

import os

from flashtune.tuner.adapter import SoftmaxAdapter


class PlantedCompileError(Exception):
    """Stands in for a Triton CompilationError."""


class PlantedAdapter(SoftmaxAdapter):
    """Breaks chosen configs: a compile error, a wrong result, or a dying process.

    Configs are matched by their ``num_warps`` so the tests can pick which ones break.
    """

    def __init__(self, compile_error_warps=(), wrong_warps=(), crash_warps=()):
        self.compile_error_warps = tuple(compile_error_warps)
        self.wrong_warps = tuple(wrong_warps)
        self.crash_warps = tuple(crash_warps)

    def launch(self, op, config, case):
        warps = config["num_warps"]
        if warps in self.compile_error_warps:
            raise PlantedCompileError(f"planted compile error for num_warps={warps}")
        if warps in self.crash_warps:
            os._exit(13)  # what a segfaulting kernel does to its process
        super().launch(op, config, case)
        if warps in self.wrong_warps:
            case.out.mul_(1.01)  # plausible but wrong: 1% off everywhere


class FlakyAdapter(SoftmaxAdapter):
    """Configs with the chosen ``num_warps`` are right at their first launch and wrong at every
    later one (a race that the single check of a trial happens to miss)."""

    def __init__(self, flaky_warps=()):
        self.flaky_warps = tuple(flaky_warps)
        self.launched: set[str] = set()

    def launch(self, op, config, case):
        super().launch(op, config, case)
        key = repr(sorted(config.items()))
        if config["num_warps"] in self.flaky_warps and key in self.launched:
            case.out.mul_(1.01)
        self.launched.add(key)



class InputWritingAdapter(SoftmaxAdapter):
    """Configs with the chosen ``num_warps`` write a right output, then halve their input (a
    kernel that also stores into the tensor it reads), at the launch numbered ``at_launch``
    of each config and every one after it (0: the gate's launch; 1: the first timed one)."""

    def __init__(self, writing_warps=(), at_launch=0):
        self.writing_warps = tuple(writing_warps)
        self.at_launch = at_launch
        self.launches: dict[str, int] = {}

    def launch(self, op, config, case):
        super().launch(op, config, case)
        key = repr(sorted(config.items()))
        n = self.launches[key] = self.launches.get(key, -1) + 1
        if config["num_warps"] in self.writing_warps and n >= self.at_launch:
            case.args[0].mul_(0.5)


class CrashAtRecheckAdapter(SoftmaxAdapter):
    """Configs with the chosen ``num_warps`` kill their process (a faulting kernel) once the
    file ``armed`` exists, i.e. only at the finalists' re-check when a test makes the file
    just before it: their trials passed and were timed."""

    def __init__(self, armed, crash_warps=()):
        self.armed = str(armed)
        self.crash_warps = tuple(crash_warps)

    def launch(self, op, config, case):
        if config["num_warps"] in self.crash_warps and os.path.exists(self.armed):
            os._exit(13)
        super().launch(op, config, case)


def hang(pid_file) -> None:
    """Write this process's pid to ``pid_file``, then never return (a kernel or a compile stuck
    in an endless loop), so a test can see whether the process outlives its parent."""
    import time

    with open(pid_file, "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(0.1)


class HangingAdapter(SoftmaxAdapter):
    """Every launch hangs (see ``hang``)."""

    def __init__(self, pid_file):
        self.pid_file = str(pid_file)

    def launch(self, op, config, case):
        hang(self.pid_file)


import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _fault_kernel(ptr):
    # A store 2**40 elements past the buffer: an illegal address that poisons the CUDA context.
    offset = tl.full((), 1 << 40, tl.int64)
    tl.store(ptr + offset, 1.0)


class FaultingAdapter(SoftmaxAdapter):
    """Configs with the chosen ``num_warps`` launch a kernel that faults the CUDA context."""

    def __init__(self, fault_warps=()):
        self.fault_warps = tuple(fault_warps)

    def launch(self, op, config, case):
        if config["num_warps"] in self.fault_warps:
            _fault_kernel[(1,)](case.out)
            return
        super().launch(op, config, case)


class SlowSetupAdapter(SoftmaxAdapter):
    """Making a problem's inputs takes ``seconds`` (a worker slow to set up: a large problem's
    inputs and oracle, a busy machine)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def make_case(self, op, problem, device, seed):
        import time

        time.sleep(self.seconds)
        return super().make_case(op, problem, device, seed)
