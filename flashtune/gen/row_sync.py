"""Host side of the row sync that one-launch kernels use (coop and fused split regimes), and
the split regime's partials.

A one-launch kernel spreads each row over SPLITS programs that exchange partial (m, d) states
through global memory and wait for each other. Three kinds of workspace, all kept per (device,
stream): launches on one stream run one after another, while launches on different streams may
run at the same time and must not share them.

- Counters (coop, fused split; the `row_barrier` macro of ``_softmax_common.py.jinja``): zeroed
  int32 [tickets, done, arrivals per row, departures per row]. The kernel leaves them zero when
  it ends, so they are zeroed only when allocated.
- Split partials (the one-launch fused split; `fused_split_workspace`): one fp32 (m, d) pair
  per program, written before it is read within the launch; per CUDA stream only.
- Polled partials (the persistent fused split): each partial is one 64-bit word that readers
  poll directly (no arrival counter, no fences; zero means "not yet"). Two halves alternate
  between launches: a launch writes its half and zeroes the other, which the launch before
  wrote (`polled_partials`).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Callable, NamedTuple

import torch

from ..forks import after_fork_in_child

# Polls of the row's arrival counter before a program stops waiting and computes its partners'
# (m, d) from x itself: about 50-100 ms, far beyond any wait among running programs.
MAX_POLLS = 1 << 16

_COUNTERS: dict[tuple[torch.device, int], torch.Tensor] = {}


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def one_launch(x: torch.Tensor, splits: int, programs_per_sm: int = 0,
               kernel: object = None) -> bool:
    """Whether SPLITS programs per row may wait on each other in one launch on x's device.

    Each running launch leaves at most SPLITS - 1 programs waiting (tickets let every earlier
    row finish), so with SPLITS <= SMs / 4, four launches at once on other streams still leave
    an SM free for the programs they wait on.

    A persistent launch (programs_per_sm > 0: a grid of that many programs per SM) makes
    progress while SPLITS / 2 of its programs run (see its kernel). With SPLITS <=
    programs_per_sm x SMs / 2, four such launches sharing the GPU's programs_per_sm x SMs
    program slots cannot all stay below SPLITS / 2 running programs: one of them always
    progresses. Where fewer programs fit on an SM than the config asks (registers, threads,
    shared memory), the bound takes the number that fit, once `kernel`'s first launch has
    shown it (`note_resident`); that first launch goes by programs_per_sm. Every wait is
    bounded anyway (MAX_POLLS), so nothing hangs: a starved program computes its partners'
    statistics itself, slower. The Triton interpreter runs programs one at a time: never one
    launch there.
    """
    if not x.is_cuda:
        return False
    sms = sm_count(x.device.index)
    if programs_per_sm:
        return 2 * splits <= _programs_that_run(kernel, x, programs_per_sm) * sms
    return splits <= sms // 4


# Programs of a persistent kernel that fit on one SM at once, per (kernel, dtype, device),
# learned from its first launch (the compiled kernel's registers, warps and shared memory).
_RESIDENT: dict[tuple[object, torch.dtype, int | None], int] = {}


def persistent_grid(kernel: object, x: torch.Tensor, programs_per_sm: int, n_items: int) -> int:
    """Programs of a persistent launch: programs_per_sm per SM, or as many as fit on an SM at
    once where that is fewer (known after the kernel's first launch, see `note_resident`).
    Programs past what fits would start only as others exit, find no work item left, and add
    a second, empty wave to the launch (H100, nineteenth session: fp32 16 x 1048576 with 8
    asked for and 5 fitting, 55.3 us against 51.9 us with 5)."""
    return min(n_items, _programs_that_run(kernel, x, programs_per_sm) * sm_count(x.device.index))


def _programs_that_run(kernel: object, x: torch.Tensor, programs_per_sm: int) -> int:
    """programs_per_sm, or the programs of `kernel` that fit on an SM where its first launch
    showed fewer (none known for kernel None, or before that launch)."""
    if kernel is None:
        return programs_per_sm
    return min(programs_per_sm, _RESIDENT.get(_resident_key(kernel, x), programs_per_sm))


def _resident_key(kernel: object, x: torch.Tensor) -> tuple[object, torch.dtype, int | None]:
    """The kernel's Python function (a JITFunction's `fn`; the fast launch path's stand-ins wrap
    the JITFunction as `fn` in turn, one stand-in per plan), x's dtype and device: one entry
    per kernel, however many plans launch it."""
    fn = getattr(kernel, "fn", kernel)
    return (getattr(fn, "fn", fn), x.dtype, x.device.index)


def note_resident(kernel: object, x: torch.Tensor, compiled: object) -> None:
    """Record how many programs of `compiled` (what a launch of `kernel` on x returned) fit on
    one SM: by registers (allocated per warp in units of 256), by threads, by shared memory."""
    key = _resident_key(kernel, x)
    if key in _RESIDENT:
        return
    try:
        warps = int(compiled.metadata.num_warps)
        regs = int(compiled.n_regs)
        shared = int(compiled.metadata.shared)
    except (AttributeError, TypeError, ValueError):
        return  # not a compiled CUDA kernel (another backend): keep programs_per_sm
    props = torch.cuda.get_device_properties(x.device.index)
    per_warp = -(-max(regs, 1) * 32 // 256) * 256
    fit = min(getattr(props, "regs_per_multiprocessor", 65536) // (per_warp * warps),
              getattr(props, "max_threads_per_multi_processor", 2048) // (32 * warps))
    if shared:
        fit = min(fit, getattr(props, "shared_memory_per_multiprocessor", 228 * 1024) // shared)
    _RESIDENT[key] = max(1, fit)


def _current_raw_stream(device: torch.device) -> int:
    """The current stream's handle on a CUDA device: what ``torch.cuda.current_stream(device)
    .cuda_stream`` returns, read the way Triton's own launcher reads it (one C call, about 0.2
    us on an H100 host against 5 us for ``torch.cuda.current_stream``; this runs on every
    launch of a one-launch kernel)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if _RAW_STREAM is not None:
        return _RAW_STREAM(index)
    return torch.cuda.current_stream(index).cuda_stream


