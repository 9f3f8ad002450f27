"""Softmax backward cases: flashtune's backward kernel (the tuned winner, or the default) next to
torch's, for softmax and log_softmax.

What is timed is the call autograd makes in a training step: flashtune's eager backward
(``flashtune.dispatch.runtime.RUNTIME.backward``, what ``flashtune.softmax``'s autograd.Function
runs) against ``aten._softmax_backward_data`` / ``aten._log_softmax_backward_data`` (what
torch.softmax's autograd runs). The inputs are the forward's output y (torch's, in the case's
dtype) and a randn gradient dy.

GB/s = 3 * bytes(x) / median time (read y and dy once, write dx once); "frac_copy" compares it
with the copy bandwidth measured in the same run (a copy moves 2 * bytes per byte copied, so the
two rates count bytes the same way).
"""

from __future__ import annotations

from typing import Callable

from .budget import Phase
from .cases import case_line, run_case, skipped_case
from .checks import BackwardCheck
from .peers import FLASHTUNE, backward_impls
from .shapes import softmax_label
from .softmax import dispatch_info
from .timing import Timer

BACKWARD_OPS = ("softmax_backward", "log_softmax_backward")


def run_backward(shapes, dtypes, timer: Timer, device: str, copy_gbs: float, phase: Phase,
                 interpret: bool, log: Callable[[str], None], out: list | None = None) -> list[dict]:
    """Rows of every case (op x dtype x shape), appended to ``out`` as each case ends."""
    import torch

    out = [] if out is None else out
    for op in BACKWARD_OPS:
        is_log = op.startswith("log_")
        impls = backward_impls(is_log)
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            for n_rows, n_cols in shapes:
                nbytes = n_rows * n_cols * torch.finfo(dtype).bits // 8
                base = {"op": op, "shape": softmax_label(n_rows, n_cols), "rows": n_rows,
                        "cols": n_cols, "dtype": dtype_name, "mib": nbytes / 2**20}
                if phase.state() == "skip":
                    out += skipped_case(impls, base, "budget exhausted")
                    continue

                def metric(ms: float) -> dict:
                    gbs = 3 * nbytes / (ms * 1e-3) / 1e9
                    return {"gbs": gbs, "frac_copy": gbs / copy_gbs}

                gen = torch.Generator(device=device).manual_seed(0)
                x = torch.randn(n_rows, n_cols, device=device, dtype=dtype, generator=gen)
                y = (torch.log_softmax if is_log else torch.softmax)(x, -1)
                dy = torch.randn(n_rows, n_cols, device=device, dtype=dtype, generator=gen)
                del x
                rows = run_case(impls, (y, dy), timer, BackwardCheck(y, dy, is_log), metric,
                                base, {})
                for row in rows:
                    if row["impl"] == FLASHTUNE:
                        row["dispatch"] = dispatch_info(op, n_rows, n_cols, dtype_name, device)
                out += rows
                log(case_line(rows))
                del y, dy
                if timer.on_gpu:
                    torch.cuda.empty_cache()
    return out
