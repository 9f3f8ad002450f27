"""Tuning history from the tuner's records: best time so far vs trial, for a few problems.

Read from the winner database (``TuneDB.trials``, ordered by ``measured_at``) for this device.
The problems shown are the winners with the most trials, of today's families (the ones
served). Nothing here creates a database: without one the history is empty and says why.
"""

from __future__ import annotations

from typing import Any


def tuning_history(db_url: Any = None, limit: int = 4) -> dict:
    """{"database", "problems": [{op, dtype, bucket, trials: [{n, status, median_ms, best_ms}]}],
    "note"}; never raises for database trouble (the note says what went wrong)."""
    from ..dispatch.info import current_device_info, database_location, database_missing

    where, _ = database_location(db_url)
    result: dict = {"database": where, "problems": [], "note": None}
    missing = database_missing(db_url)
    if missing:
        result["note"] = f"no winner database at {missing}"
        return result
    try:
        from ..cache import TuneDB
        from ..gen import current_family_hash

        device = current_device_info()
        with TuneDB(db_url, read_only=True) as db:
            # Today's families only: winners of other templates or tunables are not served.
            current = [w for w in db.winners(device)
                       if w.family_hash == current_family_hash(w.key.op)]
            winners = sorted(current, key=lambda w: (-w.trials, w.key.op, w.key.dtype,
                                                     w.key.bucket_json()))
            for w in winners[:limit]:
                trials = sorted(db.trials(w.device, w.family_hash, w.key),
                                key=lambda t: t.measured_at)
                result["problems"].append(_history(w, trials))
    except Exception as err:  # noqa: BLE001 - a report must not fail on the cache
        result["note"] = f"tuning records unreadable: {type(err).__name__}: {err}"[:300]
        return result
    if not result["problems"]:
        result["note"] = f"no tuning records for {device.name}"
    return result


def _history(winner, trials) -> dict:
    best = None
    points = []
    for n, t in enumerate(trials, 1):
        if t.status == "ok" and t.median_ms is not None:
            best = t.median_ms if best is None else min(best, t.median_ms)
        points.append({"n": n, "status": t.status, "median_ms": t.median_ms, "best_ms": best})
    return {"op": winner.key.op, "dtype": winner.key.dtype, "bucket": winner.key.bucket_dict(),
            "winner_ms": winner.median_ms, "trials": points}


def problem_label(problem: dict) -> str:
    bucket = problem["bucket"]
    if "rows_bucket" in bucket:
        shape = f"{bucket['rows_bucket']}x{bucket['cols_bucket']}"
        if "row_grain" in bucket:  # rows not of whole 16-byte vectors
            shape += f" grain {bucket['row_grain']}"
    else:
        shape = " ".join(f"{k}={v}" for k, v in sorted(bucket.items()))
    return f"{problem['op']} {problem['dtype']} {shape}"
