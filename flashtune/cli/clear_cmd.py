"""``flashtune clear [--all-devices] [--yes] [--db URL]``: delete tuned winners and trials.

By default only this machine's device (GPU, or the Triton interpreter without one). Nothing is
deleted without ``--yes``; without it the command says what it would delete.
"""

from __future__ import annotations

import argparse

from .options import add_db_option, check_writable_db


def register(sub) -> None:
    p = sub.add_parser("clear", help="delete tuned winners (this GPU, or all with --all-devices)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--all-devices", action="store_true", help="delete the winners of every device")
    p.add_argument("--yes", action="store_true", help="really delete (no prompt)")
    add_db_option(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cache import TuneDB
    from ..cache.records import printable
    from ..dispatch.info import current_device_info, database_location, database_missing

    check_writable_db(args.db)  # a read-only --db: not "would delete N, run with --yes"
    where, _ = database_location(args.db)
    missing = database_missing(args.db)
    if missing:
        print(f"no winner database at {printable(str(missing))}; nothing to clear")
        return 0
    device = None if args.all_devices else current_device_info()
    scope = "all devices" if device is None else device.name
    # Looked at read-only first, --yes or not: a file with no winners table (another
    # program's database, a mistyped --db) is an error, not one to turn into ours.
    with TuneDB(args.db, read_only=True) as db:
        count = db.count_winners(device)  # every row --yes deletes, valid or not
        empty = db.empty
    if empty:  # no tables at all (a 0-byte file): nothing to delete, no tables to make in it
        print(f"no winners in {where} (an empty database); nothing to clear")
        return 0
    if not args.yes:
        print(f"would delete {count} winner(s) and their trials for {scope} from {where}; "
              "run again with --yes to delete")
        return 1
    with TuneDB(args.db) as db:
        deleted = db.clear(device)
    print(f"deleted {deleted} winner(s) and their trials for {scope} from {where}")
    return 0
