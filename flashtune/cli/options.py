"""Command-line options that several subcommands share."""

from __future__ import annotations

import argparse
from pathlib import Path

DB_HELP = ("winner database: an SQLAlchemy URL (sqlite:///PATH?mode=ro: read-only) or an "
           "SQLite file path (default: $FLASHTUNE_DB, "
           "else tuned.sqlite in the cache folder)")


def add_db_option(parser, extra_help: str = "") -> None:
    """``--db URL``: which winner database the subcommand reads or writes."""
    parser.add_argument("--db", default=None, metavar="URL", help=DB_HELP + extra_help)


def check_db_option(db) -> None:
    """A malformed ``--db``, named as such: the cache layer says "url: ..." (the Python API's
    argument), which the command line does not have."""
    from ..cache.engine import resolve_url

    try:
        resolve_url(db)
    except (ValueError, TypeError) as err:
        raise ValueError(f"--db: {str(err).removeprefix('url: ')}") from None


def check_writable_db(db) -> None:
    """``--db`` of a command that writes (tune, import, clear): refused before any other work
    when it is malformed or opens the database read-only (``?mode=ro``)."""
    from ..cache.engine import check_writable, resolve_url

    check_writable(resolve_url(db), from_env=db is None)


def check_readable_db(db) -> None:
    """The winner database of a command that serves its winners (``bench``), opened once
    before any work: the dispatcher would fall back to the default kernels with a warning
    only, and minutes of timings would pass for the tuned winners'. One that does not exist
    is no error (nothing tuned yet: the defaults are what there is to time); one that cannot
    be opened raises the CacheError naming it (exit 2, as for ``show``)."""
    from ..cache import TuneDB
    from ..dispatch.info import database_missing

    if database_missing(db):
        return
    with TuneDB(db, read_only=True):
        pass


def check_out_folder(out: Path) -> None:
    """``--out``: fail before minutes of measurements, not after, when it cannot take the files."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".flashtune-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as err:
        raise OSError(f"--out {out} {_why_no_folder(out, err)}") from err


def _why_no_folder(out: Path, err: OSError) -> str:
    """Why ``out`` cannot take files, in words: the OSError's own text reads
    "[Errno 17] File exists: 'out'" for a file there (and for a link loop), "[Errno 20] Not a
    directory: ..." for a file on its path."""
    import errno

    from ..cache.engine import no_file_there, why_unseen

    unseen = why_unseen(out)  # a link loop, a folder on its path this user may not search
    if unseen:
        return unseen
    if err.errno == errno.EEXIST:  # mkdir(exist_ok=True) found something that is no folder
        there = no_file_there(out)
        return {None: "is a file, not a folder",
                "missing": "is a symbolic link to nothing"}.get(
                    there, "is not a folder (a device, pipe or socket)")
    if err.errno == errno.ENOTDIR:
        return "is not a writable folder (a part of its path is not a folder)"
    return f"is not a writable folder ({err.strerror or err})"


def file_path(text: str) -> str:
    """A FILE argument (export, import): not empty. An empty path reached the user as
    "error: : is a folder" (Path("") is the current folder), naming nothing."""
    if not text:
        raise argparse.ArgumentTypeError("empty; give the path of a JSON file")
    if text == "-":
        # By the Unix habit '-' is stdin or stdout; taken as a path it wrote (or read) a file
        # named "-" in the current folder without a word, and `export - | import -` moved nothing.
        raise argparse.ArgumentTypeError("'-' (stdin or stdout) is not taken; give the path of "
                                         "a JSON file (./- for a file named '-')")
    return text


def file_arg(text: str) -> Path:
    """file_path as a Path (report's RESULT)."""
    return Path(file_path(text))


def folder_path(text: str) -> Path:
    """An --out folder: not empty. Path("") is the current folder, so an empty value (an unset
    variable in --out "$DIR") wrote the report files there without a word."""
    if not text:
        raise argparse.ArgumentTypeError("empty; give a folder path")
    return Path(text)


def ascii_int(text: str, expected: str = "a whole number") -> int:
    """An argparse integer in ASCII digits (spaces around it allowed), as --shape and
    --problem take them: int() also reads other scripts' digits ("٤"), "1_024" and a sign,
    and its ValueError reaches the user as argparse's bare "invalid ... value"."""
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()):
        raise argparse.ArgumentTypeError(f"expected {expected} in ASCII digits, got {text!r}")
    return int(stripped)


def ascii_float(text: str, expected: str = "a number") -> float:
    """An argparse number in ASCII, without "_" (float() also reads "1_0" and other scripts'
    digits, and its ValueError reaches the user as argparse's bare "invalid ... value")."""
    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
