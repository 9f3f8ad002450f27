"""Command-line options that several subcommands share."""

from __future__ import annotations

from pathlib import Path

DB_HELP = ("winner database: an SQLAlchemy URL or an SQLite file path (default: $FLASHTUNE_DB, "
           "else tuned.sqlite in the cache folder)")


def add_db_option(parser, extra_help: str = "") -> None:
    """``--db URL``: which winner database the subcommand reads or writes."""
    parser.add_argument("--db", default=None, metavar="URL", help=DB_HELP + extra_help)


def check_out_folder(out: Path) -> None:
    """``--out``: fail before minutes of measurements, not after, when it cannot take the files."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".flashtune-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise OSError(f"--out {out} is not a writable folder ({err})") from err
