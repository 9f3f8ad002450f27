"""``flashtune export FILE.json [--db URL] [--current-device]``: write tuned winners to JSON.

The file carries winners to another machine (``flashtune import``). Without
``--current-device`` every device's winners are written.
"""

from __future__ import annotations

import argparse
import sys

from .options import add_db_option, file_path


def register(sub) -> None:
    p = sub.add_parser("export", help="write tuned winners to a JSON file",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=file_path, help="JSON file to write (replaced if it exists)")
    add_db_option(p)
    p.add_argument("--current-device", action="store_true",
                   help="only winners of the GPU (or interpreter) this machine runs on")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cache import DeviceInfo, TuneDB

    device = DeviceInfo.current() if args.current_device else None
    # read-only: exporting never creates a database (a missing one is an error) nor waits
    # for a tuner's write lock
    with TuneDB(args.db, read_only=True) as db:
        count = db.export_json(args.file, device=device)
    print(f"exported {count} winner(s) to {args.file}", file=sys.stderr)
    return 0
