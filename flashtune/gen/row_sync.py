"""Host side of the row barrier that one-launch kernels use (coop and fused split regimes).

A one-launch kernel spreads each row over SPLITS programs that exchange partial (m, d) states
through global memory and wait for each other (the kernel side is the `row_barrier` macro of
``_softmax_common.py.jinja``). It needs zeroed int32 counters: [tickets, done, arrivals per row,
departures per row]. The kernel leaves them zero when it ends, so they are zeroed only when
allocated, and kept per (device, stream): launches on one stream run one after another, while
launches on different streams may run at the same time and must not share counters.
"""

from __future__ import annotations

import functools

import torch

# Polls of the row's arrival counter before a program stops waiting and computes its partners'
# (m, d) from x itself: about 50-100 ms, far beyond any wait among running programs.
MAX_POLLS = 1 << 16

_COUNTERS: dict[tuple[torch.device, int], torch.Tensor] = {}


@functools.lru_cache(maxsize=None)
def sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def one_launch(x: torch.Tensor, splits: int, persistent: bool = False) -> bool:
    """Whether SPLITS programs per row may wait on each other in one launch on x's device.

    Each running launch leaves at most SPLITS - 1 programs waiting (tickets let every earlier
    row finish), so with SPLITS <= SMs / 4, four launches at once on other streams still leave
    an SM free for the programs they wait on. A persistent launch (programs_per_sm) only
    needs SPLITS / 2 of its programs running to make progress (see its kernel), hence
    SPLITS <= SMs / 2 for the same four launches. The Triton interpreter runs programs one at
    a time: never one launch there.
    """
    if not x.is_cuda:
        return False
    return splits <= sm_count(x.device.index) // (2 if persistent else 4)


def sync_counters(device: torch.device, n_rows: int) -> torch.Tensor:
    """Zeroed counters for a one-launch kernel over n_rows rows on the current stream."""
    need = 2 + 2 * n_rows
    if torch.cuda.is_current_stream_capturing():
        # A CUDA graph keeps the address it captured and replays on any stream, maybe beside
        # other graphs: it gets counters of its own, zeroed inside the graph, never cached.
        return torch.zeros(need, dtype=torch.int32, device=device)
    key = (device, torch.cuda.current_stream(device).cuda_stream)
    counters = _COUNTERS.get(key)
    if counters is None or counters.numel() < need:
        counters = torch.zeros(max(2 * need, 1024), dtype=torch.int32, device=device)
        _COUNTERS[key] = counters
    return counters
