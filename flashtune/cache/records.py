"""What readers get back (plain dataclasses) and the checks every stored value passes.

Configs are checked with ``flashtune.gen.validate_config`` on the way in and again on the way
out: a row edited behind flashtune's back never reaches a template.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from .keys import MAX_INT32, DeviceInfo, ProblemKey, canonical_json


@dataclass(frozen=True)
class Winner:
    device: DeviceInfo
    family_hash: str
    key: ProblemKey
    config: dict
    median_ms: float
    p20_ms: float
    p80_ms: float
    trials: int
    flashtune_version: str
    tuned_at: datetime


@dataclass(frozen=True)
class Trial:
    device: DeviceInfo
    family_hash: str
    key: ProblemKey
    config: dict
    status: str  # "ok" | "failed"
    median_ms: float | None
    p20_ms: float | None
    p80_ms: float | None
    error: str | None
    measured_at: datetime


def validated_config(op: str, config: Any) -> dict[str, Any]:
    """The config as a plain dict after the variant space accepted it (ValueError if not)."""
    # Imported here: flashtune.gen pulls in torch, and importing flashtune.cache must not.
    from ..gen import validate_config

    if not isinstance(config, Mapping):
        raise TypeError(f"config must be a mapping, got {type(config).__name__}")
    return validate_config(op, config).as_dict()


def check_key(key: ProblemKey) -> None:
    """ValueError/TypeError unless the key's dtype and bucket are ones the op's problems have."""
    # Imported here, as in validated_config: flashtune.gen pulls in torch.
    from ..gen.problem_keys import check_problem_key

    check_problem_key(key.op, key.dtype, key.bucket_dict())


def check_fits_bucket(key: ProblemKey, config: Mapping[str, Any]) -> None:
    """ValueError unless the (valid) config runs some problem of the key's (checked) bucket:
    the dispatcher never serves one that runs none, e.g. a row tile narrower than every row
    of its bucket."""
    from ..gen.problem_keys import bucket_misfit

    misfit = bucket_misfit(key.op, key.dtype, key.bucket_dict(), config)
    if misfit is not None:
        raise ValueError(f"the config runs no problem of its bucket ({misfit}): the "
                         "dispatcher would never use it")


def config_json(op: str, config: Any) -> str:
    return canonical_json(validated_config(op, config))


def check_family_hash(value: Any) -> str:
    if type(value) is not str or not value or len(value) > 128:
        raise TypeError(f"family_hash must be a non-empty str of at most 128 characters, got {value!r}")
    return value


def check_ms(name: str, value: Any, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    # bool is an int: refuse it explicitly; a time is a positive finite number
    if type(value) is bool or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of milliseconds, got {type(value).__name__} ({value!r})")
    try:
        value = float(value)
    except OverflowError:  # an int past float's range (an import file may hold one)
        raise ValueError(f"{name} must be a finite time > 0 ms, got an integer too large for "
                         "a time") from None
    if not math.isfinite(value) or value <= 0.0:
        raise ValueError(f"{name} must be a finite time > 0 ms, got {value!r}")
    return value


def check_timing(median_ms: Any, p20_ms: Any, p80_ms: Any) -> tuple[float, float, float]:
    median = check_ms("median_ms", median_ms)
    p20 = check_ms("p20_ms", p20_ms)
    p80 = check_ms("p80_ms", p80_ms)
    if not p20 <= median <= p80:
        raise ValueError(f"expected p20_ms <= median_ms <= p80_ms, got {p20} / {median} / {p80}")
    return median, p20, p80


def check_trials(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"trials must be an int, got {type(value).__name__} ({value!r})")
    if not 1 <= value <= MAX_INT32:  # the column is a 32-bit INTEGER in PostgreSQL
        raise ValueError(f"trials must be in [1, {MAX_INT32}], got {value}")
    return value


def utc(moment: Any) -> datetime:
    """A stored timestamp as an aware UTC datetime.

    Reads fetch timestamps untyped (SQLite hands back text, PostgreSQL a datetime), so a
    tampered value fails here, for its row only, not inside the driver for the whole query.
    """
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if not isinstance(moment, datetime):
        raise TypeError(f"expected a timestamp, got {type(moment).__name__} ({moment!r})")
    if moment.tzinfo is None:  # everything is stored as UTC
        return moment.replace(tzinfo=timezone.utc)
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31 23:59 at -01:00: past datetime.max in UTC
        raise ValueError(f"timestamp out of range in UTC: {moment.isoformat()}") from None


def now_utc() -> datetime:
    return datetime.now(timezone.utc)


def _device_of(row: Any) -> DeviceInfo:
    return DeviceInfo(row.device_name, row.capability, row.sm_count, row.triton_version)


def stored_json(what: str, text: Any) -> Any:
    """Parse stored JSON text; anything wrong (even nesting deep enough to exhaust Python's
    recursion limit) is a ValueError, which spoils one row, not the whole read."""
    if type(text) is not str:
        raise TypeError(f"{what} must be JSON text, got {type(text).__name__}")
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise ValueError(f"{what} JSON is nested too deeply") from None


class DuplicateKey(ValueError):
    """A JSON object names a key twice (unique_keys)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads's object_pairs_hook for stored rows and import files: a JSON object, refused
    (DuplicateKey) when it names a key twice. json.loads keeps the last value silently
    ("winners": [...] then "winners": [] imported nothing), other readers the first, so which
    one was meant is unknown; flashtune never writes one."""
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise DuplicateKey(f"the key {clip(name, MAX_QUOTED_KEY)!r} appears twice in one "
                               "object")
        found[name] = value
    return found


def _key_of(row: Any) -> ProblemKey:
    bucket = stored_json("bucket", row.bucket)
    if not isinstance(bucket, dict):
        raise TypeError(f"bucket must be a JSON object, got {row.bucket!r}")
    return ProblemKey.make(row.op, row.dtype, bucket)


def _stored_config(row: Any) -> dict[str, Any]:
    return validated_config(row.op, stored_json("config", row.config))


def winner_from_row(row: Any) -> Winner:
    """A Winner from a database row; raises (ValueError/TypeError) on anything tampered."""
    median, p20, p80 = check_timing(row.median_ms, row.p20_ms, row.p80_ms)
    # non-empty, as import requires: a row `flashtune export` writes must import again
    if type(row.flashtune_version) is not str or not row.flashtune_version:
        raise TypeError(f"flashtune_version must be non-empty text, got {row.flashtune_version!r}")
    return Winner(_device_of(row), check_family_hash(row.family_hash), _key_of(row),
                  _stored_config(row), median, p20, p80, check_trials(row.trials),
                  row.flashtune_version, utc(row.tuned_at))


def op_winner_from_row(row: Any) -> Winner:
    """winner_from_row, for readers that serve or hand on winners as flashtune ops' (the
    dispatcher, export): a bucket no problem of the op can have, edited outside flashtune, is
    invalid too. (TuneDB itself stores any op's bucket.)"""
    winner = winner_from_row(row)
    check_key(winner.key)
    return winner


def trial_from_row(row: Any) -> Trial:
    if row.status not in ("ok", "failed"):
        raise ValueError(f"status must be 'ok' or 'failed', got {row.status!r}")
    if row.status == "ok":
        median = check_ms("median_ms", row.median_ms)
    else:
        median = check_ms("median_ms", row.median_ms, optional=True)
    return Trial(_device_of(row), check_family_hash(row.family_hash), _key_of(row),
                 _stored_config(row), row.status, median,
                 check_ms("p20_ms", row.p20_ms, optional=True),
                 check_ms("p80_ms", row.p80_ms, optional=True),
                 row.error if isinstance(row.error, str) else None, utc(row.measured_at))


def describe_row(row: Any) -> str:
    """Enough of a row's key to find it again in a warning."""
    return " ".join(clip(str(getattr(row, name, "?")), MAX_QUOTED_KEY)
                    for name in ("op", "dtype", "bucket"))


# How much of a value read from a database row or an import file a message quotes: a row
# written behind flashtune's back, or a crafted file, can hold a value megabytes long (the
# text columns' lengths bind PostgreSQL only), and a warning or error must stay readable.
MAX_QUOTED_KEY = 200  # each of a row's op, dtype and bucket
MAX_QUOTED_REASON = 500  # why a row was refused, which may quote one of its values


def printable(text: str) -> str:
    """Control characters spelled out (\\x1b): text read from a database row or an import file
    (a device name, a bucket) must not move the cursor, recolour or retitle the terminal of
    whoever reads it (a warning, `flashtune show`'s table)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def clip(text: str, limit: int) -> str:
    """``text`` (quoted from a database row or an import file) made fit for a message: made
    printable, and cut to ``limit`` characters, saying how long it was."""
    text = printable(text)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"
