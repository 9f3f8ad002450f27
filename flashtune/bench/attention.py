"""Attention forward cases: flashtune.attention next to SDPA (each backend forced) and FlexAttention.

TFLOP/s = 4 * B * H * N * N * D / median time, x 0.5 for causal (see ``tflops`` for Nq != Nk).
"""

from __future__ import annotations

from typing import Callable

from .budget import Phase
from .cases import case_line, run_case, skipped_case
from .checks import AttentionCheck
from .peers import FLASHTUNE, attention_impls, sdpa_reference
from .timing import Timer

COMPILED_PEERS = ("flex",)


def causal_pairs(n_q: int, n_k: int) -> float:
    """(query, key) pairs a bottom-right causal mask leaves, by the x 0.5 convention.

    Key c is seen by query r when c <= r + Nk - Nq. Nq <= Nk: every query sees the Nk - Nq
    keys before its diagonal plus a triangle, Nq * Nk - Nq^2 / 2; Nq > Nk: the first Nq - Nk
    queries see nothing, the last Nk a triangle, Nk^2 / 2. As in the usual x 0.5 for Nq = Nk
    (FlashAttention's and Triton's tutorial benchmarks), the diagonal's half (N / 2 pairs) is not
    counted. A plain 0.5 * Nq * Nk would be wrong both ways: half the work of a decode step
    (Nq = 1 sees all Nk keys), twice that of Nq = 2 Nk.
    """
    if n_q <= n_k:
        return n_q * n_k - n_q * n_q / 2
    return n_k * n_k / 2


def tflops(batch: int, heads: int, n: int, d: int, causal: bool, ms: float,
           n_k: int | None = None) -> float:
    """4 * B * H * (pairs) * D / time: QK^T and PV are 2 * D flops per pair each. ``n`` is Nq;
    ``n_k`` (default Nq) the key length. With GQA/MQA the FLOPs follow the query heads H (each
    query head does its own QK^T and PV); the k/v heads only change the bytes read."""
    n_k = n if n_k is None else n_k
    pairs = causal_pairs(n, n_k) if causal else n * n_k
    return 4 * batch * heads * pairs * d / (ms * 1e-3) / 1e12


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
