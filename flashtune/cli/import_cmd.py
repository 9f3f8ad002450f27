"""``flashtune import FILE.json [--db URL]``: store winners from a ``flashtune export`` file.

Every row is validated first (fields, types, and the config against the op's variant space);
one bad row rejects the whole file. A row replaces a stored winner only if it is faster; of
several rows of one problem in the file, only the fastest counts.
"""

from __future__ import annotations

import argparse
import sys

from .options import add_db_option, file_path, check_writable_db


def register(sub) -> None:
    p = sub.add_parser("import", help="store winners from a JSON file made by `flashtune export`",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", type=file_path, help="JSON file written by `flashtune export`")
    add_db_option(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cache import TuneDB
    from ..cache.transfer import fastest_per_problem, load_winners, of_other_templates

    check_writable_db(args.db)  # a read-only --db: said before the file is looked at
    # The whole file is checked before the database is opened: opening creates the database
    # file and its folders, which a refused import must not leave behind. (import_json checks
    # it again: the file is small, and the database never takes unchecked rows.)
    rows, superseded = fastest_per_problem(load_winners(args.file))
    with TuneDB(args.db) as db:
        stored = db.import_json(args.file)
    print(f"imported {stored} winner(s) from {args.file} (rows not faster than a stored winner "
          "are left out)", file=sys.stderr)
    if superseded:  # the database keeps one winner per problem, as import_json stores them
        print(f"note: {superseded} row(s) of {args.file} repeat the problem of another row of the "
              "file: only the fastest row of each problem counts", file=sys.stderr)
    stale = sum(1 for row in rows if of_other_templates(row))
    if stale:
        print(f"note: {stale} row(s) of {args.file} were tuned on other templates or tunables "
              "(another flashtune version): kept, but not served until re-tuned with this version "
              "(`flashtune show` marks them stale)", file=sys.stderr)
    return 0
