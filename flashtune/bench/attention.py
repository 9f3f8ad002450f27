"""Attention forward cases: flashtune.attention next to SDPA (each backend forced) and FlexAttention.

TFLOP/s = 4 * B * H * N * N * D / median time, x 0.5 for causal.
"""

from __future__ import annotations

from typing import Callable

from .budget import Phase
from .cases import case_line, run_case, skipped_case
from .checks import AttentionCheck
from .peers import FLASHTUNE, attention_impls, sdpa_reference
from .timing import Timer

COMPILED_PEERS = ("flex",)


def tflops(batch: int, heads: int, n: int, d: int, causal: bool, ms: float) -> float:
    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    return flops / (ms * 1e-3) / 1e12


def _config_info(q, k, v, causal: bool) -> dict:
    """The config flashtune.attention runs for these inputs, and how it was picked."""
    from .. import attention_op
    from ..dispatch import attention as dispatch_attention
    from ..gen import attention_ops

    chooser = getattr(attention_op, "_chooser", None)  # what flashtune.attention passes on
    try:
        problem = attention_ops.problem_of(q, k, causal)
        config = attention_ops.select_config(problem, (q, k, v), None, chooser)
        if chooser is dispatch_attention.choose:
            # The dispatcher (the default hook): say how it picked ("exact", "nearest",
            # "default"), as the softmax rows do; "chooser" would hide whether a tuned winner ran.
            # FLASHTUNE_DISABLE=1: the heuristic, whatever the database holds.
            how = ("default" if dispatch_attention.RUNTIME.disabled
                   else dispatch_attention.choice(problem, q.device).how)
        else:
            how = "chooser" if chooser is not None else "default"
    except Exception as err:  # noqa: BLE001 - informative only
        return {"error": f"{type(err).__name__}: {err}"[:200]}
    return {"how": how, "config": config.as_dict()}


def run_attention(shapes, dtypes, timer: Timer, device: str, phase: Phase, interpret: bool,
                  log: Callable[[str], None], out: list | None = None) -> list[dict]:
    """Rows of every case, appended to ``out`` as each case ends (kept if the run is stopped)."""
    import torch

    impls = attention_impls(interpret)
    out = [] if out is None else out
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for shape in shapes:
            for causal in shape.causal:
                b, h, n, d = shape.batch, shape.heads, shape.n, shape.head_dim
                base = {"op": "attention", "shape": shape.name, "B": b, "H": h, "N": n, "D": d,
                        "causal": causal, "dtype": dtype_name}
                state = phase.state()
                if state == "skip":
                    out += skipped_case(impls, base, "budget exhausted")
                    continue
                skip = {p: "budget: compiled peers dropped late in the run"
                        for p in COMPILED_PEERS if state == "lean"}
                out += _one(impls, base, timer, device, dtype, causal, skip, log)
                if timer.on_gpu:
                    torch.cuda.empty_cache()
    return out


def _one(impls, base, timer, device, dtype, causal, skip, log) -> list[dict]:
    import torch

    b, h, n, d = base["B"], base["H"], base["N"], base["D"]
    gen = torch.Generator(device=device).manual_seed(0)
    try:
        q, k, v = (torch.randn(b, h, n, d, device=device, dtype=dtype, generator=gen)
                   for _ in range(3))
        check = AttentionCheck(q, k, v, causal, sdpa_reference(q, k, v, causal))
    except Exception as err:  # noqa: BLE001 - e.g. out of memory: the case, not the run, fails
        return skipped_case(impls, base, f"inputs or reference failed: {type(err).__name__}: {err}"[:400],
                            status="failed")
    rows = run_case(impls, (q, k, v, causal), timer, check,
                    lambda ms: {"tflops": tflops(b, h, n, d, causal, ms)}, base, skip)
    for row in rows:
        if row["impl"] == FLASHTUNE:
            row["dispatch"] = _config_info(q, k, v, causal)
    log(case_line(rows))
    return rows
