"""``flashtune show [--all-devices] [--op OP] [--db URL]``: list the tuned winners.

One line per winner of this machine's device (GPU, or the Triton interpreter without one):
op, dtype, problem bucket (softmax: rows x cols; attention: head dim, Nq/Nk, batch x heads,
causal), median time, speedup over the heuristic default config when the
tuner measured that config for the bucket (the cache keeps trials, not peers such as
torch.softmax; a "-" means no such timing was stored), trial count and the config. Winners
tuned on other template versions or space revisions (another family hash) are marked "stale":
the dispatcher ignores them, as it ignores winners whose bucket no problem can have (edited in
the database) or whose config runs no problem of its bucket (both marked "ignored").
"""

from __future__ import annotations

import argparse

from ..gen.registry import OPS
from .options import add_db_option


def register(sub) -> None:
    p = sub.add_parser("show", help="list tuned winners for this GPU", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all-devices", action="store_true", help="winners of every device")
    p.add_argument("--op", choices=sorted(OPS), default=None, help="only this op")
    add_db_option(p)
    p.set_defaults(run=run)


def _default_speedup(db, winner) -> str:
    """Winner vs the heuristic default for the bucket's largest problem, if that was timed."""
    from ..gen import validate_config
    from ..gen.attention_space import AttentionProblem
    from ..gen.attention_space import OPS as ATTENTION_OPS
    from ..gen.attention_space import default_config as attention_default
    from ..gen.softmax_space import bucket_problem, default_config

    bucket = dict(winner.key.bucket)
    try:
        if winner.key.op in ATTENTION_OPS:
            problem = AttentionProblem(int(bucket["bh_bucket"]), 1, 1, int(bucket["nq_bucket"]),
                                       int(bucket["nk_bucket"]), int(bucket["head_dim"]),
                                       bool(bucket["causal"]), winner.key.dtype)
            default = attention_default(winner.key.op, problem, sm_count=winner.device.sm_count)
        else:
            problem = bucket_problem(bucket, winner.key.dtype)
            default = default_config(winner.key.op, problem, sm_count=winner.device.sm_count)
    except (KeyError, ValueError, TypeError):
        return "-"
    try:
        if validate_config(winner.key.op, winner.config) == default:
            # The default won: its trial time (a first measurement) against the winner's
            # re-timed median would compare one config with itself.
            return "1.00x"
    except ValueError:
        pass  # an invalid stored config: compared by its trials below, as before
    for trial in db.trials(winner.device, winner.family_hash, winner.key):
        if trial.status != "ok" or trial.median_ms is None:
            continue
        try:
            if validate_config(winner.key.op, trial.config) == default:
                return f"{trial.median_ms / winner.median_ms:.2f}x"
        except ValueError:
            continue
    return "-"


def run(args) -> int:
    from ..cache import TuneDB
    from ..cache.records import check_fits_bucket, check_key, printable
    from ..dispatch import RUNTIME
    from ..dispatch.settings import as_set
    from ..dispatch.info import compact_config, current_device_info, database_location, database_missing
    from ..gen import current_family_hash
    from ..gen.variants import of_another_family

    where, _ = database_location(args.db)
    missing = database_missing(args.db)
    if missing:
        print(f"no winner database at {printable(str(missing))} (run `flashtune tune` first)")
        return 0
    device = None if args.all_devices else current_device_info()
    with TuneDB(args.db, read_only=True) as db:
        winners = [w for w in db.winners(device) if args.op is None or w.key.op == args.op]
        scope = "all devices" if device is None else f"{device.name} (sm {device.capability}, " \
                                                       f"{device.sm_count} SMs, triton {device.triton_version})"
        print(f"database: {where}")
        print(f"winners for {scope}: {len(winners)}")
        if RUNTIME.disabled and winners:
            print(f"{as_set('FLASHTUNE_DISABLE')}: the runtime uses none of them (softmax ops "
                  "run torch's, attention its heuristic default)")
        if not winners:
            return 0
        header = ["op", "dtype", "bucket", "median ms", "vs default", "trials", "config"]
        if device is None:
            header.insert(0, "device")
        rows = []
        current = {}
        for w in sorted(winners, key=_order):
            if w.key.op not in current:
                current[w.key.op] = current_family_hash(w.key.op)
            bucket = dict(w.key.bucket)
            shape = _bucket_text(bucket)
            config = compact_config(w.config)
            if w.family_hash != current[w.key.op]:
                # Not served either way; a hash of another form than flashtune writes was
                # edited, not tuned on other templates.
                config += ("  [stale: other templates or tunables]"
                           if of_another_family(w.key.op, w.family_hash)
                           else "  [not served: family hash edited outside flashtune]")
            try:
                check_key(w.key)
            except (TypeError, ValueError):  # the runtime and export skip it (op_winner_from_row)
                config += "  [ignored: no problem has this bucket]"
            else:
                try:  # e.g. stored by an older flashtune, whose import let it in
                    check_fits_bucket(w.key, w.config)
                except ValueError:  # the dispatcher never takes it; export leaves it out
                    config += "  [ignored: runs no problem of its bucket]"
            row = [w.key.op, w.key.dtype, shape, f"{w.median_ms:.4f}", _default_speedup(db, w),
                   str(w.trials), config]
            if device is None:
                row.insert(0, w.device.name)
            rows.append(row)
    _print_table(header, rows)
    return 0


def _order(winner) -> tuple:
    """Device, op, dtype, then bucket values; a value sorts among values of its own type, so
    a database holding odd buckets (written through the Python API) still lists."""
    bucket = tuple((name, type(value).__name__, value) for name, value in winner.key.bucket)
    return (winner.device.name, winner.key.op, winner.key.dtype, bucket)


def _bucket_text(bucket: dict) -> str:
    if "head_dim" in bucket:  # attention_fwd
        n = bucket.get("nq_bucket", "?")
        if bucket.get("nk_bucket") != n:
            n = f"{n}/{bucket.get('nk_bucket', '?')}"
        return (f"d{bucket['head_dim']} n{n} bh{bucket.get('bh_bucket', '?')}"
                + (" causal" if bucket.get("causal") else ""))
    grain = bucket.get("row_grain")  # softmax_space.GRAIN_FIELD: rows not of whole vectors
    odd = "" if grain is None else f" grain {grain}"
    return f"{bucket.get('rows_bucket', '?')}x{bucket.get('cols_bucket', '?')}{odd}"


# A cell's most characters: a device name comes from the database, where a tampered row held
# 3,000,000 characters and padded every line of the table to that width.
MAX_CELL = 200


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    from ..cache.records import clip  # printable: a device name comes from the database

    rows = [[clip(cell, MAX_CELL) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
