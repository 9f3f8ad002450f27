"""Shape checks of a bench result read back from JSON (``flashtune report``).

A hand-edited or truncated JSON must fail with the file, the row and the key named, not with a
KeyError from deep inside the Markdown or the plots. Only what the renderers read is required;
extra keys are fine (newer writers may add some).
"""

from __future__ import annotations

import re
from typing import Any

_NUMBER = (int, float)
# Keys every row has, by section (base of the case + the implementation's status).
ROW_KEYS: dict[str, dict[str, tuple]] = {
    "softmax": {"op": (str,), "shape": (str,), "dtype": (str,), "impl": (str,), "status": (str,),
                "cols": (int,)},
    "backward": {"op": (str,), "shape": (str,), "dtype": (str,), "impl": (str,), "status": (str,),
                 "cols": (int,)},
    "attention": {"op": (str,), "shape": (str,), "dtype": (str,), "impl": (str,),
                  "status": (str,), "B": (int,), "H": (int,), "N": (int,), "D": (int,),
                  "causal": (bool,)},
}
# Keys of a timed row ("ok"), by section.
OK_KEYS = {"softmax": {"ms": _NUMBER, "gbs": _NUMBER}, "backward": {"ms": _NUMBER, "gbs": _NUMBER},
           "attention": {"ms": _NUMBER, "tflops": _NUMBER}}
# Sizes the plots put on log axes and the tables divide by.
SIZE_KEYS = {"cols", "B", "H", "N", "D"}
OVERHEAD_KEYS = {"shape": (list,), "dtype": (str,), "iters": (int,), "repeats": (int,),
                 "choice": (str,), "summary": (str,), "results": (list,)}


class ResultError(ValueError):
    """The JSON is a bench result by its schema, but a part the report needs is missing or wrong."""


def _is(value: Any, kinds: tuple) -> bool:
    # bool is an int subclass: a number field holding true/false is a damaged file.
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        return False
    if float in kinds and isinstance(value, int):
        try:  # the renderers compute in floats: 10**400 cannot be one
            float(value)
        except OverflowError:
            return False
    return True