# torch's C binding behind torch.cuda.current_stream (Triton's launcher calls it as well); the
# public call where a build lacks it.
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _stream_key(device: torch.device) -> tuple[torch.device, int] | None:
    """The key of the workspace that launches on the current stream share, or None while a
    CUDA graph is being captured: a graph keeps the address it captured and replays on any
    stream, maybe beside other graphs, so it gets a workspace of its own, zeroed inside the
    graph, never cached. (Not CUDA: the Triton interpreter, one stream.)"""
    if device.type != "cuda":
        return (device, 0)
    if torch.cuda.is_current_stream_capturing():
        return None
    return (device, _current_raw_stream(device))


def _kept(cache: dict, key: tuple[torch.device, int] | None, need: int,
          make: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """``cache[key]`` where it holds at least ``need`` words, else ``make(n)`` for n of twice
    that (at least 1024), kept there for the next launch on that stream; a fresh ``make(need)``
    for no key (a graph being captured, see _stream_key)."""
    if key is None:
        return make(need)
    kept = cache.get(key)
    if kept is None or kept.shape[-1] < need:
        kept = make(max(2 * need, 1024))
        cache[key] = kept
    return kept


def _zeroed_counters(device: torch.device) -> Callable[[int], torch.Tensor]:
    return lambda n: torch.zeros(n, dtype=torch.int32, device=device)


def _stats_pair(device: torch.device) -> Callable[[int], torch.Tensor]:
    return lambda n: torch.empty((2, n), dtype=torch.float32, device=device)


def sync_counters(device: torch.device, n_rows: int) -> torch.Tensor:
    """Zeroed counters for a one-launch kernel over n_rows rows on the current stream."""
    return _kept(_COUNTERS, _stream_key(device), 2 + 2 * n_rows, _zeroed_counters(device))


_STATS: dict[tuple[torch.device, int], torch.Tensor] = {}


def split_stats(device: torch.device, n_programs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two fresh fp32 rows of n_programs words for a two-launch split's per-segment partials
    (m and d): another thread on the same stream may enqueue its own first launch between this
    call's two, over any partials they shared."""
    stats = _stats_pair(device)(n_programs)
    return stats[0], stats[1]


def fused_split_workspace(device: torch.device, n_rows: int,
                          n_programs: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The one-launch (fused) split's workspace on the current stream: fp32 rows of at least
    n_programs words for its partials (m and d), and its zeroed counters (sync_counters), with
    one stream lookup. The partials are made once per CUDA stream and reused: launches on one
    stream run one after another, and each writes every partial it reads before reading it.
    Allocating and indexing them on every call took 20-30 us of the one-launch split's host
    time (H200, session 36: 16 x 50257 from 52 to 32 us a call). Fresh ones while a CUDA graph
    is being captured (see _stream_key), and off CUDA: the Triton interpreter has no streams,
    and two threads' launches run at once."""
    key = _stream_key(device)
    stats_key = key if device.type == "cuda" else None
    stats = _kept(_STATS, stats_key, n_programs, _stats_pair(device))
    counters = _kept(_COUNTERS, key, 2 + 2 * n_rows, _zeroed_counters(device))
    return stats[0], stats[1], counters


class Partials(NamedTuple):
    """What a persistent split launch needs: `slots` (its half, all zero, one int64 word per
    work item), `stale` (the other half), `n_stale` (how many of its leading words the launch
    before wrote: this launch zeroes them) and zeroed int32 `tickets` [ticket, exits]."""
    slots: torch.Tensor
    stale: torch.Tensor
    n_stale: int
    tickets: torch.Tensor


class _PartialsState:
    def __init__(self, device: torch.device, capacity: int) -> None:
        self.words = torch.zeros((2, capacity), dtype=torch.int64, device=device)
        # The halves as views made once: indexing `words` costs about 3 us a view on every
        # launch (H100 host), and the launch path is the persistent split's host cost.
        self.halves = (self.words[0], self.words[1])
        self.tickets = torch.zeros(2, dtype=torch.int32, device=device)
        self.half = 0  # the half the next launch writes
        self.written = [0, 0]  # leading words of each half that hold a launch's partials
        # Held by a launch from before it is enqueued to after (_PartialsLaunch), `busy` while
        # it has the halves. A signal handler runs in the thread it interrupts, and one that
        # launched on this workspace meanwhile would wait forever on a plain lock, or, let in,
        # get the half the interrupted launch is about to write: re-entrant, and a launch that
        # finds the workspace busy gets one of its own (_fresh_partials).
        self.lock = threading.RLock()
        self.busy = False


_PARTIALS: dict[tuple[torch.device, int], _PartialsState] = {}
# Re-entrant for a signal handler's launch too; the workspace it makes for a new stream or a
# larger launch is replaced by the interrupted one's (as when a workspace grows).
_PARTIALS_LOCK = threading.RLock()


@after_fork_in_child
def _new_locks() -> None:
    """The workspaces' locks (flashtune.forks). Their tensors stay: CUDA ones belong to the
    parent's CUDA context, which torch refuses to use in a forked child anyway."""
    global _PARTIALS_LOCK
    _PARTIALS_LOCK = threading.RLock()
    for state in _PARTIALS.values():
        state.lock = threading.RLock()
        state.busy = False


def polled_partials(device: torch.device,
                    n_items: int) -> _PartialsLaunch | contextlib.nullcontext[Partials]:
    """The polled-partials workspace for one launch of n_items work items on the current
    stream, as a context manager: launch the kernel inside the `with`.

    Invariant: the half a launch gets is all zero. The launch before (same stream, so finished
    by the time this one runs) wrote the other half's first `n_stale` words, and this launch
    zeroes them. The halves swap only when the launch was enqueued (no exception), under a
    lock, so threads sharing a stream cannot enqueue two launches on one half. A CUDA graph
    gets a workspace of its own (`_stream_key`), and so does a launch that a signal handler
    makes inside another launch on this workspace, in its thread (`_PartialsState`).

    Plain classes rather than a generator context manager: this runs on every launch, and
    the generator machinery cost several microseconds of host time there."""
    key = _stream_key(device)
    if key is None:
        return contextlib.nullcontext(_fresh_partials(device, n_items))
    state = _PARTIALS.get(key)
    if state is None or state.words.shape[1] < n_items:
        with _PARTIALS_LOCK:
            state = _PARTIALS.get(key)
            if state is None or state.words.shape[1] < n_items:
                state = _PARTIALS[key] = _PartialsState(device, max(2 * n_items, 1024))
    return _PartialsLaunch(state, n_items)


class _PartialsLaunch:
    """One launch's hold on a cached workspace (see polled_partials)."""
    __slots__ = ("state", "n_items", "half")

    def __init__(self, state: _PartialsState, n_items: int) -> None:
        self.state = state
        self.n_items = n_items

    def __enter__(self) -> Partials:
        state = self.state
        state.lock.acquire()
        if state.busy:  # a launch of this thread that it interrupted has the halves
            self.half = -1
            return _fresh_partials(state.words.device, self.n_items)
        state.busy = True
        half = self.half = state.half
        return Partials(state.halves[half], state.halves[1 - half], state.written[1 - half],
                        state.tickets)

    def __exit__(self, exc_type, exc, tb) -> None:
        state = self.state
        half = self.half
        try:
            if exc_type is None and half >= 0:  # enqueued: the other half zeroed, this written
                state.written[1 - half] = 0
                state.written[half] = self.n_items
                state.half = 1 - half
        finally:
            if half >= 0:
                state.busy = False
            state.lock.release()


def _fresh_partials(device: torch.device, n_items: int) -> Partials:
    """A zeroed workspace of a launch's own, never kept (nothing to swap on exit): for a launch
    inside a CUDA graph being captured, or one that interrupted a launch on the shared one."""
    words = torch.zeros((2, max(n_items, 1)), dtype=torch.int64, device=device)
    return Partials(words[0], words[1], 0, torch.zeros(2, dtype=torch.int32, device=device))
