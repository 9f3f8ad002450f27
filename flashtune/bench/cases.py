"""One benchmark case: every implementation on the same inputs, checked, then timed.

Each implementation gives one row: status "ok" (timed; ``check`` says whether its output is
correct), "unavailable" (cannot run here), "failed" (raised: compile error, out of memory, ...)
or "skipped" (budget). Nothing an implementation does can end the run.
"""

from __future__ import annotations

from typing import Callable

from .peers import FLASHTUNE, Impl, Unavailable, quiet_warnings, sdpa_unavailable
from .report import fmt, passed
from .timing import Timer

MAX_TEXT = 400


def _text(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}"[:MAX_TEXT]


def run_impl(impl: Impl, inputs, timer: Timer, check: Callable, metric: Callable) -> dict:
    row: dict = {"impl": impl.name}
    with quiet_warnings() as caught:
        try:
            fn, context = impl.prepare(inputs)
            with context():
                row["check"] = _checked_call(fn, timer, check)
                ms, p20, p80 = timer.measure(fn)
                # The timed calls may run another path than the first one (flashtune's
                # dispatcher launches through its fast path from the second call on): the
                # output of a call after them must pass as well.
                if row["check"]["ok"]:
                    after = _checked_call(fn, timer, check)
                    if not after["ok"]:
                        after["detail"] = f"output of a call after the timed ones: {after['detail']}"
                        row["check"] = after
            row.update(status="ok", ms=ms, p20_ms=p20, p80_ms=p80, **metric(ms))
        except Unavailable as err:
            row.update(status="unavailable", error=str(err)[:MAX_TEXT])
        except Exception as err:  # noqa: BLE001 - a failing implementation is a result
            reason = sdpa_unavailable(err, caught)
            row.update(status="unavailable" if reason else "failed", error=reason or _text(err))
            _release_memory(timer)
    notes = sorted({str(w.message)[:200] for w in caught})
    if notes:
        row["warnings"] = notes[:5]
    return row


def _checked_call(fn: Callable, timer: Timer, check: Callable) -> dict:
    out = fn()
    timer.sync()
    return check(out)


def run_case(impls: list[Impl], inputs, timer: Timer, check: Callable, metric: Callable,
             base: dict, skip: dict[str, str]) -> list[dict]:
    """Rows of every implementation (``skip``: name -> reason), with flashtune's speedups."""
    rows = []
    for impl in impls:
        if impl.name in skip:
            row = {"impl": impl.name, "status": "skipped", "error": skip[impl.name]}
        else:
            row = run_impl(impl, inputs, timer, check, metric)
        rows.append(dict(base, **row))
    add_speedups(rows)
    return rows


def skipped_case(impls: list[Impl], base: dict, reason: str, status: str = "skipped") -> list[dict]:
    return [dict(base, impl=i.name, status=status, error=reason) for i in impls]


def add_speedups(rows: list[dict]) -> None:
    """flashtune's row gets ``speedup[peer] = peer ms / flashtune ms`` (> 1: flashtune faster).

    Only between outputs that passed their check: a wrong kernel's time is no result, so a
    wrong flashtune output gets no ratio at all, and a wrong peer's output none against it."""
    ours = next((r for r in rows if r["impl"] == FLASHTUNE), None)
    if ours is None or not passed(ours):
        return
    ours["speedup"] = {r["impl"]: r["ms"] / ours["ms"] for r in rows
                      if r["impl"] != FLASHTUNE and passed(r)}


def _release_memory(timer: Timer) -> None:
    if timer.on_gpu:
        import torch

        torch.cuda.empty_cache()


def case_line(rows: list[dict]) -> str:
    """One progress line: each implementation's throughput or status."""
    first = rows[0]
    key = "tflops" if first["op"] == "attention" else "gbs"
    unit = "GB/s" if key == "gbs" else "TFLOP/s"
    parts = []
    for r in rows:
        value = fmt(r[key]) if r.get("status") == "ok" else r.get("status", "?")
        if r.get("status") == "ok" and not r.get("check", {}).get("ok", True):
            value += "(WRONG)"
        parts.append(f"{r['impl']}={value}")
    causal = f" causal={int(first['causal'])}" if "causal" in first else ""
    return f"{first['op']} {first['shape']} {first['dtype']}{causal} [{unit}]: " + " ".join(parts)
