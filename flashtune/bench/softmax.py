"""Softmax cases: flashtune.softmax (the dispatcher's tuned winner) next to its peers.

GB/s = 2 * bytes(x) / median time (read x once, write y once); "frac_copy" compares it with the
copy bandwidth measured in the same run.
"""

from __future__ import annotations

from typing import Callable

from .budget import Phase
from .cases import case_line, run_case, skipped_case
from .checks import SoftmaxCheck
from .peers import FLASHTUNE, softmax_impls
from .shapes import softmax_label
from .timing import Timer

COMPILED_PEERS = ("torch.compile",)


def dispatch_info(op: str, rows: int, cols: int, dtype: str, device: str) -> dict:
    """Which config the dispatcher runs for this problem of ``op``, and how it was picked."""
    from ..dispatch import RUNTIME, choice

    if RUNTIME.disabled:
        # FLASHTUNE_DISABLE=1: flashtune.softmax calls torch.softmax and the backward is
        # torch's too (RUNTIME.backward), no flashtune config runs
        return {"how": "torch (FLASHTUNE_DISABLE=1)"}
    try:
        picked = choice(op, (rows, cols), dtype, device)
    except Exception as err:  # noqa: BLE001 - informative only
        return {"error": f"{type(err).__name__}: {err}"[:200]}
    return {"how": picked.how, "config": picked.config.as_dict()}


def run_softmax(shapes, dtypes, timer: Timer, device: str, copy_gbs: float, phase: Phase,
                interpret: bool, log: Callable[[str], None], out: list | None = None) -> list[dict]:
    """Rows of every case, appended to ``out`` as each case ends (kept if the run is stopped)."""
    import torch

    impls = softmax_impls(interpret)
    out = [] if out is None else out
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for n_rows, n_cols in shapes:
            nbytes = n_rows * n_cols * torch.finfo(dtype).bits // 8
            base = {"op": "softmax", "shape": softmax_label(n_rows, n_cols), "rows": n_rows,
                    "cols": n_cols, "dtype": dtype_name, "mib": nbytes / 2**20}
            state = phase.state()
            if state == "skip":
                out += skipped_case(impls, base, "budget exhausted")
                continue
            skip = {p: "budget: compiled peers dropped late in the run" for p in COMPILED_PEERS
                    if state == "lean"}

            def metric(ms: float) -> dict:
                gbs = 2 * nbytes / (ms * 1e-3) / 1e9
                return {"gbs": gbs, "frac_copy": gbs / copy_gbs}

            gen = torch.Generator(device=device).manual_seed(0)
            x = torch.randn(n_rows, n_cols, device=device, dtype=dtype, generator=gen)
            rows = run_case(impls, x, timer, SoftmaxCheck(x), metric, base, skip)
            for row in rows:
                if row["impl"] == FLASHTUNE:
                    row["dispatch"] = dispatch_info("softmax", n_rows, n_cols, dtype_name, device)
            out += rows
            log(case_line(rows))
            del x
            if timer.on_gpu:
                torch.cuda.empty_cache()
    return out

