"""The in-memory table of tuned winners for one device, and the exact/nearest lookup.

Built once per device from ``flashtune.cache.read_runtime_winners``; after that no lookup
touches the database. Rows tuned on other template versions (another family hash) are left
out: their timings say nothing about the kernels rendered now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ..gen import ConfigError, OPS, template_family_hash, validate_config
from ..gen.notices import DispatchWarning
from ..once import warn_at_user
from ..gen.space import Config
from .families import family_of

Bucket = tuple  # sorted (name, value) pairs, as in ProblemKey.bucket


@dataclass(frozen=True)
class TunedEntry:
    bucket: Bucket
    config: Config
    median_ms: float | None


@dataclass(frozen=True)
class Lookup:
    config: Config
    how: str  # "exact" | "nearest" | "default"
    tuned_bucket: Bucket | None  # the winner's bucket for exact and nearest


def bucket_key(op: str, problem: Any) -> Bucket:
    return tuple(sorted(family_of(op).bucket(problem).items()))


def bucket_distance(a: Bucket, b: Bucket, same: tuple[str, ...] = ()) -> float | None:
    """Sum of |log2 a - log2 b| over the numeric fields; None if other fields differ or a
    field named in ``same`` differs."""
    da, db = dict(a), dict(b)
    if da.keys() != db.keys():
        return None
    total = 0.0
    for name, va in da.items():
        vb = db[name]
        numeric = (type(va) is int and type(vb) is int and va > 0 and vb > 0)
        if name in same:
            if va != vb:
                return None
        elif numeric:
            total += abs(math.log2(va) - math.log2(vb))
        elif va != vb:
            return None
    return total


def _faster(a: TunedEntry, b: TunedEntry) -> bool:
    """Of two winners for one bucket (rows whose bucket text differs only in spelling, written
    outside flashtune), whether a should serve rather than b: the lower median, then a fixed
    order of the configs, so the database's row order never decides."""
    def rank(e: TunedEntry):
        return (e.median_ms is None, e.median_ms or 0.0, repr(sorted(e.config.items())))
    return rank(a) < rank(b)


class WinnerTable:
    """(op, dtype) -> tuned entries, for one device."""

    def __init__(self, entries: Mapping[tuple[str, str], Iterable[TunedEntry]] | None = None):
        self._entries: dict[tuple[str, str], dict[Bucket, TunedEntry]] = {}
        for (op, dtype), items in (entries or {}).items():
            by_bucket: dict[Bucket, TunedEntry] = {}
            for e in items:
                kept = by_bucket.get(e.bucket)
                if kept is None or _faster(e, kept):
                    by_bucket[e.bucket] = e
            self._entries[(op, dtype)] = by_bucket

    @classmethod
    def from_winners(cls, winners: Iterable[Any]) -> "WinnerTable":
        """Keep the winners of known ops rendered by today's templates, re-validated."""
        table: dict[tuple[str, str], list[TunedEntry]] = {}
        bad: list[str] = []
        hashes: dict[str, str] = {}
        for w in winners:
            op = w.key.op
            if op not in OPS:
                continue  # an op this version does not know
            if op not in hashes:
                hashes[op] = template_family_hash(op)
            if w.family_hash != hashes[op]:
                continue  # tuned on other templates
            try:
                config = validate_config(op, w.config)
            except ConfigError as err:
                bad.append(f"{op} {dict(w.key.bucket)}: {err}")
                continue
            table.setdefault((op, w.key.dtype), []).append(
                TunedEntry(tuple(w.key.bucket), config, w.median_ms))
        if bad:
            warn_at_user(f"flashtune: ignoring {len(bad)} tuned config(s) that fail validation "
                         f"(first: {bad[0]}); their problems use other tuned or default configs",
                         DispatchWarning)
        return cls(table)

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    def entries(self) -> list[tuple[str, str, TunedEntry]]:
        return [(op, dtype, e) for (op, dtype), d in sorted(self._entries.items()) for e in d.values()]

    def lookup(self, op: str, problem: Any) -> Lookup | None:
        """The exact bucket's winner, else the nearest fitting one (same op and dtype, the
        family's must-match fields, and a config the family says transfers); None if nothing
        fits."""
        by_bucket = self._entries.get((op, problem.dtype))
        if not by_bucket:
            return None
        family = family_of(op)
        problem_misfit = family.misfit
        wanted = bucket_key(op, problem)
        wanted_fields = dict(wanted)
        exact = by_bucket.get(wanted)
        if exact is not None and problem_misfit(exact.config, problem) is None:
            return Lookup(exact.config, "exact", exact.bucket)
        best: tuple | None = None
        for bucket, entry in by_bucket.items():
            if bucket == wanted:
                continue
            distance = bucket_distance(wanted, bucket, family.same)
            if distance is None or problem_misfit(entry.config, problem) is not None:
                continue
            if not family.transfers(entry.config, wanted_fields, dict(bucket)):
                continue
            rank = (distance, repr(bucket))  # ties: a fixed order, so every process agrees
            if best is None or rank < best[0]:
                best = (rank, entry)
        if best is None:
            return None
        return Lookup(best[1].config, "nearest", best[1].bucket)
