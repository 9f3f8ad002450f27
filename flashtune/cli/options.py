"""Command-line options that several subcommands share."""

from __future__ import annotations

DB_HELP = ("winner database: an SQLAlchemy URL or an SQLite file path (default: $FLASHTUNE_DB, "
           "else tuned.sqlite in the cache folder)")


def add_db_option(parser, extra_help: str = "") -> None:
    """``--db URL``: which winner database the subcommand reads or writes."""
    parser.add_argument("--db", default=None, metavar="URL", help=DB_HELP + extra_help)