def _show(value: Any) -> str:
    """A value for a message: its repr, cut short (a tampered file may hold 10**400)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 256 else "a huge integer"
    return text if len(text) <= 80 else text[:77] + "..."


def _kinds(kinds: tuple) -> str:
    return "/".join(k.__name__ for k in kinds)


def _need(mapping: dict, keys: dict[str, tuple], where: str) -> None:
    for key, kinds in keys.items():
        if key not in mapping:
            raise ResultError(f"{where}: missing key {key!r}")
        if not _is(mapping[key], kinds):
            raise ResultError(f"{where}: {key!r} must be {_kinds(kinds)}, got {_show(mapping[key])}")


def _optional(mapping: dict, key: str, kinds: tuple, where: str, null_ok: bool = True) -> None:
    """Absent is fine (the renderers read ``.get(key)``), and so is null where ``null_ok``;
    anything else must be the right kind."""
    if key not in mapping or (null_ok and mapping[key] is None):
        return
    if not _is(mapping[key], kinds):
        raise ResultError(f"{where}: {key!r} must be {_kinds(kinds)} or absent, "
                          f"got {_show(mapping[key])}")


def check_rows(section: str, rows: list) -> None:
    for i, row in enumerate(rows):
        where = f"{section} row {i}"
        if not isinstance(row, dict):
            raise ResultError(f"{where}: must be an object, got {type(row).__name__}")
        _need(row, ROW_KEYS[section], where)
        where += f" ({row['impl']} {row['shape']} {row['dtype']})"
        if section == "attention" and not re.fullmatch(r"\w+", row["dtype"]):
            # it names a plot file (plot_attention_<dtype>.png): "x/y" wrote into a folder
            raise ResultError(f"{where}: 'dtype' must be a name of letters, digits and _, "
                              f"got {_show(row['dtype'])}")
        for key in SIZE_KEYS & set(ROW_KEYS[section]):
            # within a float too: the plots put the sizes on log axes (10**400: OverflowError)
            if row[key] < 1 or not _is(row[key], _NUMBER):
                raise ResultError(f"{where}: {key!r} must be >= 1 and at most 1e308, "
                                  f"got {_show(row[key])}")
        if row["status"] == "ok":
            _need(row, OK_KEYS[section], where)
        for key in ("check", "speedup", "dispatch"):
            _optional(row, key, (dict,), where, null_ok=False)
        _optional(row, "error", (str,), where)
        _optional(row, "causal", (bool,), where)
        check = row.get("check")
        if check is not None:  # the bench writes a verdict with every check: without it the
            _need(check, {"ok": (bool,)}, f"{where} check")  # table and notes would disagree
        check = check or {}
        _optional(check, "detail", (str,), f"{where} check")
        dispatch = row.get("dispatch") or {}
        _optional(dispatch, "how", (str,), f"{where} dispatch", null_ok=False)
        _optional(dispatch, "config", (dict,), f"{where} dispatch")
        _optional(dispatch, "error", (str,), f"{where} dispatch")
        for peer, value in (row.get("speedup") or {}).items():
            if value is not None and not _is(value, _NUMBER):
                raise ResultError(f"{where}: speedup[{peer!r}] must be a number, got {_show(value)}")
        for key in ("mib", "frac_copy"):
            _optional(row, key, _NUMBER, where)


def check_extras(data: dict) -> None:
    """The optional parts: copy bandwidth, host overhead, tuning history, meta numbers."""
    for key in ("wall_s", "budget_s"):
        _optional(data["meta"], key, _NUMBER, "meta")
    _optional(data, "copy", (dict,), "result", null_ok=False)
    _optional(data.get("copy") or {}, "gbs", _NUMBER, "copy")
    _optional(data, "overhead", (dict,), "result")
    overhead = data.get("overhead") or {}
    if "results" in overhead:
        _need(overhead, OVERHEAD_KEYS, "overhead")
        if len(overhead["shape"]) != 2:
            raise ResultError(f"overhead: 'shape' must be [rows, cols], got {overhead['shape']!r}")
        for i, r in enumerate(overhead["results"]):
            if not isinstance(r, dict):
                raise ResultError(f"overhead result {i}: must be an object")
            _need(r, {"name": (str,), "host_us": _NUMBER, "wall_us": _NUMBER}, f"overhead result {i}")
        _optional(overhead, "budget_us", _NUMBER, "overhead", null_ok=False)  # the plot's line
    _optional(data, "tuning", (dict,), "result")
    problems = (data.get("tuning") or {}).get("problems") or []
    if not isinstance(problems, list):
        raise ResultError("tuning: 'problems' must be a list")
    for i, p in enumerate(problems):
        where = f"tuning problem {i}"
        if not isinstance(p, dict):
            raise ResultError(f"{where}: must be an object")
        _need(p, {"op": (str,), "dtype": (str,), "bucket": (dict,), "trials": (list,)}, where)
        _optional(p, "winner_ms", _NUMBER, where)
        bucket = p["bucket"]
        if not all(_is(v, (int, str, bool)) for v in bucket.values()):
            raise ResultError(f"{where}: bucket values must be numbers, text or flags, got {_show(bucket)}")
        if ("rows_bucket" in bucket) != ("cols_bucket" in bucket):
            raise ResultError(f"{where}: bucket needs both rows_bucket and cols_bucket, got {_show(bucket)}")
        for j, t in enumerate(p["trials"]):
            if not isinstance(t, dict):
                raise ResultError(f"{where} trial {j}: must be an object")
            _need(t, {"n": (int,), "status": (str,)}, f"{where} trial {j}")
            if not _is(t["n"], _NUMBER):  # the plot's x axis computes in floats
                raise ResultError(f"{where} trial {j}: 'n' must be int, got {_show(t['n'])}")
            if t["status"] == "ok" and not {"median_ms", "best_ms"} <= set(t):
                raise ResultError(f"{where} trial {j}: an ok trial needs 'median_ms' and 'best_ms'")
            for key in ("median_ms", "best_ms"):
                _optional(t, key, _NUMBER, f"{where} trial {j}")
